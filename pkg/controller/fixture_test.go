package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

// The one fixture of the sync-level tests, and the helpers they share: the CRs they
// start from (newLLSDv1 in v1alpha2; newLLSDv1 in v1alpha1, as upstream's users wrote them),
// the objects of others, and the checks of what a sync wrote (checkWrites).

// testNamespace holds the CRs of the fixture tests; testOperatorNamespace
// (networkpolicy_test.go) is the operator namespace.
const testNamespace = "demo"

// testOperatorNamespace is the namespace the controller runs in, in the tests.
const testOperatorNamespace = "llama-ops"

// fixture is the sample-controller test fixture: fake clientsets, informer caches that
// the test fills from the fakes' trackers (as the informers would), and the recorded
// actions of each sync.
type fixture struct {
	t   testing.TB
	ctx context.Context

	client     *fake.Clientset
	kubeclient *k8sfake.Clientset
	// gatewayclient holds the HTTPRoutes, while the fixture serves them (serveHTTPRoutes).
	gatewayclient *gatewayfake.Clientset
	// dynamicclient holds the ServiceMonitors, while the fixture serves them
	// (serveServiceMonitors).
	dynamicclient *dynamicfake.FakeDynamicClient
	// gateways are the Gateways the cluster has, while the fixture serves Gateway API.
	gateways []*gatewayv1.Gateway
	// crdclient, when set, is the controller's CRD client (the optional kinds' watches).
	crdclient *apiextensionsfake.Clientset

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
	f := &fixture{t: t, ctx: ctx, client: fake.NewClientset(llsds...), kubeclient: k8sfake.NewClientset(kube...),
		gatewayclient: gatewayfake.NewClientset(), dynamicclient: newMonitoringClient(t)}
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
	cfg := Config{
		KubeClient:          f.kubeclient,
		Client:              f.client,
		LLSDInformers:       f.llsdInformers,
		ChildInformers:      f.childInformers,
		ConfigMapInformers:  f.configMapInformers,
		OperatorInformers:   f.operatorInformers,
		ReplicaSetInformers: f.rsInformers,
		PodInformers:        f.podInformers,
		MetadataClient:      kubeMetadata{f.kubeclient},
		OperatorNamespace:   testOperatorNamespace,
		OperatorVersion:     "test",
		Recorder:            f.recorder,
		GatewayClient:       f.gatewayclient,
		DynamicClient:       f.dynamicclient,
	}
	if f.crdclient != nil {
		cfg.CRDClient = f.crdclient
	}
	c, err := NewController(f.ctx, cfg)
	require.NoError(f.t, err)
	f.c = c
	f.refreshCaches()
}

// serveHTTPRoutes makes the HTTPRoute API served, as once its CRD is established and
// its informer synced; without it the cluster does not serve it. The route cache is
// then filled from the Gateway API fake.
func (f *fixture) serveHTTPRoutes() {
	f.t.Helper()
	for _, k := range []*optionalKind{f.routeKind(), f.optionalKind("Gateway")} {
		k.crds = cache.NewSharedIndexInformer(&cache.ListWatch{}, &apiextensionsv1.CustomResourceDefinition{}, 0, cache.Indexers{})
		k.crdsSynced = func() bool { return true }
		k.running = &kindCache{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), synced: func() bool { return true }}
	}
	f.refreshCaches()
}

// serveServiceMonitors makes the ServiceMonitor API served, as serveHTTPRoutes does
// the HTTPRoute API.
func (f *fixture) serveServiceMonitors() { f.serveUnstructured(children.ServiceMonitorKind) }

// serveBackendTLSPolicies makes the BackendTLSPolicy API served.
func (f *fixture) serveBackendTLSPolicies() { f.serveUnstructured("BackendTLSPolicy") }

// serveOpenShiftRoutes makes the OpenShift Route API served.
func (f *fixture) serveOpenShiftRoutes() { f.serveUnstructured(children.RouteKind) }

