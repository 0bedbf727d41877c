package controller

// Offline checks for the fuzz targets: which specs the CRD admits, and whether a child
// the builders make would pass the API server's validation. They use apimachinery's
// validation helpers only (the API's own validators live in k8s.io/kubernetes, which
// this module does not depend on); hack/validate runs the real validators and the real
// CRD admission over the same corpus (see hack/fuzz.sh).

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// maxConfigMapBytes is what the API server lets a ConfigMap hold (data and binaryData).
const maxConfigMapBytes = 1024 * 1024

// Patterns of the CRD's markers (types.go).
var (
	subdomainPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	containerPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	namespaceEntry   = regexp.MustCompile(`^(\*|[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`)
	budgetPercent    = regexp.MustCompile(`^(100|[1-9]?[0-9])%$`)
	noSpace          = regexp.MustCompile(`^[^\s\v\x{85}\p{Z}]+$`)
	// quantityPattern is the schema's pattern of a resource.Quantity given as a string.
	quantityPattern    = regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)
	ingressHostPattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelKeyPattern    = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
)

// admittedSpec decodes a spec as the API server does (field names are case-sensitive)
// and reports whether the CRD would admit a CR with it: a mirror of the markers in
// types.go, kept cheap. hack/validate checks every corpus entry against the real CRD.
// The CRD's defaults that the builders depend on are applied.
func admittedSpec(raw []byte) (v1alpha1.LlamaStackDistributionSpec, bool) {
	var spec v1alpha1.LlamaStackDistributionSpec
	var fields map[string]any
	if utiljson.Unmarshal(raw, &spec) != nil || utiljson.Unmarshal(raw, &fields) != nil {
		return spec, false
	}
	if _, set := fields["replicas"]; !set {
		spec.Replicas = 1 // +kubebuilder:default=1
	}
	// Quantities as written: Go's decoding trims and accepts more than the schema.
	quantities := []any{lookup(fields, "server", "storage", "size")}
	for _, list := range []string{"limits", "requests"} {
		if m, ok := lookup(fields, "server", "containerSpec", "resources", list).(map[string]any); ok {
			for _, q := range m {
				quantities = append(quantities, q)
			}
		}
	}
	for _, q := range quantities {
		if str, ok := q.(string); ok && !quantityPattern.MatchString(str) {
			return spec, false
		}
	}
	s := &spec.Server
	subdomain := func(v string) bool { return len(v) <= 253 && subdomainPattern.MatchString(v) }
	ok := spec.Replicas >= 0 &&
		(s.Distribution.Name == "") != (s.Distribution.Image == "") &&
		(s.Distribution.Image == "" || noSpace.MatchString(s.Distribution.Image)) &&
		(s.Workers == nil || *s.Workers >= 1) &&
		s.ContainerSpec.Port >= 0 && s.ContainerSpec.Port <= 65535 &&
		(s.ContainerSpec.Name == "" || (len(s.ContainerSpec.Name) <= 63 && containerPattern.MatchString(s.ContainerSpec.Name)))
	if o := s.PodOverrides; o != nil {
		ok = ok && (o.TerminationGracePeriodSeconds == nil || *o.TerminationGracePeriodSeconds >= 0) &&
			(o.ServiceAccountName == "" || subdomain(o.ServiceAccountName))
		for _, m := range o.VolumeMounts {
			ok = ok && strings.HasPrefix(m.MountPath, "/")
		}
	}
	if p := s.PodDisruptionBudget; p != nil {
		budget := func(v *intstr.IntOrString) bool {
			return v == nil || (v.Type == intstr.Int && v.IntVal >= 0) || (v.Type == intstr.String && budgetPercent.MatchString(v.StrVal))
		}
		ok = ok && (p.MinAvailable == nil || p.MaxUnavailable == nil) && budget(p.MinAvailable) && budget(p.MaxUnavailable)
	}
	if a := s.Autoscaling; a != nil {
		ok = ok && a.MaxReplicas >= 1 &&
			(a.MinReplicas == nil || (*a.MinReplicas >= 1 && *a.MinReplicas <= a.MaxReplicas)) &&
			(a.TargetCPUUtilizationPercentage == nil || *a.TargetCPUUtilizationPercentage >= 1) &&
			(a.TargetMemoryUtilizationPercentage == nil || *a.TargetMemoryUtilizationPercentage >= 1)
	}
	if st := s.Storage; st != nil {
		ok = ok && len(st.AccessModes) <= 4 &&
			(st.MountPath == "" || strings.HasPrefix(st.MountPath, "/")) &&
			(st.Size == nil || st.Size.Sign() > 0) &&
			(st.StorageClassName == nil || *st.StorageClassName == "" || subdomain(*st.StorageClassName))
		for _, m := range st.AccessModes {
			ok = ok && slices.Contains([]corev1.PersistentVolumeAccessMode{
				corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod}, m)
		}
	}
	if uc := s.UserConfig; uc != nil {
		ok = ok && uc.ConfigMapName != ""
	}
	if tls := s.TLSConfig; tls != nil && tls.CABundle != nil {
		ok = ok && tls.CABundle.ConfigMapName != "" && len(tls.CABundle.ConfigMapKeys) <= 50
		keys := make([]string, len(tls.CABundle.ConfigMapKeys))
		for i, k := range tls.CABundle.ConfigMapKeys {
			keys[i] = string(k)
		}
		ok = ok && revision.ValidateCAKeys(keys) == nil
	}
	if n := spec.Network; n != nil {
		if ing := n.Ingress; ing != nil {
			ok = ok && (ing.ClassName == nil || subdomain(*ing.ClassName)) &&
				(ing.TLSSecretName == "" || subdomain(ing.TLSSecretName)) &&
				len(ing.Host) <= 253 && (ing.Host == "" || ingressHostPattern.MatchString(ing.Host)) &&
				len(ing.Annotations) <= 64
			for k := range ing.Annotations {
				ok = ok && len(k) <= 317 && labelKeyPattern.MatchString(k)
			}
		}
		if af := n.AllowedFrom; af != nil {
			for _, ns := range af.Namespaces {
				ok = ok && len(ns) <= 63 && namespaceEntry.MatchString(ns)
			}
			for _, k := range af.Labels {
				ok = ok && len(k) <= 317 && labelKeyPattern.MatchString(string(k))
			}
		}
	}
	return spec, ok
}

