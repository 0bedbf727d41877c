package v1alpha1

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ConversionDataAnnotation keeps, on an object read in one version, what that version
// cannot hold, so that writing it back in that version loses nothing (the pattern of
// Cluster API). On a v1alpha1 object it holds v1alpha2's fields; on a v1alpha2 object,
// the empty v1alpha1 blocks that v1alpha2 has no form for.
const ConversionDataAnnotation = "llamastack.io/conversion-data"

// conversionData is the content of ConversionDataAnnotation.
type conversionData struct {
	// Spec holds, on an object read as v1alpha1, each top-level v1alpha2 spec field
	// that v1alpha1 cannot hold or that would not come back the same.
	Spec *hubSpec `json:"spec,omitempty"`
	// ResolvedDistribution is v1alpha2's status.resolvedDistribution.
	ResolvedDistribution *v1alpha2.ResolvedDistributionStatus `json:"resolvedDistribution,omitempty"`
	// Rollback is v1alpha2's status.rollback.
	Rollback *v1alpha2.RollbackStatus `json:"rollback,omitempty"`

	// EmptyIngress and EmptyPodOverrides record, on an object read as v1alpha2, a
	// v1alpha1 network.ingress or server.podOverrides written as an empty object.
	EmptyIngress      bool `json:"emptyIngress,omitempty"`
	EmptyPodOverrides bool `json:"emptyPodOverrides,omitempty"`
}

// hubSpec is v1alpha2's spec with every field optional: a field is kept only when
// the v1alpha1 form loses it.
type hubSpec struct {
	Distribution   *v1alpha2.DistributionSpec   `json:"distribution,omitempty"`
	BaseConfig     *v1alpha2.BaseConfigSpec     `json:"baseConfig,omitempty"`
	OverrideConfig *v1alpha2.OverrideConfigSpec `json:"overrideConfig,omitempty"`
	Providers      *v1alpha2.ProvidersSpec      `json:"providers,omitempty"`
	Resources      *v1alpha2.ResourcesSpec      `json:"resources,omitempty"`
	Storage        *v1alpha2.StateStorageSpec   `json:"storage,omitempty"`
	Disabled       []v1alpha2.APIName           `json:"disabled,omitempty"`
	Networking     *v1alpha2.NetworkingSpec     `json:"networking,omitempty"`
	Workload       *v1alpha2.WorkloadSpec       `json:"workload,omitempty"`
}

// ConvertTo converts this LlamaStackDistribution to the hub version, v1alpha2. What
// an earlier ConvertFrom kept in ConversionDataAnnotation is restored: the fields
// only v1alpha2 has always, and a field both versions have unless the v1alpha1 client
// changed it since.
func (src *LlamaStackDistribution) ConvertTo(dst *v1alpha2.LlamaStackDistribution) error {
	in := src.DeepCopy()
	data := readConversionData(in.Annotations)
	*dst = *toHub(in)

	if kept := data.Spec; kept != nil {
		restoreSpec(&dst.Spec, kept)
	}
	if data.ResolvedDistribution != nil {
		dst.Status.ResolvedDistribution = data.ResolvedDistribution
	}
	if data.Rollback != nil {
		dst.Status.Rollback = data.Rollback
	}

	var hints conversionData
	if n := in.Spec.Network; n != nil && n.Ingress != nil && reflect.ValueOf(*n.Ingress).IsZero() {
		hints.EmptyIngress = true
	}
	if po := in.Spec.Server.PodOverrides; po != nil && reflect.ValueOf(*po).IsZero() {
		hints.EmptyPodOverrides = true
	}
	return writeConversionData(&dst.ObjectMeta.Annotations, hints)
}