// serveUnstructured makes the API of an optional kind served (one of the dynamic
// client, or any other whose cache refreshCaches fills).
func (f *fixture) serveUnstructured(kind string) {
	f.t.Helper()
	k := f.optionalKind(kind)
	k.crds = cache.NewSharedIndexInformer(&cache.ListWatch{}, &apiextensionsv1.CustomResourceDefinition{}, 0, cache.Indexers{})
	k.crdsSynced = func() bool { return true }
	k.running = &kindCache{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), synced: func() bool { return true }}
	f.refreshCaches()
}

// routeKind is the controller's HTTPRoute optional kind.
func (f *fixture) routeKind() *optionalKind { return f.optionalKind("HTTPRoute") }

// optionalKind is the controller's optional kind of that kind.
func (f *fixture) optionalKind(kind string) *optionalKind {
	for _, k := range f.c.optionalKinds {
		if k.kind == kind {
			return k
		}
	}
	f.t.Fatalf("no %s optional kind", kind)
	return nil
}

// refreshCaches replaces every informer cache with the fakes' current objects, passed
// through the same transforms as in cmd/controller, as the informers would deliver them.
func (f *fixture) refreshCaches() {
	f.t.Helper()
	fill := func(indexer cache.Indexer, transform cache.TransformFunc, keep func(metav1.Object) bool, list runtime.Object, err error) {
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
		require.NoError(f.t, indexer.Replace(objs, ""))
	}
	managed := func(o metav1.Object) bool { return o.GetLabels()[llsd.LabelManagedBy] == ManagedByValue }
	ctx, all, k := f.ctx, metav1.ListOptions{}, f.kubeclient
	strip := children.TransformStripManagedFields
	l, err := f.client.LlamastackV1alpha2().LlamaStackDistributions("").List(ctx, all)
	fill(f.llsdInformers.Llamastack().V1alpha2().LlamaStackDistributions().Informer().GetIndexer(), strip, nil, l, err)
	for _, kind := range f.c.childKinds {
		gvk := kind.Resource.GroupVersion().WithKind(kind.Kind)
		list, err := k.Tracker().List(kind.Resource, gvk, "")
		fill(kind.Informer.GetIndexer(), strip, managed, list, err)
	}
	if routes := f.routeKind().cache(); routes != nil {
		list, err := f.gatewayclient.GatewayV1().HTTPRoutes("").List(ctx, all)
		fill(routes, strip, managed, list, err)
	}
	if policies := f.optionalKind("BackendTLSPolicy").cache(); policies != nil {
		list, err := f.gatewayclient.GatewayV1().BackendTLSPolicies("").List(ctx, all)
		fill(policies, strip, managed, list, err)
	}
	if gateways := f.optionalKind("Gateway").cache(); gateways != nil {
		// (The Gateway API fake cannot store Gateways: its field manager maps no such
		// resource.)
		list := &gatewayv1.GatewayList{}
		for _, g := range f.gateways {
			list.Items = append(list.Items, *g)
		}
		fill(gateways, TransformGateway, nil, list, nil)
	}
	for kind, resource := range map[string]schema.GroupVersionResource{children.ServiceMonitorKind: children.ServiceMonitorResource, children.RouteKind: children.RouteResource} {
		if indexer := f.optionalKind(kind).cache(); indexer != nil {
			list, err := f.dynamicclient.Resource(resource).Namespace("").List(ctx, all)
			fill(indexer, strip, managed, list, err)
		}
	}
	cms, err := k.CoreV1().ConfigMaps("").List(ctx, all)
	fill(f.configMapInformers.Core().V1().ConfigMaps().Informer().GetIndexer(), TransformConfigMap, nil, cms, err)
	fill(f.operatorInformers.Core().V1().ConfigMaps().Informer().GetIndexer(), strip, func(o metav1.Object) bool {
		return o.GetNamespace() == testOperatorNamespace && o.GetName() == OperatorConfigMapName
	}, cms.DeepCopy(), err)
	rs, err := k.AppsV1().ReplicaSets("").List(ctx, all)
	fill(f.rsInformers.Apps().V1().ReplicaSets().Informer().GetIndexer(), rollout.TransformReplicaSet, func(o metav1.Object) bool {
		return o.GetLabels()[llsd.LabelApp] == llsd.LabelAppValue
	}, rs, err)
	secrets, err := k.CoreV1().Secrets("").List(ctx, all)
	fill(f.c.secretCache, TransformSecret, nil, secrets, err)
	pods, err := k.CoreV1().Pods("").List(ctx, all)
	fill(f.podInformers.Core().V1().Pods().Informer().GetIndexer(), rollout.TransformPod, func(o metav1.Object) bool {
		return o.GetLabels()[llsd.LabelApp] == llsd.LabelAppValue
	}, pods, err)
}

