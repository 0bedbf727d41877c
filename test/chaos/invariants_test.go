//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

const managedBy = "app.kubernetes.io/managed-by=llama-stack-operator"

// scenario records what a test did, so the end checks know what to expect.
type scenario struct {
	t          *testing.T
	namespaces []string
	// edits counts the test's changes to a CR's pod template ("ns/name"): each may
	// roll the pods once.
	edits map[string]int
	// foreign holds objects someone else owns, by "kind ns/name", with their
	// resourceVersion when created: the controller must leave them as they are.
	foreign map[string]string
	// blocked CRs report a reason instead of becoming Ready.
	blocked map[string]string
	// pvcs are the UIDs of the PVCs seen once converged, by "ns/name".
	pvcs map[string]types.UID
}

func newScenario(t *testing.T, namespaces int) *scenario {
	s := &scenario{t: t, edits: map[string]int{}, foreign: map[string]string{}, blocked: map[string]string{}, pvcs: map[string]types.UID{}}
	for i := range namespaces {
		name := fmt.Sprintf("chaos-%s-%d-%04x", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), i, rand.IntN(1<<16))
		if len(name) > 63 {
			name = "c" + name[len(name)-62:]
		}
		_, err := env.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		s.namespaces = append(s.namespaces, name)
	}
	t.Cleanup(func() {
		// Wait until they are gone, so that the next scenario's controller does not
		// spend its time on this one's leftovers.
		for _, ns := range s.namespaces {
			_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
		for _, ns := range s.namespaces {
			err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Logf("namespace %s still exists: %v", ns, err)
			}
		}
	})
	return s
}

// mixed builds the i-th CR of a load: storage on every 4th, autoscaling on every 5th,
// a PDB on every 3rd (upstream-cost.md's mix), each with one env var.
func mixed(ns string, i int) *v1alpha1.LlamaStackDistribution {
	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("llsd-%d", i), Namespace: ns},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server: v1alpha1.ServerSpec{
				Distribution:  v1alpha1.DistributionType{Name: "starter"},
				ContainerSpec: v1alpha1.ContainerSpec{Env: []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "llama3.2:1b"}}},
			},
		},
	}
	if i%4 == 0 {
		size := resource.MustParse("1Gi")
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: &size}
	}
	if i%5 == 0 {
		one := int32(1)
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: &one, MaxReplicas: 3}
	}
	if i%3 == 0 {
		one := intstr.FromInt32(1)
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: &one}
	}
	return l
}

// providePV creates a PersistentVolume pre-bound to the CR's PVC (the local control
// plane has no provisioner).
func providePV(t *testing.T, l *v1alpha1.LlamaStackDistribution) {
	t.Helper()
	pv := pvFor(l)
	_, err := env.kube.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

func pvFor(l *v1alpha1.LlamaStackDistribution) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: l.Namespace + "-" + l.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + l.Namespace + "-" + l.Name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: l.Namespace, Name: l.Name + "-pvc"},
		},
	}
}

func createCR(t *testing.T, l *v1alpha1.LlamaStackDistribution) {
	t.Helper()
	if l.Spec.Server.Storage != nil {
		providePV(t, l)
	}
	_, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(l.Namespace).Create(context.Background(), toHub(t, l), metav1.CreateOptions{})
	require.NoError(t, err)
}

// editCR changes a CR, retrying on conflicts.
func editCR(t *testing.T, ns, name string, mod func(*v1alpha1.LlamaStackDistribution)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := getCR(ctx, t, ns, name)
		if err != nil {
			return false, nil
		}
		mod(l)
		_, err = env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Update(ctx, toHub(t, l), metav1.UpdateOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "editing %s/%s", ns, name)
}

// crs lists every CR of the scenario.
func (s *scenario) crs(ctx context.Context) ([]v1alpha1.LlamaStackDistribution, error) {
	var out []v1alpha1.LlamaStackDistribution
	for _, ns := range s.namespaces {
		l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, *fromHub(s.t, &l.Items[i]))
		}
	}
	return out, nil
}