// lookup returns m[path...], or nil.
func lookup(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// userPartsValid reports whether the parts of the spec that are copied into the pod as
// they are (environment, volumes, mounts, resources) are valid on their own, as far as
// the helpers tell. The CRD cannot check these embedded core types; when they are
// invalid the API server rejects the Deployment and the CR reports ResourceInvalid,
// which is intended, so such specs prove nothing here.
func userPartsValid(spec *v1alpha1.LlamaStackDistributionSpec) bool {
	cs := &spec.Server.ContainerSpec
	for _, e := range cs.Env {
		if len(validation.IsRelaxedEnvVarName(e.Name)) > 0 {
			return false
		}
	}
	if resourceErrors(cs.Resources, field.NewPath("resources")) != nil {
		return false
	}
	for _, c := range spec.Server.TopologySpreadConstraints {
		if c.MaxSkew <= 0 || len(metav1validation.ValidateLabelName(c.TopologyKey, field.NewPath("topologyKey"))) > 0 {
			return false
		}
	}
	if o := spec.Server.PodOverrides; o != nil {
		names := map[string]bool{}
		for _, v := range o.Volumes {
			if names[v.Name] || len(validation.IsDNS1123Label(v.Name)) > 0 {
				return false
			}
			names[v.Name] = true
		}
		paths := map[string]bool{}
		for _, m := range o.VolumeMounts {
			if m.MountPath == "" || paths[m.MountPath] || m.Name == "" {
				return false
			}
			paths[m.MountPath] = true
		}
	}
	return true
}

// childErrors checks one child with the rules of the API server's validation that the
// helpers can express.
func childErrors(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deploymentErrors(o)
	case *corev1.Service:
		return serviceErrors(o)
	case *corev1.PersistentVolumeClaim:
		return pvcErrors(o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return hpaErrors(o)
	case *policyv1.PodDisruptionBudget:
		return pdbErrors(o)
	case *networkingv1.Ingress:
		return ingressErrors(o)
	case *networkingv1.NetworkPolicy:
		return networkPolicyErrors(o)
	case *corev1.ConfigMap:
		return configMapErrors(o)
	}
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("no check for %T", obj))}
}

