// Package upstream makes, in a real cluster, the children that the upstream operator
// (llamastack/llama-stack-k8s-operator) makes for a LlamaStackDistribution: the same
// names, labels, owner references and specs, written the way its reconciler writes
// them (a plain Create, then a server-side apply with the CR's name as field manager;
// the PVC and the CA bundle ConfigMap only created, the Ingress created and then
// updated). Tests use it to prove that this controller takes over a cluster that
// upstream ran. What upstream renders is described in its kustomize templates and Go
// plugins; the parts used here are the Deployment and pod template, PVC,
// ServiceAccount, Service, NetworkPolicy, HPA, PDB, Ingress and the managed CA bundle.
package upstream

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Images are upstream's built-in distribution images.
var Images = map[string]string{
	"starter":            "docker.io/llamastack/distribution-starter:latest",
	"remote-vllm":        "docker.io/llamastack/distribution-remote-vllm:latest",
	"meta-reference-gpu": "docker.io/llamastack/distribution-meta-reference-gpu:latest",
	"postgres-demo":      "docker.io/llamastack/distribution-postgres-demo:latest",
}

// CreateFieldManager is the field manager of upstream's plain Creates and Updates: the
// default of its client, derived from its binary's name.
const CreateFieldManager = "manager"

// Options are what upstream reads besides the CR.
type Options struct {
	// NetworkPolicy is the enableNetworkPolicy feature flag of its operator ConfigMap.
	NetworkPolicy bool
	// OperatorNamespace is upstream's own namespace, a peer of its NetworkPolicies
	// (default llama-stack-k8s-operator-system).
	OperatorNamespace string
}

// Make creates the children upstream makes for l, which must exist (its UID is the
// owner reference), in upstream's order: the managed CA bundle ConfigMap, then the
// PVC, ServiceAccount, Service (only with a port or env), NetworkPolicy, Deployment,
// HPA and PDB, then the Ingress. The user ConfigMap and the CA bundle's source must exist in l's namespace.
func Make(ctx context.Context, kube kubernetes.Interface, l *v1alpha1.LlamaStackDistribution, o Options) error {
	if o.OperatorNamespace == "" {
		o.OperatorNamespace = "llama-stack-k8s-operator-system"
	}
	ns, srv := l.Namespace, &l.Spec.Server
	create := metav1.CreateOptions{FieldManager: CreateFieldManager}

	var hashes podHashes
	if uc := srv.UserConfig; uc != nil {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, uc.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("user ConfigMap: %w", err)
		}
		// Upstream's "hash" is the ConfigMap's resourceVersion and name.
		hashes.userConfig = cm.ResourceVersion + "-" + cm.Name
	}
	if ca := srv.TLSConfig; ca != nil && ca.CABundle != nil {
		cm, err := caBundleConfigMap(ctx, kube, l)
		if err != nil {
			return err
		}
		created, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, create)
		if err != nil {
			return fmt.Errorf("CA bundle ConfigMap: %w", err)
		}
		hashes.caBundle = created.ResourceVersion + "-" + created.Name
	}

	type child struct {
		resource string
		obj      metav1.Object
		apply    bool
	}
	var children []child
	if srv.Storage != nil {
		children = append(children, child{"persistentvolumeclaims", pvc(l), false})
	}
	children = append(children,
		child{"serviceaccounts", &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: objectMeta(l, l.Name+"-sa", kustomizeLabels())}, true})
	if srv.ContainerSpec.Port != 0 || len(srv.ContainerSpec.Env) > 0 {
		// Upstream's HasPorts: without a port or env it makes no Service.
		children = append(children, child{"services", service(l), true})
	}
	if o.NetworkPolicy {
		children = append(children, child{"networkpolicies", networkPolicy(l, o.OperatorNamespace), true})
	}
	children = append(children, child{"deployments", deployment(l, hashes), true})
	if srv.Autoscaling != nil {
		children = append(children, child{"horizontalpodautoscalers", hpa(l), true})
	}
	if srv.PodDisruptionBudget != nil || l.Spec.Replicas > 1 {
		children = append(children, child{"poddisruptionbudgets", pdb(l), true})
	}
	for _, c := range children {
		if err := createObject(ctx, kube, ns, c.obj, create); err != nil {
			return err
		}
	}
	for _, c := range children {
		if c.apply {
			if err := applyObject(ctx, kube, ns, c.resource, c.obj, l.Name); err != nil {
				return err
			}
		}
	}
	if l.Spec.Network != nil && l.Spec.Network.ExposeRoute {
		// Created, then replaced with a full Update at every reconcile.
		ing, err := kube.NetworkingV1().Ingresses(ns).Create(ctx, ingress(l), create)
		if err != nil {
			return fmt.Errorf("Ingress: %w", err)
		}
		if _, err := kube.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{FieldManager: CreateFieldManager}); err != nil {
			return fmt.Errorf("updating the Ingress: %w", err)
		}
	}
	return nil
}