// sync runs one sync of the CR and returns the API actions it sent (list and watch
// excluded), then refreshes the caches as the informers would.
func (f *fixture) sync(name string) []core.Action {
	f.t.Helper()
	f.client.ClearActions()
	f.kubeclient.ClearActions()
	f.gatewayclient.ClearActions()
	f.dynamicclient.ClearActions()
	err := f.c.syncHandler(f.ctx, cache.ObjectName{Namespace: testNamespace, Name: name})
	require.NoError(f.t, err)
	actions := slices.Concat(filterInformerActions(f.client.Actions()), filterInformerActions(f.kubeclient.Actions()),
		filterInformerActions(f.gatewayclient.Actions()), filterInformerActions(f.dynamicclient.Actions()))
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

// newLLSDv1 is a minimal CR written in v1alpha1, as upstream's users wrote it; mods
// change it. The fixture seeds it in its v1alpha2 form (hub).
func newLLSDv1(name string, mods ...func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
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

// ownedKind describes one kind the controller writes, for table tests over all of them.
type ownedKind struct {
	kind     string // as in the controller's messages
	resource string // as in describe()
	gvr      schema.GroupVersionResource
	name     func(*v1alpha2.LlamaStackDistribution) string
	// newObject is an empty object of the kind.
	newObject func() runtime.Object
}

var (
	kindDeployment = ownedKind{"Deployment", "deployments", appsv1.SchemeGroupVersion.WithResource("deployments"),
		llsd.DeploymentName, func() runtime.Object { return &appsv1.Deployment{} }}
	kindService = ownedKind{"Service", "services", corev1.SchemeGroupVersion.WithResource("services"),
		llsd.ServiceName, func() runtime.Object { return &corev1.Service{} }}
	kindPVC = ownedKind{"PersistentVolumeClaim", "persistentvolumeclaims", corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
		llsd.PVCName, func() runtime.Object { return &corev1.PersistentVolumeClaim{} }}
	kindHPA = ownedKind{"HorizontalPodAutoscaler", "horizontalpodautoscalers", autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"),
		llsd.HPAName, func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }}
	kindPDB = ownedKind{"PodDisruptionBudget", "poddisruptionbudgets", policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"),
		llsd.PDBName, func() runtime.Object { return &policyv1.PodDisruptionBudget{} }}
	kindIngress = ownedKind{"Ingress", "ingresses", networkingv1.SchemeGroupVersion.WithResource("ingresses"),
		llsd.IngressName, func() runtime.Object { return &networkingv1.Ingress{} }}
	kindNetworkPolicy = ownedKind{"NetworkPolicy", "networkpolicies", networkingv1.SchemeGroupVersion.WithResource("networkpolicies"),
		llsd.NetworkPolicyName, func() runtime.Object { return &networkingv1.NetworkPolicy{} }}
	kindConfigMapCopy = ownedKind{"ConfigMap", "configmaps", corev1.SchemeGroupVersion.WithResource("configmaps"),
		sharedConfigCopyName, func() runtime.Object { return &corev1.ConfigMap{} }}

	allOwnedKinds = []ownedKind{kindDeployment, kindService, kindPVC, kindHPA, kindPDB, kindIngress, kindNetworkPolicy, kindConfigMapCopy}
)

const (
	// sharedNamespace holds the cross-namespace user ConfigMap of allChildren.
	sharedNamespace  = "shared"
	sharedConfigName = "shared-config"
	// featureFlagsOn and featureFlagsOff are featureFlags values of the operator ConfigMap.
	featureFlagsOn  = "enableNetworkPolicy:\n  enabled: true\n"
	featureFlagsOff = "enableNetworkPolicy:\n  enabled: false\n"
)

// startingUserConfig is a user config the pinned server starts with.
const startingUserConfig = "version: 2\ndistro_name: mine\napis: [inference]\nproviders:\n  inference:\n  - {provider_id: vllm, provider_type: remote::vllm, config: {base_url: 'http://vllm:8000/v1'}}\n"

// userConfigNamed is startingUserConfig told apart by a comment.
func userConfigNamed(name string) string {
	return startingUserConfig + "# " + strings.ReplaceAll(name, "\n", " ") + "\n"
}

// userConfigCopyName is the name of l's copy of a user config holding config.yaml alone.
func userConfigCopyName(l *v1alpha2.LlamaStackDistribution, configYAML string) string {
	return llsd.UserConfigCopyName(l, revision.HashData(map[string]string{llsd.UserConfigKey: configYAML}, nil))
}

// sharedConfigCopyName is the copy of allChildren's shared user config.
func sharedConfigCopyName(l *v1alpha2.LlamaStackDistribution) string {
	return userConfigCopyName(l, startingUserConfig)
}

// allChildren asks for every optional child: storage, autoscaling, a PDB, an Ingress and a
// cross-namespace user ConfigMap (copied). The NetworkPolicy comes from the operator ConfigMap.
func allChildren(l *v1alpha1.LlamaStackDistribution) {
	l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
	l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
	l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: sharedConfigName, ConfigMapNamespace: sharedNamespace}
}