func metaErrors(o metav1.Object, name apimachineryvalidation.ValidateNameFunc) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMetaAccessor(o, true, name, field.NewPath("metadata"))
}

func selectorErrors(sel *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p)
}

func deploymentErrors(d *appsv1.Deployment) field.ErrorList {
	errs := metaErrors(d, apimachineryvalidation.NameIsDNSSubdomain)
	spec := field.NewPath("spec")
	if d.Spec.Replicas != nil {
		errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(*d.Spec.Replicas), spec.Child("replicas"))...)
	}
	errs = append(errs, selectorErrors(d.Spec.Selector, spec.Child("selector"))...)
	tmpl := d.Spec.Template
	errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, spec.Child("template", "metadata", "labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(tmpl.Annotations, spec.Child("template", "metadata", "annotations"))...)
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	switch st := d.Spec.Strategy; st.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if st.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(spec.Child("strategy", "rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if st.RollingUpdate == nil {
			errs = append(errs, field.Required(spec.Child("strategy", "rollingUpdate"), "the API server defaults it only on create"))
		}
	default:
		errs = append(errs, field.NotSupported[string](spec.Child("strategy", "type"), st.Type, nil))
	}
	return append(errs, podSpecErrors(&tmpl.Spec, spec.Child("template", "spec"))...)
}

func podSpecErrors(ps *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, v := range ps.Volumes {
		vp := p.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
		}
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes[v.Name] = true
		if v.ConfigMap != nil {
			for _, msg := range validation.IsDNS1123Subdomain(v.ConfigMap.Name) {
				errs = append(errs, field.Invalid(vp.Child("configMap", "name"), v.ConfigMap.Name, msg))
			}
		}
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(vp.Child("persistentVolumeClaim", "claimName"), ""))
		}
	}
	if len(ps.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	for i := range ps.Containers {
		errs = append(errs, containerErrors(&ps.Containers[i], volumes, p.Child("containers").Index(i))...)
	}
	if sa := ps.ServiceAccountName; sa != "" {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(sa, false) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), sa, msg))
		}
	}
	if g := ps.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	for i, c := range ps.TopologySpreadConstraints {
		if c.MaxSkew <= 0 || c.TopologyKey == "" {
			errs = append(errs, field.Invalid(p.Child("topologySpreadConstraints").Index(i), c, "maxSkew and topologyKey are required"))
		}
	}
	return errs
}

func containerErrors(c *corev1.Container, volumes map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
	}
	if strings.TrimSpace(c.Image) == "" || c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must be non-empty, without leading or trailing whitespace"))
	}
	for i, port := range c.Ports {
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(p.Child("ports").Index(i).Child("containerPort"), port.ContainerPort, msg))
		}
	}
	envs := map[string]bool{}
	for i, e := range c.Env {
		ep := p.Child("env").Index(i).Child("name")
		for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep, e.Name, msg))
		}
		if envs[e.Name] {
			errs = append(errs, field.Duplicate(ep, e.Name)) // not an API rule; the controller's own
		}
		envs[e.Name] = true
	}
	paths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes[m.Name] {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		if paths[m.MountPath] {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths[m.MountPath] = true
	}
	errs = append(errs, resourceErrors(c.Resources, p.Child("resources"))...)
	for _, pr := range []struct {
		name    string
		probe   *corev1.Probe
		oneShot bool // successThreshold must be 1
	}{{"startupProbe", c.StartupProbe, true}, {"livenessProbe", c.LivenessProbe, true}, {"readinessProbe", c.ReadinessProbe, false}} {
		if pr.probe == nil {
			continue
		}
		pp := p.Child(pr.name)
		if pr.oneShot && pr.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
		for _, n := range []struct {
			field string
			v     int32
		}{{"periodSeconds", pr.probe.PeriodSeconds}, {"timeoutSeconds", pr.probe.TimeoutSeconds},
			{"failureThreshold", pr.probe.FailureThreshold}, {"successThreshold", pr.probe.SuccessThreshold}} {
			if n.v < 0 {
				errs = append(errs, field.Invalid(pp.Child(n.field), n.v, "must be greater than or equal to 0"))
			}
		}
		if h := pr.probe.HTTPGet; h != nil && h.Port.Type == intstr.Int {
			for _, msg := range validation.IsValidPortNum(h.Port.IntValue()) {
				errs = append(errs, field.Invalid(pp.Child("httpGet", "port"), h.Port, msg))
			}
		}
	}
	return errs
}