// ConvertFrom converts the hub version, v1alpha2, to this version, keeping in
// ConversionDataAnnotation what v1alpha1 cannot hold.
func (dst *LlamaStackDistribution) ConvertFrom(src *v1alpha2.LlamaStackDistribution) error {
	in := src.DeepCopy()
	hints := readConversionData(in.Annotations)
	*dst = *fromHub(in, hints)

	// What comes back from the v1alpha1 form, field by field, tells what it lost.
	back := toHub(dst).Spec
	var kept hubSpec
	lost := false
	keep := func(hub, returned any, store func()) {
		if !equality.Semantic.DeepEqual(hub, returned) {
			store()
			lost = true
		}
	}
	s := &in.Spec
	keep(s.Distribution, back.Distribution, func() { kept.Distribution = &s.Distribution })
	keep(s.BaseConfig, back.BaseConfig, func() { kept.BaseConfig = s.BaseConfig })
	keep(s.OverrideConfig, back.OverrideConfig, func() { kept.OverrideConfig = s.OverrideConfig })
	keep(s.Providers, back.Providers, func() { kept.Providers = s.Providers })
	keep(s.Resources, back.Resources, func() { kept.Resources = s.Resources })
	keep(s.Storage, back.Storage, func() { kept.Storage = s.Storage })
	keep(s.Disabled, back.Disabled, func() { kept.Disabled = s.Disabled })
	keep(s.Networking, back.Networking, func() { kept.Networking = s.Networking })
	keep(s.Workload, back.Workload, func() { kept.Workload = &s.Workload })

	var data conversionData
	if lost {
		data.Spec = &kept
	}
	data.ResolvedDistribution = in.Status.ResolvedDistribution
	data.Rollback = in.Status.Rollback
	return writeConversionData(&dst.ObjectMeta.Annotations, data)
}

// restoreSpec puts back into spec, converted from a v1alpha1 object, what the
// annotation kept. A field both versions have is restored only when the v1alpha1
// object still says what the kept value said there (the client did not change it);
// otherwise the client's value stands, with the parts only v1alpha2 has.
func restoreSpec(spec *v1alpha2.LlamaStackDistributionSpec, kept *hubSpec) {
	if kept.BaseConfig != nil {
		spec.BaseConfig = kept.BaseConfig
	}
	if kept.Providers != nil {
		spec.Providers = kept.Providers
	}
	if kept.Resources != nil {
		spec.Resources = kept.Resources
	}
	if kept.Storage != nil {
		spec.Storage = kept.Storage
	}
	if kept.Disabled != nil {
		spec.Disabled = kept.Disabled
	}

	// unchanged reports whether the v1alpha1 form of the kept field, converted back,
	// is what the current object gives.
	unchanged := func(set func(*v1alpha2.LlamaStackDistributionSpec), get func(*v1alpha2.LlamaStackDistributionSpec) any) bool {
		probe := &v1alpha2.LlamaStackDistribution{}
		set(&probe.Spec)
		returned := toHub(fromHub(probe, conversionData{})).Spec
		return equality.Semantic.DeepEqual(get(&returned), get(spec))
	}
	if d := kept.Distribution; d != nil && unchanged(
		func(s *v1alpha2.LlamaStackDistributionSpec) { s.Distribution = *d },
		func(s *v1alpha2.LlamaStackDistributionSpec) any { return s.Distribution }) {
		spec.Distribution = *d
	}
	if o := kept.OverrideConfig; o != nil && unchanged(
		func(s *v1alpha2.LlamaStackDistributionSpec) { s.OverrideConfig = o },
		func(s *v1alpha2.LlamaStackDistributionSpec) any { return s.OverrideConfig }) {
		spec.OverrideConfig = o
	}
	if w := kept.Workload; w != nil && unchanged(
		func(s *v1alpha2.LlamaStackDistributionSpec) { s.Workload = *w },
		func(s *v1alpha2.LlamaStackDistributionSpec) any { return s.Workload }) {
		spec.Workload = *w
	}
	if n := kept.Networking; n != nil {
		if unchanged(
			func(s *v1alpha2.LlamaStackDistributionSpec) { s.Networking = n },
			func(s *v1alpha2.LlamaStackDistributionSpec) any { return s.Networking }) {
			spec.Networking = n
		} else if n.TLS != nil && (n.TLS.Enabled || n.TLS.SecretName != "") {
			// The server's own TLS has no v1alpha1 form: it survives other edits.
			if spec.Networking == nil {
				spec.Networking = &v1alpha2.NetworkingSpec{}
			}
			if spec.Networking.TLS == nil {
				spec.Networking.TLS = &v1alpha2.TLSSpec{}
			}
			spec.Networking.TLS.Enabled = n.TLS.Enabled
			spec.Networking.TLS.SecretName = n.TLS.SecretName
		}
	}
}