// allChildrenObjects are the cluster objects allChildren needs: the opted-in source
// ConfigMap and an operator ConfigMap that enables NetworkPolicies.
func allChildrenObjects() []runtime.Object {
	return []runtime.Object{
		configMap(sharedNamespace, sharedConfigName, map[string]string{"config.yaml": startingUserConfig},
			map[string]string{AllowedNamespacesAnnotation: "*"}),
		operatorConfigMap(map[string]string{"featureFlags": featureFlagsOn}),
	}
}

func operatorConfigMap(data map[string]string) *corev1.ConfigMap {
	return configMap(testOperatorNamespace, OperatorConfigMapName, data, nil)
}

// putConfigMap creates or replaces a ConfigMap in the fake API and refreshes the caches.
func (f *fixture) putConfigMap(cm *corev1.ConfigMap) {
	f.t.Helper()
	cms := f.kubeclient.CoreV1().ConfigMaps(cm.Namespace)
	cur, err := cms.Get(f.ctx, cm.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(f.ctx, cm, metav1.CreateOptions{FieldManager: "kubectl"})
	case err == nil:
		cm = cm.DeepCopy()
		cm.ResourceVersion = cur.ResourceVersion
		_, err = cms.Update(f.ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl"})
	}
	require.NoError(f.t, err)
	f.refreshCaches()
}

// putSecret creates or replaces a Secret in the fake API, with a new resourceVersion (the
// fake sets none), and refreshes the caches.
func (f *fixture) putSecret(s *corev1.Secret) {
	f.t.Helper()
	s = s.DeepCopy()
	s.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	_, err := f.kubeclient.Tracker().Get(gvr, s.Namespace, s.Name)
	switch {
	case apierrors.IsNotFound(err):
		err = f.kubeclient.Tracker().Create(gvr, s, s.Namespace)
	case err == nil:
		err = f.kubeclient.Tracker().Update(gvr, s, s.Namespace)
	}
	require.NoError(f.t, err)
	f.refreshCaches()
}

// setOperatorConfig writes the operator ConfigMap with data.
func (f *fixture) setOperatorConfig(data map[string]string) {
	f.t.Helper()
	f.putConfigMap(operatorConfigMap(data))
}

// stored reads an object of the CR namespace from the fake API; nil when there is none.
func (f *fixture) stored(k ownedKind, name string) metav1.Object {
	f.t.Helper()
	obj, err := f.kubeclient.Tracker().Get(k.gvr, testNamespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return obj.(metav1.Object)
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	f.t.Helper()
	o := f.stored(kindDeployment, name)
	require.NotNil(f.t, o, "Deployment %s", name)
	return o.(*appsv1.Deployment)
}

// updateDeployment edits the stored Deployment with a plain Update as another field
// manager, as kubectl, the HPA or another controller would, and refreshes the caches.
func (f *fixture) updateDeployment(name, manager string, edit func(*appsv1.Deployment)) {
	f.t.Helper()
	d := f.deployment(name).DeepCopy()
	edit(d)
	_, err := f.kubeclient.AppsV1().Deployments(testNamespace).Update(f.ctx, d, metav1.UpdateOptions{FieldManager: manager})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// writesTo returns the described actions that write the named object of that resource.
func writesTo(actions []core.Action, resource, name string) []string {
	var out []string
	for _, line := range describe(mutating(actions)) {
		fields := strings.Fields(line)
		if len(fields) == 3 && strings.Split(fields[1], "/")[0] == resource && fields[2] == name {
			out = append(out, line)
		}
	}
	return out
}

// childWrites describes the actions that write anything but the CR (its status).
func childWrites(actions []core.Action) []string {
	var out []string
	for _, line := range describe(mutating(actions)) {
		if !strings.Contains(line, " llamastackdistributions") {
			out = append(out, line)
		}
	}
	return out
}

// requireApplies checks that every patch among actions is a forced server-side apply by
// the controller's field manager.
func requireApplies(t *testing.T, actions []core.Action) {
	t.Helper()
	for _, a := range actions {
		if a.GetVerb() != "patch" {
			continue
		}
		p, ok := a.(core.PatchActionImpl)
		require.True(t, ok, "%T", a)
		assert.Equal(t, types.ApplyPatchType, p.GetPatchType(), "patch %s %s", p.GetResource().Resource, p.GetName())
		assert.Equal(t, FieldManager, p.GetPatchOptions().FieldManager, "patch %s %s", p.GetResource().Resource, p.GetName())
		assert.Equal(t, ptr.To(true), p.GetPatchOptions().Force, "patch %s %s", p.GetResource().Resource, p.GetName())
	}
}

// assertControlledChild checks the controller reference (Kind and UID) and the child labels.
func assertControlledChild(t *testing.T, obj metav1.Object, l *v1alpha2.LlamaStackDistribution) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if assert.NotNil(t, ref, "%s has no controller reference", obj.GetName()) {
		assert.Equal(t, "LlamaStackDistribution", ref.Kind)
		assert.Equal(t, "llamastack.io/v1alpha1", ref.APIVersion)
		assert.Equal(t, l.Name, ref.Name)
		assert.Equal(t, l.UID, ref.UID)
		assert.Equal(t, ptr.To(true), ref.BlockOwnerDeletion)
	}
	for k, v := range map[string]string{
		"app":                          "llama-stack",
		"app.kubernetes.io/instance":   l.Name,
		"app.kubernetes.io/managed-by": "llama-stack-operator",
		"app.kubernetes.io/part-of":    "llama-stack",
	} {
		assert.Equal(t, v, obj.GetLabels()[k], "%s label %s", obj.GetName(), k)
	}
}

// cond returns the CR's condition of that type, failing when it is absent.
func cond(t *testing.T, l *v1alpha2.LlamaStackDistribution, condType string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(l.Status.Conditions, condType)
	require.NotNil(t, c, "condition %s missing; conditions: %+v", condType, l.Status.Conditions)
	return *c
}

// requireUserError checks the status of a CR held up by a user error.
func requireUserError(t *testing.T, l *v1alpha2.LlamaStackDistribution, reason string, msgParts ...string) {
	t.Helper()
	assert.Equal(t, v1alpha2.PhaseFailed, l.Status.Phase)
	dr := cond(t, l, v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, metav1.ConditionFalse, dr.Status)
	assert.Equal(t, reason, dr.Reason)
	for _, p := range msgParts {
		assert.Contains(t, dr.Message, p)
	}
	ready := cond(t, l, v1alpha2.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, reason, ready.Reason)
}

func countEvents(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// foreignObject is an object of kind k named name in the CR namespace that the CR does not
// control: without labels and owner, or labelled as a child but controlled by another CR
// of the same name.
func foreignObject(k ownedKind, name string, labelled bool) runtime.Object {
	obj := k.newObject()
	m, _ := meta.Accessor(obj)
	m.SetName(name)
	m.SetNamespace(testNamespace)
	if labelled {
		m.SetLabels(map[string]string{
			"app": "llama-stack", "app.kubernetes.io/instance": "app",
			"app.kubernetes.io/managed-by": "llama-stack-operator", "app.kubernetes.io/part-of": "llama-stack",
		})
		m.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: "llamastack.io/v1alpha1", Kind: "LlamaStackDistribution", Name: "app",
			UID: types.UID("uid-of-an-earlier-app"), Controller: ptr.To(true),
		}})
	} else {
		m.SetLabels(map[string]string{"owner": "someone-else"})
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm.Data = map[string]string{"config.yaml": "theirs"}
	}
	return obj
}