// resourceErrors: quantities are not negative, and a request is not above its limit.
func resourceErrors(r corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		l    corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for name, q := range list.l {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Child(list.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

func serviceErrors(s *corev1.Service) field.ErrorList {
	errs := metaErrors(s, apimachineryvalidation.NameIsDNS1035Label)
	p := field.NewPath("spec")
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Selector, p.Child("selector"))...)
	if len(s.Spec.Ports) == 0 {
		errs = append(errs, field.Required(p.Child("ports"), ""))
	}
	for i, port := range s.Spec.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortName(port.Name) {
			errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
		}
		for _, msg := range validation.IsValidPortNum(int(port.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
		}
		for _, msg := range validation.IsValidPortNum(port.TargetPort.IntValue()) {
			errs = append(errs, field.Invalid(pp.Child("targetPort"), port.TargetPort, msg))
		}
	}
	return errs
}

func pvcErrors(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := metaErrors(pvc, apimachineryvalidation.NameIsDNSSubdomain)
	p := field.NewPath("spec")
	if len(pvc.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), ""))
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("resources", "requests", "storage"), q.String(), "must be greater than zero"))
	}
	if sc := pvc.Spec.StorageClassName; sc != nil && *sc != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*sc) {
			errs = append(errs, field.Invalid(p.Child("storageClassName"), *sc, msg))
		}
	}
	return errs
}

func hpaErrors(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	errs := metaErrors(h, apimachineryvalidation.NameIsDNSSubdomain)
	p := field.NewPath("spec")
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), h.Spec.MinReplicas, "must be at least 1 and at most maxReplicas"))
	}
	if h.Spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than 0"))
	}
	for i, m := range h.Spec.Metrics {
		if m.Resource == nil || m.Resource.Target.AverageUtilization == nil || *m.Resource.Target.AverageUtilization <= 0 {
			errs = append(errs, field.Invalid(p.Child("metrics").Index(i), m, "needs a positive averageUtilization"))
		}
	}
	return errs
}

func pdbErrors(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	errs := metaErrors(pdb, apimachineryvalidation.NameIsDNSSubdomain)
	p := field.NewPath("spec")
	if pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(p, pdb.Spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	for name, v := range map[string]*intstr.IntOrString{"minAvailable": pdb.Spec.MinAvailable, "maxUnavailable": pdb.Spec.MaxUnavailable} {
		if v != nil {
			errs = append(errs, intOrPercentErrors(*v, p.Child(name))...)
		}
	}
	return append(errs, selectorErrors(pdb.Spec.Selector, p.Child("selector"))...)
}

// intOrPercentErrors: a non-negative integer, or a percentage from 0% to 100%.
func intOrPercentErrors(v intstr.IntOrString, p *field.Path) field.ErrorList {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, v.IntVal, "must be greater than or equal to 0")}
		}
		return nil
	}
	if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, v.StrVal, strings.Join(msgs, "; "))}
	}
	if n, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false); err != nil || n > 100 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

