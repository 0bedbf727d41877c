package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// ConversionDataAnnotation keeps, on an object read in one version, what that version
// cannot hold, so that writing it back in that version loses nothing (the pattern of
// Cluster API). On a v1alpha1 object it holds v1alpha2's fields; on a v1alpha2 object,
// the v1alpha1 forms that v1alpha2 has no field for (a block written empty, or left
// out although v1alpha2 needs it to hold a field of its own).
const ConversionDataAnnotation = "llamastack.io/conversion-data"

// conversionData is the content of ConversionDataAnnotation.
type conversionData struct {
	// Spec holds, on an object read as v1alpha1, each top-level v1alpha2 spec field
	// that v1alpha1 cannot hold or that would not come back the same, whole: it is the
	// base against which a v1alpha1 client's write is merged, field by field.
	Spec *hubSpec `json:"spec,omitempty"`
	// ResolvedDistribution is v1alpha2's status.resolvedDistribution.
	ResolvedDistribution *v1alpha2.ResolvedDistributionStatus `json:"resolvedDistribution,omitempty"`
	// Rollback is v1alpha2's status.rollback.
	Rollback *v1alpha2.RollbackStatus `json:"rollback,omitempty"`

	// On an object read as v1alpha2: the v1alpha1 shapes it came from. On an object
	// read as v1alpha1 (with Spec): the shapes its v1alpha1 form was made with, so that
	// a write can be told apart from what was read.
	shape
}

// shape records the v1alpha1 forms v1alpha2 has no field for. Each is honoured only
// where the v1alpha2 object still allows it, so one left behind by a later v1alpha2
// edit changes nothing.
type shape struct {
	// EmptyIngress and EmptyPodOverrides: network.ingress or server.podOverrides was
	// written as an empty object.
	EmptyIngress      bool `json:"emptyIngress,omitempty"`
	EmptyPodOverrides bool `json:"emptyPodOverrides,omitempty"`
	// NoTLSConfig: server.tlsConfig was left out, though networking.tls holds
	// v1alpha2's own enabled or secretName; shown again once it has a caBundle.
	NoTLSConfig bool `json:"noTLSConfig,omitempty"`
	// NoNetwork: network was left out, though networking.expose holds v1alpha2's own
	// type, httpRoute or route (with enabled false); shown again once it says more.
	NoNetwork bool `json:"noNetwork,omitempty"`
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
// an earlier ConvertFrom kept in ConversionDataAnnotation is merged back field by
// field: a field only v1alpha2 has is always restored, whatever else the write
// changed; a field both versions have takes the client's value where the client
// changed it (cleared included), and the kept value, with the form only v1alpha2 can
// give it, where it did not.
func (src *LlamaStackDistribution) ConvertTo(dst *v1alpha2.LlamaStackDistribution) error {
	in := src.DeepCopy()
	data := readConversionData(in.Annotations)
	*dst = *toHub(in)

	if data.Spec != nil {
		merged, err := mergeKept(dst.Spec, data.Spec, data.shape)
		if err != nil {
			return err
		}
		dst.Spec = merged
	}
	if data.ResolvedDistribution != nil {
		dst.Status.ResolvedDistribution = data.ResolvedDistribution
	}
	if data.Rollback != nil {
		dst.Status.Rollback = data.Rollback
	}
	return writeConversionData(&dst.ObjectMeta.Annotations, conversionData{shape: shapeOf(in, dst)})
}

// shapeOf records the v1alpha1 forms of in that its conversion, out, cannot hold.
func shapeOf(in *LlamaStackDistribution, out *v1alpha2.LlamaStackDistribution) shape {
	var s shape
	if n := in.Spec.Network; n != nil && n.Ingress != nil && reflect.ValueOf(*n.Ingress).IsZero() {
		s.EmptyIngress = true
	}
	if po := in.Spec.Server.PodOverrides; po != nil && reflect.ValueOf(*po).IsZero() {
		s.EmptyPodOverrides = true
	}
	if net := out.Spec.Networking; net != nil {
		s.NoTLSConfig = in.Spec.Server.TLSConfig == nil && net.TLS != nil
		s.NoNetwork = in.Spec.Network == nil && net.Expose != nil
	}
	return s
}

// ConvertFrom converts the hub version, v1alpha2, to this version, keeping in
// ConversionDataAnnotation what v1alpha1 cannot hold.
func (dst *LlamaStackDistribution) ConvertFrom(src *v1alpha2.LlamaStackDistribution) error {
	in := src.DeepCopy()
	shape := readConversionData(in.Annotations).shape
	*dst = *fromHub(in, shape)

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
		data.shape = shape
	}
	data.ResolvedDistribution = in.Status.ResolvedDistribution
	data.Rollback = in.Status.Rollback
	return writeConversionData(&dst.ObjectMeta.Annotations, data)
}

