package children

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// Probes of the server container, all an HTTP GET of /v1/health on the container port.
//
// The startup probe is upstream's (first try after 15 s, then 3 tries 10 s apart).
// Readiness and liveness run only after it succeeded. Upstream had none (#157), because
// a long request (document ingestion, a slow inference call) can keep /v1/health from
// answering in time; so both are lenient:
//   - readiness every 10 s with a 5 s timeout; three failures in a row (about 30 s) take
//     the pod out of its Service until it answers again. It restarts nothing, and a
//     server too busy to answer its health check for half a minute is one to route
//     around.
//   - liveness every 30 s with a 10 s timeout; only five failures in a row (about
//     2.5 minutes without an answer) restart the container: a hung server is restarted,
//     one busy with a long request is not.
const (
	healthPath                 = "/v1/health"
	startupInitialDelaySeconds = int32(15)
	startupTimeoutSeconds      = int32(30)
	startupFailureThreshold    = int32(3)
	startupSuccessThreshold    = int32(1)

	readinessPeriodSeconds    = int32(10)
	readinessTimeoutSeconds   = int32(5)
	readinessFailureThreshold = int32(3)
	readinessSuccessThreshold = int32(1)

	livenessPeriodSeconds    = int32(30)
	livenessTimeoutSeconds   = int32(10)
	livenessFailureThreshold = int32(5)
	livenessSuccessThreshold = int32(1) // the API requires 1 for liveness
)

// Default spreading of the replicas, upstream's terms. Unlike upstream they are in the
// pod template whatever the replica count (soft: one pod schedules as before), so that
// scaling, by spec.replicas, kubectl scale or an HPA, never changes the template and
// never rolls the pods; with storage (Recreate) a roll would be an outage.
const (
	antiAffinityWeight           = int32(100)
	topologyKeyHostname          = "kubernetes.io/hostname"
	topologyKeyZone              = "topology.kubernetes.io/zone"
	topologyKeyRegion            = "topology.kubernetes.io/region"
	defaultTopologySpreadMaxSkew = int32(1)
)

// serverVersionProbe is a Python program that prints which way the installed
// llama_stack has to be started: "distribution" (before 0.2.17), "core"
// (before 0.3.0) or "uvicorn". It runs inside a double-quoted sh string, so it
// must not contain a double quote, a dollar sign, a backquote or a backslash.
const serverVersionProbe = `
import importlib.metadata
from packaging.version import parse
v = parse(parse(importlib.metadata.version('llama_stack')).base_version)
if v < parse('0.2.17'):
    print('distribution')
elif v < parse('0.3.0'):
    print('core')
else:
    print('uvicorn')
`

// StartupScript starts the llama-stack server with the user's configuration in
// the way the installed version expects. Every branch execs, so the server is
// PID 1 and receives SIGTERM directly. When the version cannot be detected the
// newest way (uvicorn with a factory) is used.
const StartupScript = `mode="$(python3 -c "` + serverVersionProbe + `" 2>/dev/null)" || mode=uvicorn
case "$mode" in
distribution)
  exec python3 -m llama_stack.distribution.server.server --config ` + revision.UserConfigPath + `
  ;;
core)
  exec python3 -m llama_stack.core.server.server ` + revision.UserConfigPath + `
  ;;
*)
  exec uvicorn llama_stack.core.server.server:create_app --host 0.0.0.0 --port "${LLS_PORT:-8321}" --workers "${LLS_WORKERS:-1}" --factory
  ;;
esac
`

// NewDeployment builds the desired server Deployment of l. It makes no API
// calls and neither aliases nor mutates l.
func NewDeployment(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) *appsv1.Deployment {
	var replicas *int32
	if in.Replicas != nil {
		replicas = ptr.To(*in.Replicas)
	}

	// The rolling-update parameters are the API server's defaults, set explicitly so that
	// the controller owns them: switching to Recreate (which forbids them) then removes
	// them in the same apply, instead of leaving defaulted values nobody owns.
	defaultRollingStep := intstr.FromString("25%")
	strategy := appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: &defaultRollingStep,
			MaxSurge:       ptr.To(defaultRollingStep),
		},
	}
	if l.Spec.Workload.Storage != nil {
		// One pod at a time: a ReadWriteOnce volume cannot attach to two.
		strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}

	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            llsd.DeploymentName(l),
			Namespace:       l.Namespace,
			Labels:          llsd.ChildLabels(l),
			Annotations:     map[string]string{llsd.AnnotationDistribution: llsd.DistributionLabel(l), llsd.AnnotationImage: in.Image},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(l, llsd.ControllerKind)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: llsd.SelectorLabels(l)},
			Strategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      llsd.SelectorLabels(l),
					Annotations: podAnnotations(in),
				},
				Spec: newPodSpec(l, in),
			},
		},
	}
}