func ingressErrors(ing *networkingv1.Ingress) field.ErrorList {
	errs := metaErrors(ing, apimachineryvalidation.NameIsDNSSubdomain)
	p := field.NewPath("spec")
	if c := ing.Spec.IngressClassName; c != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*c) {
			errs = append(errs, field.Invalid(p.Child("ingressClassName"), *c, msg))
		}
	}
	for i, tls := range ing.Spec.TLS {
		for _, msg := range validation.IsDNS1123Subdomain(tls.SecretName) {
			errs = append(errs, field.Invalid(p.Child("tls").Index(i).Child("secretName"), tls.SecretName, msg))
		}
	}
	for i, r := range ing.Spec.Rules {
		rp := p.Child("rules").Index(i)
		if r.Host != "" {
			host := strings.TrimPrefix(r.Host, "*.")
			for _, msg := range validation.IsDNS1123Subdomain(host) {
				errs = append(errs, field.Invalid(rp.Child("host"), r.Host, msg))
			}
		}
		if r.HTTP == nil {
			continue
		}
		for j, path := range r.HTTP.Paths {
			if s := path.Backend.Service; s != nil {
				for _, msg := range validation.IsDNS1035Label(s.Name) {
					errs = append(errs, field.Invalid(rp.Child("http", "paths").Index(j).Child("backend", "service", "name"), s.Name, msg))
				}
				for _, msg := range validation.IsValidPortNum(int(s.Port.Number)) {
					errs = append(errs, field.Invalid(rp.Child("http", "paths").Index(j).Child("backend", "service", "port"), s.Port.Number, msg))
				}
			}
		}
	}
	return errs
}

func networkPolicyErrors(np *networkingv1.NetworkPolicy) field.ErrorList {
	errs := metaErrors(np, apimachineryvalidation.NameIsDNSSubdomain)
	p := field.NewPath("spec")
	errs = append(errs, selectorErrors(&np.Spec.PodSelector, p.Child("podSelector"))...)
	for i, rule := range np.Spec.Ingress {
		rp := p.Child("ingress").Index(i)
		for j, port := range rule.Ports {
			if port.Port != nil && port.Port.Type == intstr.Int {
				for _, msg := range validation.IsValidPortNum(port.Port.IntValue()) {
					errs = append(errs, field.Invalid(rp.Child("ports").Index(j).Child("port"), port.Port, msg))
				}
			}
		}
		for j, peer := range rule.From {
			pp := rp.Child("from").Index(j)
			if peer.PodSelector != nil {
				errs = append(errs, selectorErrors(peer.PodSelector, pp.Child("podSelector"))...)
			}
			if peer.NamespaceSelector != nil {
				errs = append(errs, selectorErrors(peer.NamespaceSelector, pp.Child("namespaceSelector"))...)
			}
		}
	}
	return errs
}

func configMapErrors(cm *corev1.ConfigMap) field.ErrorList {
	errs := metaErrors(cm, apimachineryvalidation.NameIsDNSSubdomain)
	size := 0
	for k, v := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		size += len(k) + len(v)
	}
	if size > maxConfigMapBytes {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxConfigMapBytes))
	}
	return errs
}

// statusErrors checks a computed status against the CRD's status schema rules that a
// status write would hit: the conditions' own validation, the phase enum, a parseable
// selector.
func statusErrors(st *v1alpha2.LlamaStackDistributionStatus) field.ErrorList {
	p := field.NewPath("status")
	errs := metav1validation.ValidateConditions(st.Conditions, p.Child("conditions"))
	switch st.Phase {
	case "", v1alpha2.PhasePending, v1alpha2.PhaseInitializing, v1alpha2.PhaseReady, v1alpha2.PhaseFailed, v1alpha2.PhaseTerminating:
	default:
		errs = append(errs, field.NotSupported[string](p.Child("phase"), st.Phase, nil))
	}
	if _, err := labels.Parse(st.Selector); err != nil {
		errs = append(errs, field.Invalid(p.Child("selector"), st.Selector, err.Error()))
	}
	if st.ObservedGeneration < 0 || st.Replicas < 0 || st.AvailableReplicas < 0 {
		errs = append(errs, field.Invalid(p, st, "counts must not be negative"))
	}
	return errs
}