// mergeKept merges a v1alpha1 client's write, converted (written), with what the
// annotation kept of the object the client read (kept, whose v1alpha1 form was made
// with shape). It is a three-way merge on the JSON form: the base is what the client
// read, as v1alpha1 gives it back; where the write equals the base, the kept value
// stands (the fields only v1alpha2 has are never in either, so they always stand);
// where it differs, the client's value wins, and a block the client removed keeps
// only the fields only v1alpha2 has.
func mergeKept(written v1alpha2.LlamaStackDistributionSpec, kept *hubSpec, shape shape) (v1alpha2.LlamaStackDistributionSpec, error) {
	// The object the client read: its write, with each kept block as it was.
	read := written.DeepCopy()
	if kept.Distribution != nil {
		read.Distribution = *kept.Distribution
	}
	if kept.Workload != nil {
		read.Workload = *kept.Workload
	}
	if kept.BaseConfig != nil {
		read.BaseConfig = kept.BaseConfig
	}
	if kept.OverrideConfig != nil {
		read.OverrideConfig = kept.OverrideConfig
	}
	if kept.Providers != nil {
		read.Providers = kept.Providers
	}
	if kept.Resources != nil {
		read.Resources = kept.Resources
	}
	if kept.Storage != nil {
		read.Storage = kept.Storage
	}
	if kept.Disabled != nil {
		read.Disabled = kept.Disabled
	}
	if kept.Networking != nil {
		read.Networking = kept.Networking
	}
	// What the client saw of it, as v1alpha1 gives it back.
	base := toHub(fromHub(&v1alpha2.LlamaStackDistribution{Spec: *read}, shape)).Spec

	var docs [3]map[string]any
	for i, spec := range []*v1alpha2.LlamaStackDistributionSpec{read, &base, &written} {
		raw, err := json.Marshal(spec)
		if err != nil {
			return written, fmt.Errorf("merging the kept v1alpha2 fields: %w", err)
		}
		// Numbers stay as written: an int64 would lose digits as a float64.
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&docs[i]); err != nil {
			return written, fmt.Errorf("merging the kept v1alpha2 fields: %w", err)
		}
	}
	raw, err := json.Marshal(merge3(docs[0], docs[1], docs[2]))
	if err != nil {
		return written, fmt.Errorf("merging the kept v1alpha2 fields: %w", err)
	}
	var out v1alpha2.LlamaStackDistributionSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		return written, fmt.Errorf("merging the kept v1alpha2 fields: %w", err)
	}

	// The blocks only v1alpha2 has come out of the merge as they went in; taken as
	// kept, the raw JSON of provider settings keeps its very bytes.
	out.BaseConfig, out.Providers, out.Resources, out.Storage, out.Disabled =
		read.BaseConfig, read.Providers, read.Resources, read.Storage, read.Disabled

	// An expose the client has none of is there only for v1alpha2's own fields: the
	// client left the server unexposed, which enabled (true when unset) must say.
	if out.Networking != nil && out.Networking.Expose != nil && (written.Networking == nil || written.Networking.Expose == nil) {
		out.Networking.Expose.Enabled = ptr.To(false)
	}
	return out, nil
}

// merge3 returns read with the changes from base to written: each key whose value
// written changed (or removed) takes written's value (or goes), each other keeps
// read's; objects are merged key by key, and an object written removed keeps only
// the keys base never had.
func merge3(read, base, written map[string]any) map[string]any {
	out := make(map[string]any, len(read))
	for k, v := range read {
		out[k] = v
	}
	keys := make(map[string]bool, len(base)+len(written))
	for k := range base {
		keys[k] = true
	}
	for k := range written {
		keys[k] = true
	}
	for k := range keys {
		b, inBase := base[k]
		w, inWritten := written[k]
		if inBase && inWritten && reflect.DeepEqual(b, w) {
			continue
		}
		r, isObject := read[k].(map[string]any)
		bo, baseObject := objectOrNone(b, inBase)
		wo, writtenObject := objectOrNone(w, inWritten)
		if isObject && baseObject && writtenObject {
			m := merge3(r, bo, wo)
			if !inWritten && len(m) == 0 {
				delete(out, k)
			} else {
				out[k] = m
			}
			continue
		}
		if inWritten {
			out[k] = w
		} else {
			delete(out, k)
		}
	}
	return out
}

// objectOrNone returns v as a JSON object, an absent value as an empty one.
func objectOrNone(v any, present bool) (map[string]any, bool) {
	if !present {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	return m, ok
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
	srv := &in.Spec.Server
	spec := &out.Spec

	spec.Distribution = v1alpha2.DistributionSpec{Name: srv.Distribution.Name, Image: srv.Distribution.Image}
	if uc := srv.UserConfig; uc != nil {
		spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: uc.ConfigMapName, ConfigMapNamespace: uc.ConfigMapNamespace}
	}
	spec.Workload = workloadToHub(in)
	spec.Networking = networkingToHub(in)
	out.Status = statusToHub(&in.Status)
	return out
}