// podAnnotations are the pod template's hashes of the content its pods read (config,
// CA bundle, certificate): a change of it rolls the pods.
func podAnnotations(in revision.Inputs) map[string]string {
	annotations := map[string]string{}
	if in.UserConfigMap != "" {
		annotations[llsd.AnnotationUserConfigHash] = in.UserConfigHash
	}
	if in.CABundleHash != "" {
		annotations[llsd.AnnotationCABundleHash] = in.CABundleHash
	}
	if in.TLS != nil {
		annotations[llsd.AnnotationTLSHash] = in.TLS.Hash
	}
	if len(annotations) == 0 {
		return nil
	}
	return annotations
}

// newPodSpec is the spec of the server pods of l.
func newPodSpec(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) corev1.PodSpec {
	overrides := llsd.Overrides(l)
	podSpec := corev1.PodSpec{
		Containers:                []corev1.Container{serverContainer(l, in)},
		Volumes:                   podVolumes(l, in),
		SecurityContext:           podSecurityContext(overrides, in.OpenShift),
		TopologySpreadConstraints: topologySpreadConstraints(l, in.LegacySpread),
		Affinity:                  podAffinity(l, in.LegacySpread),
	}
	if overrides.ServiceAccountName != "" {
		podSpec.ServiceAccountName = overrides.ServiceAccountName
		// The API server copies serviceAccountName into the deprecated serviceAccount
		// alias and back. Owning both means removing the override removes both;
		// otherwise the alias, owned by nobody, would restore the old account.
		podSpec.DeprecatedServiceAccount = overrides.ServiceAccountName
	} else {
		podSpec.AutomountServiceAccountToken = ptr.To(false)
	}
	if overrides.TerminationGracePeriodSeconds != nil {
		podSpec.TerminationGracePeriodSeconds = ptr.To(*overrides.TerminationGracePeriodSeconds)
	}
	return podSpec
}

// serverWorkers is the number of server worker processes: spec.workload.workers or 1.
func serverWorkers(l *v1alpha2.LlamaStackDistribution) int32 {
	if w := l.Spec.Workload.Workers; w != nil && *w > 0 {
		return *w
	}
	return 1
}

// storageMountPath is where the server keeps its data: the storage mount path or /.llama.
func storageMountPath(l *v1alpha2.LlamaStackDistribution) string {
	if s := l.Spec.Workload.Storage; s != nil && s.MountPath != "" {
		return s.MountPath
	}
	return llsd.DefaultMountPath
}

func serverContainer(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) corev1.Container {
	cs := llsd.Overrides(l)
	p := llsd.Port(l)

	ports := []corev1.ContainerPort{{ContainerPort: p, Protocol: corev1.ProtocolTCP}}
	if MetricsOn(l, in.ServerVersion) {
		ports = append(ports, MetricsContainerPort())
	}
	c := corev1.Container{
		Name:            llsd.ContainerName(l),
		Image:           in.Image,
		Ports:           ports,
		Env:             mergeEnv(controllerEnv(l, in), cs.Env),
		Resources:       resolveResources(l),
		SecurityContext: containerSecurityContext(cs.ContainerSecurityContext),
		StartupProbe: &corev1.Probe{
			ProbeHandler:        healthCheck(p, in.TLS != nil),
			InitialDelaySeconds: startupInitialDelaySeconds,
			TimeoutSeconds:      startupTimeoutSeconds,
			FailureThreshold:    startupFailureThreshold,
			SuccessThreshold:    startupSuccessThreshold,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     healthCheck(p, in.TLS != nil),
			PeriodSeconds:    readinessPeriodSeconds,
			TimeoutSeconds:   readinessTimeoutSeconds,
			FailureThreshold: readinessFailureThreshold,
			SuccessThreshold: readinessSuccessThreshold,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     healthCheck(p, in.TLS != nil),
			PeriodSeconds:    livenessPeriodSeconds,
			TimeoutSeconds:   livenessTimeoutSeconds,
			FailureThreshold: livenessFailureThreshold,
			SuccessThreshold: livenessSuccessThreshold,
		},
		VolumeMounts: volumeMounts(l, in),
	}

	c.Command = serverCommand(lineOf(in.ServerVersion), in)
	if len(cs.Command) > 0 {
		c.Command = append([]string(nil), cs.Command...)
	}
	if len(cs.Args) > 0 {
		c.Args = append([]string(nil), cs.Args...)
	}
	return c
}

