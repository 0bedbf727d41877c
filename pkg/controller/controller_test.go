package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

// testNamespace holds the CRs of the fixture tests; testOperatorNamespace
// (networkpolicy_test.go) is the operator namespace.
const testNamespace = "demo"

// fixture is the sample-controller test fixture: fake clientsets, informer caches that
// the test fills from the fakes' trackers (as the informers would), and the recorded
// actions of each sync.
type fixture struct {
	t   testing.TB
	ctx context.Context

	client     *fake.Clientset
	kubeclient *k8sfake.Clientset

	llsdInformers      informers.SharedInformerFactory
	childInformers     kubeinformers.SharedInformerFactory
	configMapInformers kubeinformers.SharedInformerFactory
	operatorInformers  kubeinformers.SharedInformerFactory
	rsInformers        kubeinformers.SharedInformerFactory
	podInformers       kubeinformers.SharedInformerFactory

	c        *Controller
	recorder *record.FakeRecorder
}

// newFixture builds a controller over fakes seeded with objs (CRs and Kubernetes
// objects). A v1alpha1 CR is seeded in its v1alpha2 form, as the API server, storing
// v1alpha2, would serve it to the controller.
func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var llsds, kube []runtime.Object
	for _, o := range objs {
		switch l := o.(type) {
		case *v1alpha1.LlamaStackDistribution:
			llsds = append(llsds, hub(l))
		case *v1alpha2.LlamaStackDistribution:
			llsds = append(llsds, l)
		default:
			kube = append(kube, o)
		}
	}
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(llsds...), kubeclient: k8sfake.NewClientset(kube...)}
	f.recorder = record.NewFakeRecorder(100)
	f.newController()
	return f
}

// newController builds a controller with empty informer caches over the fixture's fakes
// (as at the start of the process) and fills the caches from the fakes.
func (f *fixture) newController() {
	f.t.Helper()
	f.llsdInformers = informers.NewSharedInformerFactory(f.client, 0)
	f.childInformers = kubeinformers.NewSharedInformerFactory(f.kubeclient, 0)
	f.configMapInformers = kubeinformers.NewSharedInformerFactory(f.kubeclient, 0)
	f.operatorInformers = kubeinformers.NewSharedInformerFactory(f.kubeclient, 0)
	f.rsInformers = kubeinformers.NewSharedInformerFactory(f.kubeclient, 0)
	f.podInformers = kubeinformers.NewSharedInformerFactory(f.kubeclient, 0)
	c, err := NewController(f.ctx, Config{
		KubeClient:          f.kubeclient,
		Client:              f.client,
		LLSDInformers:       f.llsdInformers,
		ChildInformers:      f.childInformers,
		ConfigMapInformers:  f.configMapInformers,
		OperatorInformers:   f.operatorInformers,
		ReplicaSetInformers: f.rsInformers,
		PodInformers:        f.podInformers,
		OperatorNamespace:   testOperatorNamespace,
		OperatorVersion:     "test",
		Recorder:            f.recorder,
	})
	require.NoError(f.t, err)
	f.c = c
	f.refreshCaches()
}

// refreshCaches replaces every informer cache with the fakes' current objects, passed
// through the same transforms as in cmd/controller, as the informers would deliver them.
func (f *fixture) refreshCaches() {
	f.t.Helper()
	fill := func(informer cache.SharedIndexInformer, transform cache.TransformFunc, keep func(metav1.Object) bool, list runtime.Object, err error) {
		require.NoError(f.t, err)
		items, err := meta.ExtractList(list)
		require.NoError(f.t, err)
		var objs []any
		for _, o := range items {
			if keep != nil && !keep(o.(metav1.Object)) {
				continue
			}
			obj, err := transform(o.DeepCopyObject())
			require.NoError(f.t, err)
			objs = append(objs, obj)
		}
		require.NoError(f.t, informer.GetIndexer().Replace(objs, ""))
	}
	managed := func(o metav1.Object) bool { return o.GetLabels()[labelManagedBy] == ManagedByValue }
	ctx, all, k := f.ctx, metav1.ListOptions{}, f.kubeclient
	strip := TransformStripManagedFields
	l, err := f.client.LlamastackV1alpha2().LlamaStackDistributions("").List(ctx, all)
	fill(f.llsdInformers.Llamastack().V1alpha2().LlamaStackDistributions().Informer(), strip, nil, l, err)
	d, err := k.AppsV1().Deployments("").List(ctx, all)
	fill(f.childInformers.Apps().V1().Deployments().Informer(), strip, managed, d, err)
	s, err := k.CoreV1().Services("").List(ctx, all)
	fill(f.childInformers.Core().V1().Services().Informer(), strip, managed, s, err)
	p, err := k.CoreV1().PersistentVolumeClaims("").List(ctx, all)
	fill(f.childInformers.Core().V1().PersistentVolumeClaims().Informer(), strip, managed, p, err)
	h, err := k.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, all)
	fill(f.childInformers.Autoscaling().V2().HorizontalPodAutoscalers().Informer(), strip, managed, h, err)
	b, err := k.PolicyV1().PodDisruptionBudgets("").List(ctx, all)
	fill(f.childInformers.Policy().V1().PodDisruptionBudgets().Informer(), strip, managed, b, err)
	i, err := k.NetworkingV1().Ingresses("").List(ctx, all)
	fill(f.childInformers.Networking().V1().Ingresses().Informer(), strip, managed, i, err)
	n, err := k.NetworkingV1().NetworkPolicies("").List(ctx, all)
	fill(f.childInformers.Networking().V1().NetworkPolicies().Informer(), strip, managed, n, err)
	cms, err := k.CoreV1().ConfigMaps("").List(ctx, all)
	fill(f.configMapInformers.Core().V1().ConfigMaps().Informer(), TransformConfigMap, nil, cms, err)
	fill(f.operatorInformers.Core().V1().ConfigMaps().Informer(), strip, func(o metav1.Object) bool {
		return o.GetNamespace() == testOperatorNamespace && o.GetName() == OperatorConfigMapName
	}, cms.DeepCopy(), err)
	rs, err := k.AppsV1().ReplicaSets("").List(ctx, all)
	fill(f.rsInformers.Apps().V1().ReplicaSets().Informer(), TransformReplicaSet, func(o metav1.Object) bool {
		return o.GetLabels()[labelApp] == labelAppValue
	}, rs, err)
	pods, err := k.CoreV1().Pods("").List(ctx, all)
	fill(f.podInformers.Core().V1().Pods().Informer(), TransformPod, func(o metav1.Object) bool {
		return o.GetLabels()[labelApp] == labelAppValue
	}, pods, err)
}