// workloadToHub is the v1alpha2 workload of in.
func workloadToHub(in *LlamaStackDistribution) v1alpha2.WorkloadSpec {
	srv, cs := &in.Spec.Server, &in.Spec.Server.ContainerSpec
	var w v1alpha2.WorkloadSpec
	replicas := in.Spec.Replicas
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
		ContainerName:            hubContainerName(cs.Name),
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
	return w
}

// networkingToHub is the v1alpha2 networking of in; nil when it has nothing to say.
func networkingToHub(in *LlamaStackDistribution) *v1alpha2.NetworkingSpec {
	srv, cs := &in.Spec.Server, &in.Spec.Server.ContainerSpec
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
	if reflect.ValueOf(net).IsZero() {
		return nil
	}
	return &net

}

// statusToHub is st in v1alpha2.
func statusToHub(st *LlamaStackDistributionStatus) v1alpha2.LlamaStackDistributionStatus {
	out := v1alpha2.LlamaStackDistributionStatus{
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
		out.DistributionConfig.Providers = make([]v1alpha2.ProviderInfo, len(ps))
		for i, p := range ps {
			out.DistributionConfig.Providers[i] = v1alpha2.ProviderInfo{
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
// the v1alpha1 shapes that v1alpha2 cannot hold. What v1alpha1 has no field for
// is dropped: the caller keeps it in the annotation.
func fromHub(in *v1alpha2.LlamaStackDistribution, hints shape) *LlamaStackDistribution {
	out := &LlamaStackDistribution{TypeMeta: in.TypeMeta, ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion = SchemeGroupVersion.String()
	spec := &in.Spec
	srv := &out.Spec.Server

	if w := spec.Workload.Replicas; w != nil {
		out.Spec.Replicas = *w
	}
	srv.Distribution = DistributionType{Name: spec.Distribution.Name, Image: spec.Distribution.Image}
	if o := spec.OverrideConfig; o != nil {
		srv.UserConfig = &UserConfigSpec{ConfigMapName: o.ConfigMapName, ConfigMapNamespace: o.ConfigMapNamespace}
	}
	workloadFromHub(&spec.Workload, srv, hints)
	if net := spec.Networking; net != nil {
		out.Spec.Network = networkingFromHub(net, srv, hints)
	}
	out.Status = statusFromHub(&in.Status)
	return out
}

// DefaultContainerName is the server container's name when the CR does not name it:
// v1alpha1's schema default, v1alpha2's unset overrides.containerName.
const DefaultContainerName = "llama-stack"

// hubContainerName is v1alpha2's overrides.containerName for v1alpha1's
// containerSpec.name: the default stays unset. The API server writes v1alpha1's
// schema default into every v1alpha1 write, so a v1alpha1 client's edit of a CR that
// never named its container would otherwise name it in v1alpha2.
func hubContainerName(name string) string {
	if name == DefaultContainerName {
		return ""
	}
	return name
}

// workloadFromHub writes the v1alpha2 workload w into srv.
func workloadFromHub(w *v1alpha2.WorkloadSpec, srv *ServerSpec, hints shape) {
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
	srv.ContainerSpec.Name = DefaultContainerName
	if ov := w.Overrides; ov != nil {
		if ov.ContainerName != "" {
			srv.ContainerSpec.Name = ov.ContainerName
		}
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
}

// networkingFromHub writes the port and TLS of net into srv, and returns the v1alpha1
// network of net (nil when it has none).
func networkingFromHub(net *v1alpha2.NetworkingSpec, srv *ServerSpec, hints shape) *NetworkSpec {
	srv.ContainerSpec.Port = net.Port
	if t := net.TLS; t != nil && (t.CABundle != nil || !hints.NoTLSConfig) {
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
	if net.Expose == nil && net.AllowedFrom == nil {
		return nil
	}
	n := &NetworkSpec{}
	if e := net.Expose; e != nil {
		n.ExposeRoute = e.Enabled == nil || *e.Enabled
		if e.ClassName != nil || e.Hostname != "" || e.TLSSecretName != "" || e.Annotations != nil {
			n.Ingress = &IngressSpec{ClassName: e.ClassName, Host: e.Hostname, TLSSecretName: e.TLSSecretName, Annotations: e.Annotations}
		}
	}
	// An ingress: {} converts to an expose, so without one the hint is stale.
	if n.Ingress == nil && hints.EmptyIngress && net.Expose != nil {
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
	if hints.NoNetwork && reflect.ValueOf(*n).IsZero() {
		return nil
	}
	return n
}

// statusFromHub is st in v1alpha1.
func statusFromHub(st *v1alpha2.LlamaStackDistributionStatus) LlamaStackDistributionStatus {
	out := LlamaStackDistributionStatus{
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
		out.DistributionConfig.Providers = make([]ProviderInfo, len(ps))
		for i, p := range ps {
			out.DistributionConfig.Providers[i] = ProviderInfo{
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