// serverContainerOf returns the server container of a Deployment that may carry sidecars.
func serverContainerOf(t testing.TB, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == llsd.DefaultContainerName })
	require.GreaterOrEqual(t, i, 0, "no server container")
	return d.Spec.Template.Spec.Containers[i]
}

// defaultRollingUpdate stands in for the API server's defaulting of a RollingUpdate
// Deployment (the fakes do none): the server fills strategy.rollingUpdate with 25%/25%.
// Fields the API server defaults belong to no applier, so the controller dropping them
// from its apply configuration would not remove them.
func defaultRollingUpdate(d *appsv1.Deployment) {
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.RollingUpdate == nil {
		quarter := intstr.FromString("25%")
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: ptr.To(quarter)}
	}
}

// newLLSD is a minimal CR written in v1alpha2, the version the controller reads, with
// nothing defaulted (the pointers a v1alpha2 client may leave unset); mods change it.
// New tests start from it.
func newLLSD(name string, mods ...func(*v1alpha2.LlamaStackDistribution)) *v1alpha2.LlamaStackDistribution {
	l := &v1alpha2.LlamaStackDistribution{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 1,
		},
		Spec: v1alpha2.LlamaStackDistributionSpec{Distribution: v1alpha2.DistributionSpec{Name: "starter"}},
	}
	for _, m := range mods {
		m(l)
	}
	return l
}