// converged reports whether a CR is done: Ready at its current generation, or, for a
// blocked CR, reporting its reason at its current generation.
func (s *scenario) converged(l *v1alpha1.LlamaStackDistribution) bool {
	if l.Status.ObservedGeneration != l.Generation {
		return false
	}
	if reason, ok := s.blocked[l.Namespace+"/"+l.Name]; ok {
		c := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionDeploymentReady)
		return c != nil && c.Reason == reason
	}
	// Ready is not enough: a rollout that keeps the server available is still under way
	// until Progressing says it is complete.
	if p := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing); p == nil || p.Reason != v1alpha1.ReasonRolloutComplete {
		return false
	}
	return l.Status.Phase == v1alpha1.PhaseReady && meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady)
}

// waitConverged waits until every CR of the scenario has converged.
func (s *scenario) waitConverged(timeout time.Duration) {
	t := s.t
	t.Helper()
	start := time.Now()
	var pending []string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		all, err := s.crs(ctx)
		if err != nil {
			return false, nil
		}
		pending = pending[:0]
		for i := range all {
			if !s.converged(&all[i]) {
				pending = append(pending, all[i].Namespace+"/"+all[i].Name+" "+describe(&all[i]))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		// What the cluster's own controllers made of the pending CRs' children tells a
		// stalled controller from a stalled scheduler, kwok or volume binder.
		for i, p := range pending {
			ns, rest, _ := strings.Cut(p, "/")
			name, _, _ := strings.Cut(rest, " ")
			pending[i] = p + "\n    cluster: " + childState(ns, name)
		}
		t.Fatalf("not converged within %s: %d CRs pending:\n%s", timeout, len(pending), strings.Join(pending, "\n"))
	}
	t.Logf("every CR converged %s after the wait began", time.Since(start).Round(100*time.Millisecond))
}

// childState sums up the Deployment, ReplicaSets, pods and claim of a CR as the
// cluster sees them.
func childState(ns, name string) string {
	ctx := context.Background()
	var parts []string
	if d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		parts = append(parts, fmt.Sprintf("deployment gen %d observed %d replicas %d updated %d available %d",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas))
	} else {
		parts = append(parts, "deployment: "+err.Error())
	}
	if rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range rss.Items {
			if strings.HasPrefix(rs.Name, name+"-") {
				parts = append(parts, fmt.Sprintf("replicaset %s replicas %d ready %d", rs.Name, rs.Status.Replicas, rs.Status.ReadyReplicas))
			}
		}
	}
	if pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, name+"-") {
				continue
			}
			var conds []string
			for _, c := range p.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s%s", c.Type, c.Status, strings.TrimSpace(" "+c.Reason)))
			}
			parts = append(parts, fmt.Sprintf("pod %s node %q phase %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(conds, ",")))
		}
	}
	if pvc, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name+"-pvc", metav1.GetOptions{}); err == nil {
		parts = append(parts, fmt.Sprintf("pvc %s volume %q", pvc.Status.Phase, pvc.Spec.VolumeName))
	}
	return strings.Join(parts, "; ")
}