// readConversionData returns the annotation's content; a missing or unreadable
// annotation (it can be edited by hand) keeps nothing.
func readConversionData(annotations map[string]string) conversionData {
	var data conversionData
	if raw, ok := annotations[ConversionDataAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &data); err != nil {
			return conversionData{}
		}
	}
	return data
}

// writeConversionData sets the annotation to data, or removes it when data keeps nothing.
func writeConversionData(annotations *map[string]string, data conversionData) error {
	if reflect.ValueOf(data).IsZero() {
		delete(*annotations, ConversionDataAnnotation)
		if len(*annotations) == 0 {
			*annotations = nil
		}
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("writing the annotation %s: %w", ConversionDataAnnotation, err)
	}
	if *annotations == nil {
		*annotations = map[string]string{}
	}
	(*annotations)[ConversionDataAnnotation] = string(raw)
	return nil
}

// toHub converts a v1alpha1 object to v1alpha2, field by field, with no annotation.
// in is not modified, nor shared with the result's mutable parts beyond what the
// caller deep-copied.
func toHub(in *LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	out := &v1alpha2.LlamaStackDistribution{TypeMeta: in.TypeMeta, ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion = v1alpha2.SchemeGroupVersion.String()
	srv, cs := &in.Spec.Server, &in.Spec.Server.ContainerSpec
	spec := &out.Spec

	spec.Distribution = v1alpha2.DistributionSpec{Name: srv.Distribution.Name, Image: srv.Distribution.Image}
	if uc := srv.UserConfig; uc != nil {
		spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: uc.ConfigMapName, ConfigMapNamespace: uc.ConfigMapNamespace}
	}

	replicas := in.Spec.Replicas
	w := &spec.Workload
	w.Replicas = &replicas
	w.Workers = srv.Workers
	w.Resources = cs.Resources
	if a := srv.Autoscaling; a != nil {
		w.Autoscaling = (*v1alpha2.AutoscalingSpec)(a)
	}
	if s := srv.Storage; s != nil {
		w.Storage = (*v1alpha2.PVCStorageSpec)(s)
	}
	if p := srv.PodDisruptionBudget; p != nil {
		w.PodDisruptionBudget = (*v1alpha2.PodDisruptionBudgetSpec)(p)
	}
	w.TopologySpreadConstraints = srv.TopologySpreadConstraints
	ov := v1alpha2.WorkloadOverrides{
		ContainerName:            cs.Name,
		Env:                      cs.Env,
		Command:                  cs.Command,
		Args:                     cs.Args,
		ContainerSecurityContext: cs.SecurityContext,
	}
	if po := srv.PodOverrides; po != nil {
		ov.ServiceAccountName = po.ServiceAccountName
		ov.TerminationGracePeriodSeconds = po.TerminationGracePeriodSeconds
		ov.Volumes = po.Volumes
		ov.VolumeMounts = po.VolumeMounts
		ov.SecurityContext = po.SecurityContext
	}
	if !reflect.ValueOf(ov).IsZero() {
		w.Overrides = &ov
	}

	net := v1alpha2.NetworkingSpec{Port: cs.Port}
	if t := srv.TLSConfig; t != nil {
		net.TLS = &v1alpha2.TLSSpec{}
		if b := t.CABundle; b != nil {
			net.TLS.CABundle = &v1alpha2.CABundleConfig{ConfigMapName: b.ConfigMapName, ConfigMapNamespace: b.ConfigMapNamespace}
			if b.ConfigMapKeys != nil {
				net.TLS.CABundle.ConfigMapKeys = make([]v1alpha2.ConfigMapKey, len(b.ConfigMapKeys))
				for i, k := range b.ConfigMapKeys {
					net.TLS.CABundle.ConfigMapKeys[i] = v1alpha2.ConfigMapKey(k)
				}
			}
		}
	}
	if n := in.Spec.Network; n != nil {
		// expose is written out when there is something to say, or to keep an
		// otherwise empty network present.
		if n.ExposeRoute || n.Ingress != nil || n.AllowedFrom == nil {
			expose := n.ExposeRoute
			net.Expose = &v1alpha2.ExposeSpec{Enabled: &expose}
		}
		if ing := n.Ingress; ing != nil {
			net.Expose.ClassName = ing.ClassName
			net.Expose.Hostname = ing.Host
			net.Expose.TLSSecretName = ing.TLSSecretName
			net.Expose.Annotations = ing.Annotations
		}
		if af := n.AllowedFrom; af != nil {
			net.AllowedFrom = &v1alpha2.AllowedFromSpec{Namespaces: af.Namespaces}
			if af.Labels != nil {
				net.AllowedFrom.Labels = make([]v1alpha2.LabelKey, len(af.Labels))
				for i, l := range af.Labels {
					net.AllowedFrom.Labels[i] = v1alpha2.LabelKey(l)
				}
			}
		}
	}
	if !reflect.ValueOf(net).IsZero() {
		spec.Networking = &net
	}

	st := &in.Status
	out.Status = v1alpha2.LlamaStackDistributionStatus{
		ObservedGeneration: st.ObservedGeneration,
		Phase:              v1alpha2.Phase(st.Phase),
		Version:            v1alpha2.VersionInfo(st.Version),
		DistributionConfig: v1alpha2.DistributionConfig{
			ActiveDistribution:     st.DistributionConfig.ActiveDistribution,
			AvailableDistributions: st.DistributionConfig.AvailableDistributions,
		},
		Conditions:        st.Conditions,
		AvailableReplicas: st.AvailableReplicas,
		Replicas:          st.Replicas,
		Selector:          st.Selector,
		ServiceURL:        st.ServiceURL,
		RouteURL:          st.RouteURL,
	}
	if ps := st.DistributionConfig.Providers; ps != nil {
		out.Status.DistributionConfig.Providers = make([]v1alpha2.ProviderInfo, len(ps))
		for i, p := range ps {
			out.Status.DistributionConfig.Providers[i] = v1alpha2.ProviderInfo{
				API:          p.API,
				ProviderID:   p.ProviderID,
				ProviderType: p.ProviderType,
				Config:       p.Config,
				Health:       v1alpha2.ProviderHealthStatus{Status: p.Health.Status, Message: p.Health.Message},
			}
		}
	}
	return out
}