// childrenOf is every child of the CR app the fake API holds, by kind, as JSON without
// the fields the fake's server-side apply fills in (managedFields).
func childrenOf(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range allOwnedKinds {
		o := f.stored(k, k.name(f.llsd("app")))
		if o == nil {
			continue
		}
		o = o.(runtime.Object).DeepCopyObject().(metav1.Object)
		o.SetManagedFields(nil)
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		out[k.kind] = string(raw)
	}
	return out
}

// convergedChildren converges the CR app of a fixture seeded with objs and returns its children.
func convergedChildren(t *testing.T, objs ...runtime.Object) map[string]string {
	t.Helper()
	f := newFixture(t, objs...)
	f.converge("app")
	return childrenOf(t, f)
}

// setDeploymentStatus writes the stored Deployment's status as the Deployment controller
// would, and refreshes the caches.
func (f *fixture) setDeploymentStatus(name string, edit func(*appsv1.Deployment)) {
	f.t.Helper()
	d := f.deployment(name).DeepCopy()
	edit(d)
	_, err := f.kubeclient.AppsV1().Deployments(testNamespace).UpdateStatus(f.ctx, d, metav1.UpdateOptions{FieldManager: hpaManager})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// rolledOut reports every replica of the Deployment's spec as updated and available.
func rolledOut(d *appsv1.Deployment) {
	n := ptr.Deref(d.Spec.Replicas, 1)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		Replicas:           n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
	}
}