// podHashes are the pod template annotations that roll upstream's pods.
type podHashes struct{ userConfig, caBundle string }

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// kustomizeLabels are the labels of every object upstream renders from its templates.
func kustomizeLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "llama-stack-operator",
		"app.kubernetes.io/part-of":    "llama-stack",
		"llamastack.io/watch":          "true",
	}
}

// selector selects the server pods, in upstream as here.
func selector(l *v1alpha1.LlamaStackDistribution) map[string]string {
	return map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": l.Name}
}

func objectMeta(l *v1alpha1.LlamaStackDistribution, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: l.Namespace, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution", Name: l.Name, UID: l.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}}
}

func port(l *v1alpha1.LlamaStackDistribution) int32 {
	if p := l.Spec.Server.ContainerSpec.Port; p != 0 {
		return p
	}
	return 8321
}

func mountPath(l *v1alpha1.LlamaStackDistribution) string {
	if s := l.Spec.Server.Storage; s != nil && s.MountPath != "" {
		return s.MountPath
	}
	return "/.llama"
}

func pvc(l *v1alpha1.LlamaStackDistribution) *corev1.PersistentVolumeClaim {
	size := resource.MustParse("10Gi")
	if s := l.Spec.Server.Storage.Size; s != nil {
		size = s.DeepCopy()
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   typeMeta("v1", "PersistentVolumeClaim"),
		ObjectMeta: objectMeta(l, l.Name+"-pvc", kustomizeLabels()),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

func service(l *v1alpha1.LlamaStackDistribution) *corev1.Service {
	p := port(l)
	return &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: objectMeta(l, l.Name+"-service", kustomizeLabels()),
		Spec: corev1.ServiceSpec{
			Selector: selector(l),
			Ports:    []corev1.ServicePort{{Name: "http", Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func networkPolicy(l *v1alpha1.LlamaStackDistribution, operatorNamespace string) *networkingv1.NetworkPolicy {
	byName := func(ns string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
	}
	var from []networkingv1.NetworkPolicyPeer
	var allowed v1alpha1.AllowedFromSpec
	if n := l.Spec.Network; n != nil && n.AllowedFrom != nil {
		allowed = *n.AllowedFrom
	}
	if slices.Contains(allowed.Namespaces, "*") {
		from = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
	} else {
		from = append(from, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}, byName(operatorNamespace))
		for _, ns := range allowed.Namespaces {
			from = append(from, byName(ns))
		}
		for _, key := range allowed.Labels {
			from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: string(key), Operator: metav1.LabelSelectorOpExists}}}})
		}
		if l.Spec.Network != nil {
			// OpenShift's router namespaces, whenever the CR has a network section.
			from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"network.openshift.io/policy-group": "ingress"}}})
		}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   typeMeta("networking.k8s.io/v1", "NetworkPolicy"),
		ObjectMeta: objectMeta(l, l.Name+"-network-policy", kustomizeLabels()),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector(l)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port(l)))}},
				From:  from,
			}},
		},
	}
}

// startScript stands in for upstream's start command with a user config, which picks
// the server module by the installed llama-stack version; its text does not matter to
// a takeover, which replaces it.
const startScript = `exec python3 -m llama_stack.core.server.server /etc/llama-stack/config.yaml`