// fromHub converts a v1alpha2 object to v1alpha1, field by field; hints bring back
// the empty v1alpha1 blocks that v1alpha2 cannot hold. What v1alpha1 has no field for
// is dropped: the caller keeps it in the annotation.
func fromHub(in *v1alpha2.LlamaStackDistribution, hints conversionData) *LlamaStackDistribution {
	out := &LlamaStackDistribution{TypeMeta: in.TypeMeta, ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion = SchemeGroupVersion.String()
	spec := &in.Spec
	w := &spec.Workload
	srv := &out.Spec.Server

	if w.Replicas != nil {
		out.Spec.Replicas = *w.Replicas
	}
	srv.Distribution = DistributionType{Name: spec.Distribution.Name, Image: spec.Distribution.Image}
	if o := spec.OverrideConfig; o != nil {
		srv.UserConfig = &UserConfigSpec{ConfigMapName: o.ConfigMapName, ConfigMapNamespace: o.ConfigMapNamespace}
	}
	srv.Workers = w.Workers
	srv.ContainerSpec.Resources = w.Resources
	if a := w.Autoscaling; a != nil {
		srv.Autoscaling = (*AutoscalingSpec)(a)
	}
	if s := w.Storage; s != nil {
		srv.Storage = (*StorageSpec)(s)
	}
	if p := w.PodDisruptionBudget; p != nil {
		srv.PodDisruptionBudget = (*PodDisruptionBudgetSpec)(p)
	}
	srv.TopologySpreadConstraints = w.TopologySpreadConstraints
	if ov := w.Overrides; ov != nil {
		srv.ContainerSpec.Name = ov.ContainerName
		srv.ContainerSpec.Env = ov.Env
		srv.ContainerSpec.Command = ov.Command
		srv.ContainerSpec.Args = ov.Args
		srv.ContainerSpec.SecurityContext = ov.ContainerSecurityContext
		po := PodOverrides{
			ServiceAccountName:            ov.ServiceAccountName,
			TerminationGracePeriodSeconds: ov.TerminationGracePeriodSeconds,
			Volumes:                       ov.Volumes,
			VolumeMounts:                  ov.VolumeMounts,
			SecurityContext:               ov.SecurityContext,
		}
		if !reflect.ValueOf(po).IsZero() {
			srv.PodOverrides = &po
		}
	}
	if srv.PodOverrides == nil && hints.EmptyPodOverrides {
		srv.PodOverrides = &PodOverrides{}
	}

	if net := spec.Networking; net != nil {
		srv.ContainerSpec.Port = net.Port
		if t := net.TLS; t != nil {
			srv.TLSConfig = &TLSConfig{}
			if b := t.CABundle; b != nil {
				srv.TLSConfig.CABundle = &CABundleConfig{ConfigMapName: b.ConfigMapName, ConfigMapNamespace: b.ConfigMapNamespace}
				if b.ConfigMapKeys != nil {
					srv.TLSConfig.CABundle.ConfigMapKeys = make([]ConfigMapKey, len(b.ConfigMapKeys))
					for i, k := range b.ConfigMapKeys {
						srv.TLSConfig.CABundle.ConfigMapKeys[i] = ConfigMapKey(k)
					}
				}
			}
		}
		if net.Expose != nil || net.AllowedFrom != nil {
			n := &NetworkSpec{}
			if e := net.Expose; e != nil {
				n.ExposeRoute = e.Enabled == nil || *e.Enabled
				if e.ClassName != nil || e.Hostname != "" || e.TLSSecretName != "" || e.Annotations != nil {
					n.Ingress = &IngressSpec{ClassName: e.ClassName, Host: e.Hostname, TLSSecretName: e.TLSSecretName, Annotations: e.Annotations}
				}
			}
			if n.Ingress == nil && hints.EmptyIngress {
				n.Ingress = &IngressSpec{}
			}
			if af := net.AllowedFrom; af != nil {
				n.AllowedFrom = &AllowedFromSpec{Namespaces: af.Namespaces}
				if af.Labels != nil {
					n.AllowedFrom.Labels = make([]LabelKey, len(af.Labels))
					for i, l := range af.Labels {
						n.AllowedFrom.Labels[i] = LabelKey(l)
					}
				}
			}
			out.Spec.Network = n
		}
	}

	st := &in.Status
	out.Status = LlamaStackDistributionStatus{
		ObservedGeneration: st.ObservedGeneration,
		Phase:              Phase(st.Phase),
		Version:            VersionInfo(st.Version),
		DistributionConfig: DistributionConfig{
			ActiveDistribution:     st.DistributionConfig.ActiveDistribution,
			AvailableDistributions: st.DistributionConfig.AvailableDistributions,
		},
		Conditions:        st.Conditions,
		AvailableReplicas: st.AvailableReplicas,
		Replicas:          st.Replicas,
		Selector:          st.Selector,
		ServiceURL:        st.ServiceURL,
		RouteURL:          st.RouteURL,
	}
	if ps := st.DistributionConfig.Providers; ps != nil {
		out.Status.DistributionConfig.Providers = make([]ProviderInfo, len(ps))
		for i, p := range ps {
			out.Status.DistributionConfig.Providers[i] = ProviderInfo{
				API:          p.API,
				ProviderID:   p.ProviderID,
				ProviderType: p.ProviderType,
				Config:       p.Config,
				Health:       ProviderHealthStatus{Status: p.Health.Status, Message: p.Health.Message},
			}
		}
	}
	return out
}