func (f *fixture) setPVCPhase(name string, phase corev1.PersistentVolumeClaimPhase) {
	f.t.Helper()
	p := f.stored(kindPVC, name).(*corev1.PersistentVolumeClaim).DeepCopy()
	p.Status.Phase = phase
	_, err := f.kubeclient.CoreV1().PersistentVolumeClaims(testNamespace).UpdateStatus(f.ctx, p, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
	require.NoError(f.t, err)
	f.refreshCaches()
}

// findCondition is the CR's condition of that type, or nil.
func findCondition(l *v1alpha2.LlamaStackDistribution, condType string) *metav1.Condition {
	for i := range l.Status.Conditions {
		if l.Status.Conditions[i].Type == condType {
			return &l.Status.Conditions[i]
		}
	}
	return nil
}

func hubMods(f ...func(*v1alpha2.LlamaStackDistribution)) []func(*v1alpha2.LlamaStackDistribution) {
	return f
}

// failing makes the fake API answer every verb request on services with err.
func (f *fixture) failing(verb string, err error) {
	f.kubeclient.PrependReactor(verb, "services", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
}

// updateHub replaces the CR's spec in the fake API, bumping its generation.
func (f *fixture) updateHub(name string, edit func(*v1alpha2.LlamaStackDistribution)) {
	f.t.Helper()
	l := f.llsd(name)
	edit(l)
	l.Generation++
	_, err := f.client.LlamastackV1alpha2().LlamaStackDistributions(testNamespace).Update(f.ctx, l, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.refreshCaches()
}

func (f *fixture) configMapNames() []string {
	f.t.Helper()
	list, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).List(f.ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	slices.Sort(out)
	return out
}

// queued takes every key off the controller's queue.
func (f *fixture) queued() []cache.ObjectName {
	f.t.Helper()
	var keys []cache.ObjectName
	for f.c.queue.Len() > 0 {
		k, shutdown := f.c.queue.Get()
		require.False(f.t, shutdown)
		keys = append(keys, k)
		f.c.queue.Done(k)
		f.c.queue.Forget(k)
	}
	return keys
}

// restartController replaces the controller by a new one over the same fakes, with empty
// informer factories filled from the fakes, as after a restart of the process.
func (f *fixture) restartController() {
	f.t.Helper()
	f.newController()
}

func (f *fixture) image(name string) string {
	f.t.Helper()
	return serverContainerOf(f.t, f.deployment(name)).Image
}

// createLLSD adds a CR to the fake API and the caches.
func (f *fixture) createLLSD(l *v1alpha1.LlamaStackDistribution) {
	f.t.Helper()
	require.NoError(f.t, f.client.Tracker().Add(hub(l)))
	f.refreshCaches()
}

func (f *fixture) pvc(name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	p, err := f.kubeclient.CoreV1().PersistentVolumeClaims(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return p
}

// expectedWrite is one write a sync is expected to send: its verb, resource (with
// "/subresource") and name, as describe renders them, and for an apply the object
// applied, as its builder makes it; nil object: not compared.
type expectedWrite struct {
	verb, resource, name string
	object               runtime.Object
}

// checkWrites compares the writes among actions (the reads left out) with want, as
// sample-controller's checkAction does: the same writes, and each apply carrying
// exactly the object expected, compared field by field as the API server receives it
// (the builder's object as an apply configuration: no status, no null fields).
func checkWrites(t *testing.T, actions []core.Action, want []expectedWrite) {
	t.Helper()
	got := mutating(actions)
	key := func(verb, resource, name string) string { return verb + " " + resource + " " + name }
	wantKeys := make([]string, 0, len(want))
	for _, w := range want {
		wantKeys = append(wantKeys, key(w.verb, w.resource, w.name))
	}
	slices.Sort(wantKeys)
	require.Equal(t, wantKeys, describe(got), "the writes of the sync")
	for _, w := range want {
		if w.object == nil {
			continue
		}
		var action core.Action
		for _, a := range got {
			if describe([]core.Action{a})[0] == key(w.verb, w.resource, w.name) {
				action = a
			}
		}
		patch, ok := action.(core.PatchAction)
		require.True(t, ok, "%s: expected an apply, got %T", key(w.verb, w.resource, w.name), action)
		require.Equal(t, types.ApplyPatchType, patch.GetPatchType())
		var sent map[string]any
		require.NoError(t, json.Unmarshal(patch.GetPatch(), &sent))
		expected, err := children.ToApplyConfiguration[map[string]any](w.object)
		require.NoError(t, err)
		if diff := cmp.Diff(*expected, sent); diff != "" {
			t.Errorf("%s: the object applied differs from the one expected (-want +got):\n%s", key(w.verb, w.resource, w.name), diff)
		}
	}
}