func deployment(l *v1alpha1.LlamaStackDistribution, hashes podHashes) *appsv1.Deployment {
	srv := &l.Spec.Server
	p := port(l)
	workers := int32(1)
	if srv.Workers != nil {
		workers = *srv.Workers
	}
	env := []corev1.EnvVar{{Name: "HF_HOME", Value: mountPath(l)}}
	if hashes.caBundle != "" {
		env = append(env, corev1.EnvVar{Name: "SSL_CERT_FILE", Value: "/etc/ssl/certs/ca-bundle/ca-bundle.crt"})
	}
	env = append(env,
		corev1.EnvVar{Name: "LLS_WORKERS", Value: fmt.Sprint(workers)},
		corev1.EnvVar{Name: "LLS_PORT", Value: fmt.Sprint(p)},
		corev1.EnvVar{Name: "LLAMA_STACK_CONFIG", Value: "/etc/llama-stack/config.yaml"})
	env = append(env, srv.ContainerSpec.Env...)

	res := *srv.ContainerSpec.Resources.DeepCopy()
	if res.Requests == nil {
		res.Requests = corev1.ResourceList{}
	}
	if q, ok := res.Requests[corev1.ResourceCPU]; !ok || q.IsZero() {
		res.Requests[corev1.ResourceCPU] = *resource.NewQuantity(int64(workers), resource.DecimalSI)
	}
	if q, ok := res.Requests[corev1.ResourceMemory]; !ok || q.IsZero() {
		res.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	}
	if srv.Workers != nil {
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := res.Limits[name]; !ok || q.IsZero() {
				res.Limits[name] = res.Requests[name]
			}
		}
	}

	name := srv.ContainerSpec.Name
	if name == "" {
		name = "llama-stack"
	}
	image := srv.Distribution.Image
	if image == "" {
		image = Images[srv.Distribution.Name]
	}
	c := corev1.Container{
		Name:      name,
		Image:     image,
		Ports:     []corev1.ContainerPort{{ContainerPort: p}},
		Env:       env,
		Resources: res,
		StartupProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v1/health", Port: intstr.FromInt32(p)}},
			InitialDelaySeconds: 15, TimeoutSeconds: 30, FailureThreshold: 3, SuccessThreshold: 1,
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "lls-storage", MountPath: mountPath(l)}},
	}
	if srv.UserConfig != nil {
		c.Command = []string{"/bin/sh", "-c", startScript}
	}
	if len(srv.ContainerSpec.Command) > 0 {
		c.Command = srv.ContainerSpec.Command
	}
	if len(srv.ContainerSpec.Args) > 0 {
		c.Args = srv.ContainerSpec.Args
	}

	storage := corev1.Volume{Name: "lls-storage", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if srv.Storage != nil {
		storage.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: l.Name + "-pvc"}}
	}
	volumes := []corev1.Volume{storage}
	annotations := map[string]string{}
	if hashes.userConfig != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "user-config", MountPath: "/etc/llama-stack/", ReadOnly: true})
		annotations["configmap.hash/user-config"] = hashes.userConfig
	}
	if hashes.caBundle != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ca-bundle", MountPath: "/etc/ssl/certs/ca-bundle", ReadOnly: true})
		annotations["configmap.hash/ca-bundle"] = hashes.caBundle
		volumes = append(volumes, corev1.Volume{Name: "ca-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: l.Name + "-ca-bundle"},
			Items:                []corev1.KeyToPath{{Key: "ca-bundle.crt", Path: "ca-bundle.crt"}},
		}}})
	}
	if hashes.userConfig != "" {
		volumes = append(volumes, corev1.Volume{Name: "user-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: srv.UserConfig.ConfigMapName}}}})
	}
	pod := corev1.PodSpec{
		ServiceAccountName: l.Name + "-sa",
		SecurityContext:    &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1001)},
		Containers:         []corev1.Container{c},
		Volumes:            volumes,
	}
	if o := srv.PodOverrides; o != nil {
		if o.ServiceAccountName != "" {
			pod.ServiceAccountName = o.ServiceAccountName
		}
		pod.TerminationGracePeriodSeconds = o.TerminationGracePeriodSeconds
		pod.Volumes = append(pod.Volumes, o.Volumes...)
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, o.VolumeMounts...)
	}
	instance := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": l.Name}}
	if len(srv.TopologySpreadConstraints) > 0 {
		pod.TopologySpreadConstraints = srv.TopologySpreadConstraints
	} else if l.Spec.Replicas > 1 {
		for _, key := range []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
			pod.TopologySpreadConstraints = append(pod.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: instance})
		}
	}
	if l.Spec.Replicas > 1 {
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: instance},
		}}}}
	}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector(l)}, Spec: pod}
	if len(annotations) > 0 {
		template.Annotations = annotations
	}
	d := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: objectMeta(l, l.Name, kustomizeLabels()),
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector(l)},
			Template: template,
		},
	}
	if a := srv.Autoscaling; a == nil || a.MaxReplicas == 0 {
		d.Spec.Replicas = ptr.To(l.Spec.Replicas)
	}
	if srv.Storage != nil {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return d
}

// scalingLabels are those of the HPA and PDB, with the empty instance label their
// template leaves.
func scalingLabels() map[string]string {
	labels := kustomizeLabels()
	labels["app"] = "llama-stack"
	labels["app.kubernetes.io/instance"] = ""
	return labels
}