// healthCheck is a GET of the server's /v1/health on port p, over HTTPS when the
// server serves it (the kubelet does not verify the certificate).
func healthCheck(p int32, https bool) corev1.ProbeHandler {
	get := &corev1.HTTPGetAction{Path: healthPath, Port: intstr.FromInt32(p)}
	if https {
		get.Scheme = corev1.URISchemeHTTPS
	}
	return corev1.ProbeHandler{HTTPGet: get}
}

// mergeEnv returns the controller's variables followed by the user's, with every
// name at most once. A controller variable the user also sets is dropped; a name
// the user repeats keeps its last value at the position of its first occurrence.
// The user's variables are deep-copied.
func mergeEnv(controller, user []corev1.EnvVar) []corev1.EnvVar {
	last := make(map[string]int, len(user))
	for i, e := range user {
		last[e.Name] = i
	}
	out := make([]corev1.EnvVar, 0, len(controller)+len(user))
	for _, e := range controller {
		if _, ok := last[e.Name]; !ok {
			out = append(out, e)
		}
	}
	seen := make(map[string]bool, len(user))
	for _, e := range user {
		if seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		out = append(out, *user[last[e.Name]].DeepCopy())
	}
	return out
}

// resolveResources returns the container resources: the user's, with a missing or
// zero CPU request set to one CPU per worker and a missing or zero memory request
// set to 1Gi, but never above the user's limit (the API server rejects a request above
// its limit). When workers are set, a missing or zero CPU or memory limit equals the
// request.
func resolveResources(l *v1alpha2.LlamaStackDistribution) corev1.ResourceRequirements {
	r := *l.Spec.Workload.Resources.DeepCopy()
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	defaults := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(serverWorkers(l)), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(llsd.DefaultMemory),
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !quantityUnset(r.Requests, name) {
			continue
		}
		req := defaults[name]
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			req = lim.DeepCopy()
		}
		r.Requests[name] = req
	}
	if l.Spec.Workload.Workers != nil {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if quantityUnset(r.Limits, name) {
				r.Limits[name] = r.Requests[name].DeepCopy()
			}
		}
	}
	return r
}

func quantityUnset(list corev1.ResourceList, name corev1.ResourceName) bool {
	q, ok := list[name]
	return !ok || q.IsZero()
}