// sync runs one sync of the CR and returns the API actions it sent (list and watch
// excluded), then refreshes the caches as the informers would.
func (f *fixture) sync(name string) []core.Action {
	f.t.Helper()
	f.client.ClearActions()
	f.kubeclient.ClearActions()
	err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: testNamespace, Name: name})
	require.NoError(f.t, err)
	actions := append(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeclient.Actions())...)
	f.refreshCaches()
	return actions
}

// converge syncs until a sync sends nothing (at most five times) and fails otherwise.
func (f *fixture) converge(name string) {
	f.t.Helper()
	for range 5 {
		if len(f.sync(name)) == 0 {
			return
		}
	}
	f.t.Fatalf("no steady state after five syncs; last actions: %s", describe(f.sync(name)))
}

func filterInformerActions(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		out = append(out, a)
	}
	return out
}

// mutating keeps the actions that write.
func mutating(actions []core.Action) []core.Action {
	var out []core.Action
	for _, a := range actions {
		if a.GetVerb() != "get" {
			out = append(out, a)
		}
	}
	return out
}

// describe renders actions as "verb resource[/subresource] name" lines, for assertions and messages.
func describe(actions []core.Action) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		res := a.GetResource().Resource
		if s := a.GetSubresource(); s != "" {
			res += "/" + s
		}
		name := ""
		switch act := a.(type) {
		case core.PatchAction:
			name = act.GetName()
		case core.GetAction:
			name = act.GetName()
		case core.DeleteAction:
			name = act.GetName()
		case core.UpdateAction:
			name = act.GetObject().(metav1.Object).GetName()
		case core.CreateAction:
			name = act.GetObject().(metav1.Object).GetName()
		}
		out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), res, name))
	}
	slices.Sort(out)
	return out
}

// events drains the recorded Events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// llsd reads the CR back from the fake API, in v1alpha2, the version the controller
// reads and writes.
func (f *fixture) llsd(name string) *v1alpha2.LlamaStackDistribution {
	f.t.Helper()
	l, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return l
}

// updateLLSD edits the CR in the fake API, bumping its generation as the API server
// would. The edit is written in v1alpha1, as the tests' CRs are: the stored v1alpha2
// object is converted to v1alpha1, edited, and converted back, as a v1alpha1 client's
// read-edit-write through the conversion webhook would be.
func (f *fixture) updateLLSD(name string, edit func(*v1alpha1.LlamaStackDistribution)) {
	f.t.Helper()
	var old v1alpha1.LlamaStackDistribution
	require.NoError(f.t, old.ConvertFrom(f.llsd(name)))
	edit(&old)
	l := hub(&old)
	l.Generation++
	_, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Update(f.ctx, l, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// hub is l converted to v1alpha2, the version the controller reads: the tests write
// their CRs in v1alpha1, as users of the first release did, and pass them to the
// controller's functions through it. l is not modified.
func hub(l *v1alpha1.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	var out v1alpha2.LlamaStackDistribution
	if err := l.ConvertTo(&out); err != nil {
		panic(fmt.Sprintf("converting %s/%s to v1alpha2: %v", l.Namespace, l.Name, err))
	}
	return &out
}

// newLLSD is a minimal CR; mods change it.
func newLLSD(name string, mods ...func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
	l := &v1alpha1.LlamaStackDistribution{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 1,
		},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server:   v1alpha1.ServerSpec{Distribution: v1alpha1.DistributionType{Name: "starter"}},
		},
	}
	for _, m := range mods {
		m(l)
	}
	return l
}

func configMap(ns, name string, data map[string]string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Data:       data,
	}
}

func hasEvent(events []string, substr string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, substr) })
}