func hpa(l *v1alpha1.LlamaStackDistribution) *autoscalingv2.HorizontalPodAutoscaler {
	a := l.Spec.Server.Autoscaling
	minReplicas := max(int32(1), l.Spec.Replicas, ptr.Deref(a.MinReplicas, 0))
	metric := func(name corev1.ResourceName, pct int32) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: name, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(pct)}}}
	}
	var metrics []autoscalingv2.MetricSpec
	if a.TargetCPUUtilizationPercentage != nil {
		metrics = append(metrics, metric(corev1.ResourceCPU, *a.TargetCPUUtilizationPercentage))
	}
	if a.TargetMemoryUtilizationPercentage != nil {
		metrics = append(metrics, metric(corev1.ResourceMemory, *a.TargetMemoryUtilizationPercentage))
	}
	if len(metrics) == 0 {
		metrics = append(metrics, metric(corev1.ResourceCPU, 80))
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   typeMeta("autoscaling/v2", "HorizontalPodAutoscaler"),
		ObjectMeta: objectMeta(l, l.Name+"-hpa", scalingLabels()),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: l.Name},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    a.MaxReplicas,
			Metrics:        metrics,
		},
	}
}

func pdb(l *v1alpha1.LlamaStackDistribution) *policyv1.PodDisruptionBudget {
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector(l)}}
	if b := l.Spec.Server.PodDisruptionBudget; b != nil && (b.MinAvailable != nil || b.MaxUnavailable != nil) {
		spec.MinAvailable, spec.MaxUnavailable = b.MinAvailable, b.MaxUnavailable
	} else {
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   typeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: objectMeta(l, l.Name+"-pdb", scalingLabels()),
		Spec:       spec,
	}
}

func ingress(l *v1alpha1.LlamaStackDistribution) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: objectMeta(l, l.Name+"-ingress", map[string]string{
			"app.kubernetes.io/managed-by": "llama-stack-operator", "app.kubernetes.io/instance": l.Name}),
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: l.Name + "-service", Port: networkingv1.ServiceBackendPort{Number: port(l)}}},
			}}},
		}}}},
	}
}

// caBundleConfigMap is upstream's managed CA bundle: the certificates of the named keys
// of the source ConfigMap (default ca-bundle.crt), re-encoded and joined by newlines.
func caBundleConfigMap(ctx context.Context, kube kubernetes.Interface, l *v1alpha1.LlamaStackDistribution) (*corev1.ConfigMap, error) {
	ca := l.Spec.Server.TLSConfig.CABundle
	ns := ca.ConfigMapNamespace
	if ns == "" {
		ns = l.Namespace
	}
	src, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, ca.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("CA bundle source: %w", err)
	}
	keys := []string{"ca-bundle.crt"}
	if len(ca.ConfigMapKeys) > 0 {
		keys = nil
		for _, k := range ca.ConfigMapKeys {
			keys = append(keys, string(k))
		}
	}
	var certs []string
	for _, k := range keys {
		rest := []byte(src.Data[k])
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type == "CERTIFICATE" {
				certs = append(certs, string(pem.EncodeToMemory(block)))
			}
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("CA bundle source %s/%s holds no certificate", ns, ca.ConfigMapName)
	}
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(l, l.Name+"-ca-bundle", map[string]string{
			"app.kubernetes.io/managed-by": "llama-stack-operator", "app.kubernetes.io/instance": l.Name,
			"app.kubernetes.io/component": "ca-bundle", "llamastack.io/watch": "true"}),
		Data: map[string]string{"ca-bundle.crt": strings.Join(certs, "\n")},
	}, nil
}

// createObject creates obj with a plain Create.
func createObject(ctx context.Context, kube kubernetes.Interface, ns string, obj metav1.Object, opts metav1.CreateOptions) error {
	var err error
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		_, err = kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, o, opts)
	case *corev1.ServiceAccount:
		_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, o, opts)
	case *corev1.Service:
		_, err = kube.CoreV1().Services(ns).Create(ctx, o, opts)
	case *networkingv1.NetworkPolicy:
		_, err = kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, o, opts)
	case *appsv1.Deployment:
		_, err = kube.AppsV1().Deployments(ns).Create(ctx, o, opts)
	case *autoscalingv2.HorizontalPodAutoscaler:
		_, err = kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, o, opts)
	case *policyv1.PodDisruptionBudget:
		_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, o, opts)
	default:
		return fmt.Errorf("upstream: cannot create a %T", obj)
	}
	if err != nil {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// applyObject server-side applies obj, forced, with the CR's name as field manager.
func applyObject(ctx context.Context, kube kubernetes.Interface, ns, resource string, obj metav1.Object, crName string) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	client := kube.CoreV1().RESTClient()
	switch resource {
	case "deployments":
		client = kube.AppsV1().RESTClient()
	case "networkpolicies":
		client = kube.NetworkingV1().RESTClient()
	case "horizontalpodautoscalers":
		client = kube.AutoscalingV2().RESTClient()
	case "poddisruptionbudgets":
		client = kube.PolicyV1().RESTClient()
	}
	err = client.Patch(types.ApplyPatchType).Namespace(ns).Resource(resource).Name(obj.GetName()).
		Param("fieldManager", crName).Param("force", "true").Body(body).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", resource, obj.GetName(), err)
	}
	return nil
}