// podSecurityContext is the user's, or the Pod Security restricted defaults. On OpenShift
// the user and fsGroup are left out: the restricted-v2 SCC assigns them from the
// namespace's range, and rejects a pod that asks for one outside it (1001 always is).
func podSecurityContext(o *v1alpha2.WorkloadOverrides, openShift bool) *corev1.PodSecurityContext {
	if o.SecurityContext != nil {
		return o.SecurityContext.DeepCopy()
	}
	sc := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(llsd.DefaultUID),
		FSGroup:        ptr.To(llsd.DefaultUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if openShift {
		sc.RunAsUser, sc.FSGroup = nil, nil
	}
	return sc
}

func containerSecurityContext(user *corev1.SecurityContext) *corev1.SecurityContext {
	if user != nil {
		return user.DeepCopy()
	}
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func volumeMounts(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) []corev1.VolumeMount {
	sm := serverMounts(l, in)
	mounts := make([]corev1.VolumeMount, len(sm))
	for i := range sm {
		mounts[i] = sm[i].VolumeMount
	}
	return mounts
}

func podVolumes(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) []corev1.Volume {
	storage := corev1.Volume{Name: llsd.VolumeStorage}
	if l.Spec.Workload.Storage != nil {
		storage.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: llsd.PVCName(l)}
	} else {
		storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	volumes := []corev1.Volume{storage}
	if writableTmp(l) {
		volumes = append(volumes, corev1.Volume{Name: llsd.VolumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if in.CABundleHash != "" {
		volumes = append(volumes, corev1.Volume{
			Name: llsd.VolumeCABundle,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: llsd.CABundleConfigMapName(l)},
				Items:                []corev1.KeyToPath{{Key: revision.CABundleKey, Path: revision.CABundleKey}},
			}},
		})
	}
	if in.TLS != nil {
		volumes = append(volumes, corev1.Volume{
			Name: llsd.VolumeServerTLS,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: revision.TLSSecretName(l),
				Items: []corev1.KeyToPath{
					{Key: corev1.TLSCertKey, Path: corev1.TLSCertKey},
					{Key: corev1.TLSPrivateKeyKey, Path: corev1.TLSPrivateKeyKey},
				},
			}},
		})
	}
	if in.UserConfigMap != "" {
		volumes = append(volumes, corev1.Volume{
			Name: llsd.VolumeUserConfig,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: in.UserConfigMap},
			}},
		})
	}
	for _, v := range llsd.Overrides(l).Volumes {
		volumes = append(volumes, *v.DeepCopy())
	}
	return volumes
}

// instanceSelector selects the pods of l's instance, for spreading and anti-affinity.
func instanceSelector(l *v1alpha2.LlamaStackDistribution) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{llsd.LabelInstance: l.Name}}
}

// topologySpreadConstraints are the user's, or a soft spread over regions, zones and
// hosts, at any replica count.
func topologySpreadConstraints(l *v1alpha2.LlamaStackDistribution, legacy bool) []corev1.TopologySpreadConstraint {
	if user := l.Spec.Workload.TopologySpreadConstraints; len(user) > 0 {
		out := make([]corev1.TopologySpreadConstraint, len(user))
		for i := range user {
			out[i] = *user[i].DeepCopy()
		}
		return out
	}
	if legacy {
		return nil
	}
	keys := []string{topologyKeyRegion, topologyKeyZone, topologyKeyHostname}
	out := make([]corev1.TopologySpreadConstraint, 0, len(keys))
	for _, key := range keys {
		out = append(out, corev1.TopologySpreadConstraint{
			MaxSkew:           defaultTopologySpreadMaxSkew,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     instanceSelector(l),
		})
	}
	return out
}

// podAffinity prefers one pod per host, at any replica count.
func podAffinity(l *v1alpha2.LlamaStackDistribution, legacy bool) *corev1.Affinity {
	if legacy {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: antiAffinityWeight,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: instanceSelector(l),
				TopologyKey:   topologyKeyHostname,
			},
		}},
	}}
}

// PodConflict reports a user volume or mount that collides with one of the controller's
// in the server pod: a volume of the same name (the API server rejects such a
// Deployment), or two mounts at the same directory, however written (the storage mount
// path may also meet the user-config or CA bundle mount; the API server rejects only
// equal strings, and one volume would hide the other). The user gets the reason.
func PodConflict(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) *fault.Problem {
	volumes := map[string]bool{}
	for _, v := range podVolumes(l, in) {
		if volumes[v.Name] {
			return &fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: fmt.Sprintf(
				"spec.workload.overrides.volumes (v1alpha1 spec.server.podOverrides.volumes): the volume name %q is used by the controller; choose another name", v.Name)}
		}
		volumes[v.Name] = true
	}
	if p := envConflict(l, in); p != nil {
		return p
	}
	return mountPathConflict(serverMounts(l, in))
}

// HasSpreading tells whether a pod template spreads its pods (ours or the user's).
func HasSpreading(spec *corev1.PodSpec) bool {
	return spec.Affinity != nil || len(spec.TopologySpreadConstraints) > 0
}
