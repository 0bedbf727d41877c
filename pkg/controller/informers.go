package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// What the informers keep and how they are looked up: the selectors and transforms
// the caller gives each informer factory (only the fields the controller reads are
// cached), and the cache indexes.

// controllerUIDIndex indexes the ConfigMap cache by the UID of the CR that controls an
// entry (configMapEntry keeps only a LlamaStackDistribution's controller reference).
const controllerUIDIndex = "controllerUID"

func indexByControllerUID(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.Kind == llsd.ControllerKind.Kind {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// ReplicaSetSelector selects the ReplicaSets of server Deployments: their pod template
// carries the selector labels, of which app=llama-stack is common to every CR.
func ReplicaSetSelector() string {
	return labels.SelectorFromSet(labels.Set{llsd.LabelApp: llsd.LabelAppValue}).String()
}

// TransformReplicaSet is the informer transform of the ReplicaSet cache: it keeps of a
// ReplicaSet its identity, labels, owner references, its revision, and the ConfigMap
// volumes and config hash of its pod template, the only things the controller reads
// (which generated ConfigMaps are still in use, which ReplicaSet is the current one:
// podProblemFor, and whether going back to one restores its config: unrestorable).
func TransformReplicaSet(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return children.TransformStripManagedFields(obj)
	}
	out := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: rs.Name, Namespace: rs.Namespace, UID: rs.UID, ResourceVersion: rs.ResourceVersion,
		Labels: rs.Labels, OwnerReferences: rs.OwnerReferences, DeletionTimestamp: rs.DeletionTimestamp,
	}}
	if rev, ok := rs.Annotations[revisionAnnotation]; ok {
		out.Annotations = map[string]string{revisionAnnotation: rev}
	}
	if h, ok := rs.Spec.Template.Annotations[llsd.AnnotationUserConfigHash]; ok {
		out.Spec.Template.Annotations = map[string]string{llsd.AnnotationUserConfigHash: h}
	}
	for _, v := range rs.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil || v.Projected != nil {
			out.Spec.Template.Spec.Volumes = append(out.Spec.Template.Spec.Volumes, v)
		}
	}
	return out, nil
}

// PodSelector selects the server pods: the label their template carries and the
// ReplicaSets' selector selects (app=llama-stack, common to every CR).
func PodSelector() string {
	return ReplicaSetSelector()
}

// TransformPod is the informer transform of the Pod cache: it keeps of a pod its
// identity, the CR's instance label, its controller reference, its creation and
// deletion times, its phase, its PodScheduled condition, and of each (init) container
// its name, readiness, restart count and the reasons and messages of its waiting and terminated
// states: the only things podProblemOf reads. The spec is dropped whole.
func TransformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return children.TransformStripManagedFields(obj)
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
	}}
	if v, ok := p.Labels[llsd.LabelInstance]; ok {
		out.Labels = map[string]string{llsd.LabelInstance: v}
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	out.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	out.Status.InitContainerStatuses = slimContainerStatuses(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = slimContainerStatuses(p.Status.ContainerStatuses)
	return out, nil
}

func slimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount}
		if w := s.State.Waiting; w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if s.State.Running != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{}
		}
		out[i].State.Terminated = slimTerminated(s.State.Terminated)
		out[i].LastTerminationState.Terminated = slimTerminated(s.LastTerminationState.Terminated)
	}
	return out
}

func slimTerminated(t *corev1.ContainerStateTerminated) *corev1.ContainerStateTerminated {
	if t == nil {
		return nil
	}
	return &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message}
}

// newConfigMapInformer makes the ConfigMap informer of a factory as the factory would,
// but without the namespace index: the cache is read by key and by controllerUIDIndex
// only, and that index would cost each ConfigMap of the cluster an entry.
func newConfigMapInformer(namespace string) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredConfigMapInformer(client, namespace, resync, cache.Indexers{}, nil)
	}
}

// configMapIndex indexes CRs by the "<namespace>/<name>" of every ConfigMap they reference.
const configMapIndex = "configMapRef"

// indexByConfigMap lists the ConfigMaps a CR references, as "<namespace>/<name>".
func indexByConfigMap(obj any) ([]string, error) {
	l, ok := obj.(*v1alpha2.LlamaStackDistribution)
	if !ok {
		return nil, nil
	}
	// Every CR watches its namespace's odh-trusted-ca-bundle, which is picked up when it appears.
	keys := []string{l.Namespace + "/" + odhTrustedCABundle}
	if uc := l.Spec.OverrideConfig; uc != nil {
		keys = append(keys, userConfigNamespace(l)+"/"+uc.ConfigMapName)
	}
	if bc := l.Spec.BaseConfig; bc != nil {
		keys = append(keys, l.Namespace+"/"+bc.ConfigMapName)
	}
	if tls := llsd.Networking(l).TLS; tls != nil && tls.CABundle != nil {
		ns := tls.CABundle.ConfigMapNamespace
		if ns == "" {
			ns = l.Namespace
		}
		keys = append(keys, ns+"/"+tls.CABundle.ConfigMapName)
	}
	return keys, nil
}

// TransformConfigMap is the informer transform of the ConfigMap cache: it turns each
// ConfigMap into its configMapEntry. Other objects only lose the managed fields of other
// managers.
func TransformConfigMap(obj any) (any, error) {
	switch o := obj.(type) {
	case *configMapEntry:
		return o, nil
	case *corev1.ConfigMap:
		return newConfigMapEntry(o), nil
	default:
		return children.TransformStripManagedFields(obj)
	}
}

// newHTTPRouteInformer is the informer of the HTTPRoute children (an optional kind,
// started while the cluster serves it): the controller's own routes only, kept without
// others' managed fields, never resynced (the CRs are).
func newHTTPRouteInformer(client gatewayclient.Interface, namespace string) cache.SharedIndexInformer {
	informer := gatewayinformers.NewFilteredHTTPRouteInformer(client, namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.LabelSelector = children.ManagedSelector() })
	// Only fails once the informer has started.
	_ = informer.SetTransform(children.TransformStripManagedFields)
	return informer
}