func describe(l *v1alpha1.LlamaStackDistribution) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("gen %d observed %d phase %s", l.Generation, l.Status.ObservedGeneration, l.Status.Phase))
	for _, c := range l.Status.Conditions {
		if c.Status != metav1.ConditionTrue || c.Type == v1alpha1.ConditionProgressing && c.Reason != v1alpha1.ReasonRolloutComplete {
			parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// recordPVCs remembers the UIDs of the scenario's PVCs.
func (s *scenario) recordPVCs() {
	for _, ns := range s.namespaces {
		l, err := env.kube.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, p := range l.Items {
			s.pvcs[ns+"/"+p.Name] = p.UID
		}
	}
}

// check asserts the end state every chaos scenario must reach.
func (s *scenario) check(from time.Time) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	all, err := s.crs(ctx)
	require.NoError(t, err)
	byName := map[string]*v1alpha1.LlamaStackDistribution{}
	for i := range all {
		l := &all[i]
		byName[l.Namespace+"/"+l.Name] = l
		if !s.converged(l) {
			t.Errorf("%s/%s has not converged: %s", l.Namespace, l.Name, describe(l))
		}
	}

	// Every child: exactly one controller reference, to a CR that exists, under a
	// name that CR gives its children; and every CR has the children it needs.
	have := map[string]bool{}
	for _, ns := range s.namespaces {
		for _, o := range children(t, ctx, ns) {
			key := o.kind + " " + ns + "/" + o.meta.GetName()
			if _, isForeign := s.foreign[key]; isForeign {
				continue
			}
			var controllers []metav1.OwnerReference
			for _, r := range o.meta.GetOwnerReferences() {
				if r.Controller != nil && *r.Controller {
					controllers = append(controllers, r)
				}
			}
			if len(controllers) != 1 {
				t.Errorf("%s has %d controller references", key, len(controllers))
				continue
			}
			owner := byName[ns+"/"+controllers[0].Name]
			if controllers[0].Kind != "LlamaStackDistribution" || owner == nil || owner.UID != controllers[0].UID {
				t.Errorf("%s is an orphan: its controller %s %s (uid %s) does not exist", key, controllers[0].Kind, controllers[0].Name, controllers[0].UID)
				continue
			}
			want := expectedChildren(owner)
			if want[key] == "" {
				t.Errorf("%s is not a child %s/%s should have (a duplicate?)", key, ns, owner.Name)
			}
			have[key] = true
		}
	}
	for _, l := range all {
		if _, blocked := s.blocked[l.Namespace+"/"+l.Name]; blocked {
			continue
		}
		for key := range expectedChildren(&l) {
			if !have[key] {
				t.Errorf("%s is missing", key)
			}
		}
	}

	// Nobody else's object was touched.
	for key, rv := range s.foreign {
		kind, nsName, _ := strings.Cut(key, " ")
		ns, name, _ := strings.Cut(nsName, "/")
		var got metav1.Object
		switch kind {
		case "Service":
			got, err = env.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		case "ConfigMap":
			got, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		case "Deployment":
			got, err = env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		default:
			t.Fatalf("foreign kind %s not handled", kind)
		}
		if err != nil {
			t.Errorf("foreign %s: %v", key, err)
			continue
		}
		if got.GetResourceVersion() != rv || len(got.GetOwnerReferences()) != 0 {
			t.Errorf("foreign %s was changed (resourceVersion %s → %s, owners %v)", key, rv, got.GetResourceVersion(), got.GetOwnerReferences())
		}
	}

	// No PVC was replaced or deleted.
	for key, uid := range s.pvcs {
		ns, name, _ := strings.Cut(key, "/")
		p, err := env.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != uid || p.DeletionTimestamp != nil {
			t.Errorf("PVC %s was deleted or replaced (err %v)", key, err)
		}
	}
	// The controller deleted nothing: no feature was turned off in these scenarios.
	for _, e := range controllerRequests(t, from) {
		if e.Verb == "delete" || e.Verb == "deletecollection" {
			t.Errorf("controller %s deleted %s %s/%s", e.replica(), e.resource(), e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
	}

	// No pod was replaced without a spec change: one ReplicaSet per pod template the
	// CR had (the first, plus at most one per edit of the template).
	for _, ns := range s.namespaces {
		rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		perDeployment := map[string]int{}
		for _, rs := range rss.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
				perDeployment[ref.Name]++
			}
		}
		for name, n := range perDeployment {
			if limit := 1 + s.edits[ns+"/"+name]; n > limit {
				t.Errorf("Deployment %s/%s rolled out %d times, the spec changed %d times", ns, name, n-1, limit-1)
			}
		}
	}
}

// expectedChildren are the children a CR has, by "kind ns/name" (value: the kind).
func expectedChildren(l *v1alpha1.LlamaStackDistribution) map[string]string {
	out := map[string]string{}
	add := func(kind, name string) { out[kind+" "+l.Namespace+"/"+name] = kind }
	add("Deployment", l.Name)
	add("Service", l.Name+"-service")
	// (No NetworkPolicy: the operator ConfigMap is not installed, and the feature is off by default.)
	if l.Spec.Server.Storage != nil {
		add("PersistentVolumeClaim", l.Name+"-pvc")
	}
	if a := l.Spec.Server.Autoscaling; a != nil && a.MaxReplicas > 0 {
		add("HorizontalPodAutoscaler", l.Name+"-hpa")
	}
	if l.Spec.Server.PodDisruptionBudget != nil || l.Spec.Replicas > 1 {
		add("PodDisruptionBudget", l.Name+"-pdb")
	}
	if l.Spec.Network != nil && l.Spec.Network.ExposeRoute {
		add("Ingress", l.Name+"-ingress")
	}
	return out
}

type child struct {
	kind string
	meta metav1.Object
}

// children lists every object in ns that carries the controller's managed-by label.
func children(t *testing.T, ctx context.Context, ns string) []child {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: managedBy}
	var out []child
	add := func(kind string) func([]metav1.Object, error) {
		return func(items []metav1.Object, err error) {
			require.NoError(t, err, "listing %ss", kind)
			for _, o := range items {
				out = append(out, child{kind, o})
			}
		}
	}
	deps, err := env.kube.AppsV1().Deployments(ns).List(ctx, opts)
	add("Deployment")(itemsOf(deps, err, func(l *appsv1.DeploymentList) []metav1.Object { return objs(l.Items) }))
	svcs, err := env.kube.CoreV1().Services(ns).List(ctx, opts)
	add("Service")(itemsOf(svcs, err, func(l *corev1.ServiceList) []metav1.Object { return objs(l.Items) }))
	pvcs, err := env.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	add("PersistentVolumeClaim")(itemsOf(pvcs, err, func(l *corev1.PersistentVolumeClaimList) []metav1.Object { return objs(l.Items) }))
	cms, err := env.kube.CoreV1().ConfigMaps(ns).List(ctx, opts)
	add("ConfigMap")(itemsOf(cms, err, func(l *corev1.ConfigMapList) []metav1.Object { return objs(l.Items) }))
	pdbs, err := env.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, opts)
	add("PodDisruptionBudget")(itemsOf(pdbs, err, func(l *policyv1.PodDisruptionBudgetList) []metav1.Object { return objs(l.Items) }))
	hpas, err := env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, opts)
	add("HorizontalPodAutoscaler")(itemsOf(hpas, err, func(l *autoscalingv2.HorizontalPodAutoscalerList) []metav1.Object { return objs(l.Items) }))
	nps, err := env.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, opts)
	add("NetworkPolicy")(itemsOf(nps, err, func(l *networkingv1.NetworkPolicyList) []metav1.Object { return objs(l.Items) }))
	ings, err := env.kube.NetworkingV1().Ingresses(ns).List(ctx, opts)
	add("Ingress")(itemsOf(ings, err, func(l *networkingv1.IngressList) []metav1.Object { return objs(l.Items) }))
	return out
}

// itemsOf returns a list's items, or the error of listing them.
func itemsOf[L any](l L, err error, items func(L) []metav1.Object) ([]metav1.Object, error) {
	if err != nil {
		return nil, err
	}
	return items(l), nil
}

// objs returns pointers to the items of a typed list.
func objs[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, 0, len(items))
	for i := range items {
		out = append(out, PT(&items[i]))
	}
	return out
}
