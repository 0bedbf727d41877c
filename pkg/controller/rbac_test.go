package controller

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	"github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned/fake"
)

// clusterRoleFile is the controller's ClusterRole, as deployed.
const clusterRoleFile = "../../artifacts/rbac/cluster_role.yaml"

// rbacExceptions are granted without a request in the recorded run to show for them,
// each with the reason.
var rbacExceptions = map[string]string{
	// Children carry a controller ownerReference with blockOwnerDeletion. Where the
	// OwnerReferencesPermissionEnforcement admission plugin runs (OpenShift), setting it
	// is authorized as an update of the owner's finalizers; no request names them.
	"llamastack.io/llamastackdistributions/finalizers update": "blockOwnerDeletion under OwnerReferencesPermissionEnforcement",
	// OpenShift authorizes a Route's spec.host as a create of this subresource (a
	// changed host as an update) when it admits the write; no request names it.
	"route.openshift.io/routes/custom-host create": "a Route with spec.host on OpenShift",
	"route.openshift.io/routes/custom-host update": "a Route's changed spec.host on OpenShift",
}

// statusUpdatesOnlyStatus makes the fake's status updates of LlamaStackDistributions
// change only the status, as the API server's do: by default the fake stores the
// whole object sent, so a status written from a CR read before an edit of its spec
// would undo the edit.
func statusUpdatesOnlyStatus(client *fake.Clientset) {
	client.PrependReactor("update", "llamastackdistributions", func(a core.Action) (bool, runtime.Object, error) {
		update, ok := a.(core.UpdateAction)
		if !ok || update.GetSubresource() != "status" {
			return false, nil, nil
		}
		sent := update.GetObject().(*v1alpha2.LlamaStackDistribution)
		gvr := v1alpha2.SchemeGroupVersion.WithResource("llamastackdistributions")
		obj, err := client.Tracker().Get(gvr, sent.Namespace, sent.Name)
		if err != nil {
			return true, nil, err
		}
		stored := obj.(*v1alpha2.LlamaStackDistribution).DeepCopy()
		stored.Status = *sent.Status.DeepCopy()
		stored.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		if err := client.Tracker().Update(gvr, stored, sent.Namespace); err != nil {
			return true, nil, err
		}
		return true, stored, nil
	})
}

// permission renders a request as "<group>/<resource>[/<subresource>] <verb>" (the core
// group is empty, so core resources start with "/").
func permission(group, resource, verb string) string {
	return group + "/" + resource + " " + verb
}

// TestRBACMatchesWhatTheControllerDoes runs the controller, as cmd/controller/app wires
// it (its informers are those NewController asks the factories for), on fake clientsets
// through a representative life of a CR: every child created, the managed ConfigMaps
// copied, Events recorded, status written, then every optional child removed. Every
// request it sent must be granted by artifacts/rbac/cluster_role.yaml, and every rule
// there must be used, except rbacExceptions. Leases (leader election) have their own
// Role and are not looked at here.
func TestRBACMatchesWhatTheControllerDoes(t *testing.T) {
	used := recordControllerRequests(t)
	granted := clusterRolePermissions(t, clusterRoleFile)

	// A request for one object by name (a list or watch narrowed to metadata.name) is
	// granted by a rule for that name or by one for every name.
	unnamed := func(p string) string { before, _, _ := strings.Cut(p, " @"); return before }
	var missing, excess []string
	for _, p := range sets.List(used) {
		if !granted.Has(p) && !granted.Has(unnamed(p)) {
			missing = append(missing, p)
		}
	}
	for _, p := range sets.List(granted) {
		usedByName := slices.ContainsFunc(sets.List(used), func(u string) bool { return unnamed(u) == p })
		if !used.Has(p) && !usedByName && rbacExceptions[p] == "" {
			excess = append(excess, p)
		}
	}
	for p := range rbacExceptions {
		require.True(t, granted.Has(p), "exception %q is not granted any more: drop it from rbacExceptions", p)
	}
	require.Empty(t, missing, "the controller sends requests %s does not grant (add rules for them)", clusterRoleFile)
	require.Empty(t, excess, "%s grants what the controller never uses (remove it, or add a documented exception)", clusterRoleFile)
}

// The ClusterRole grants each kind of the table what its writer needs: get, list and
// watch for its cache, create and patch for server-side apply (and the take-over), and
// delete for the kinds the controller deletes, and no delete for the others (the
// claim). The optional kinds' informers are granted their list and watch.
func TestClusterRoleGrantsEveryKindOfTheTable(t *testing.T) {
	f := newFixture(t)
	granted := clusterRolePermissions(t, clusterRoleFile)
	has := func(gvr schema.GroupVersionResource, verb string) bool {
		return granted.Has(permission(gvr.Group, gvr.Resource, verb))
	}
	require.NotEmpty(t, f.c.childKinds)
	for _, k := range f.c.childKinds {
		for _, verb := range []string{"get", "list", "watch", "create", "patch"} {
			assert.True(t, has(k.Resource, verb), "%s: %s is not granted", k.Kind, verb)
		}
		assert.Equal(t, k.Deletes, has(k.Resource, "delete"), "%s: delete granted as the controller deletes it", k.Kind)
	}
	require.NotEmpty(t, f.c.optionalKinds)
	for _, k := range f.c.optionalKinds {
		for _, verb := range []string{"list", "watch"} {
			assert.True(t, has(k.resource, verb), "%s: %s is not granted", k.kind, verb)
		}
	}
}

// clusterRolePermissions expands the rules of a ClusterRole into permissions.
func clusterRolePermissions(t *testing.T, file string) sets.Set[string] {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(raw, &role))
	require.Equal(t, "ClusterRole", role.Kind)
	out := sets.New[string]()
	for _, r := range role.Rules {
		require.Empty(t, r.NonResourceURLs)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					require.NotEqual(t, "*", v, "wildcard verbs grant more than the controller needs")
					require.NotEqual(t, "*", res, "wildcard resources grant more than the controller needs")
					if len(r.ResourceNames) == 0 {
						out.Insert(permission(g, res, v))
					}
					for _, name := range r.ResourceNames {
						out.Insert(permission(g, res, v) + " @" + name)
					}
				}
			}
		}
	}
	return out
}

// recordControllerRequests runs the controller through a CR's life and returns the
// permissions of every request it sent.
func recordControllerRequests(t *testing.T) sets.Set[string] {
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	full := newLLSDv1("full", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Replicas = 2
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}
		l.Spec.Network = &v1alpha1.NetworkSpec{ExposeRoute: true}
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "run", ConfigMapNamespace: "shared"}
		l.Spec.Server.TLSConfig = &v1alpha1.TLSConfig{CABundle: &v1alpha1.CABundleConfig{ConfigMapName: "ca"}}
	})
	broken := newLLSDv1("broken", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Distribution.Name = "no-such-distribution"
	})
	opConfig := func(enabled bool) *corev1.ConfigMap {
		return configMap(testOperatorNamespace, OperatorConfigMapName,
			map[string]string{revision.KeyFeatureFlags: fmt.Sprintf("enableNetworkPolicy:\n  enabled: %t\nenableServiceMonitor:\n  enabled: %t\n", enabled, enabled)}, nil)
	}
	client := fake.NewClientset(hub(full), hub(broken))
	statusUpdatesOnlyStatus(client)
	kubeclient := k8sfake.NewClientset(
		opConfig(true),
		configMap("shared", "run", map[string]string{llsd.UserConfigKey: startingUserConfig}, map[string]string{AllowedNamespacesAnnotation: testNamespace}),
		configMap(testNamespace, "ca", map[string]string{revision.CABundleKey: testcert.CertPEMs(t, 1)[0]}, nil),
		newTestServing(t, "routed-service."+testNamespace+".svc").secret("routed-cert"),
	)
	// A cluster that serves Gateway API and the Prometheus Operator's: an HTTPRoute (to a
	// server that serves TLS, so with a BackendTLSPolicy and its CA) and a ServiceMonitor
	// are made and deleted too.
	crdclient := apiextensionsfake.NewClientset(httpRouteCRD(true), gatewayCRD(), backendTLSPolicyCRD(), serviceMonitorCRD(), routeCRD())
	gatewayclient := gatewayfake.NewClientset()
	dynamicclient := newMonitoringClient(t)
	require.NoError(t, client.Tracker().Add(newLLSD("routed", withServerTLS("routed-cert"),
		exposedThrough("", "", v1alpha2.GatewayParentRef{Name: "gw"}))))
	require.NoError(t, client.Tracker().Add(newLLSD("openshift", exposedAsRoute("llama.apps.example.com", nil))))
	// No recorder: the controller records Events through the API, as in a cluster.
	c, done := runControllerWith(ctx, t, client, kubeclient, func(cfg *Config) {
		cfg.CRDClient, cfg.GatewayClient, cfg.DynamicClient = crdclient, gatewayclient, dynamicclient
	})

	// The test reads and writes through the fakes' trackers, which record no action:
	// only the controller's requests are recorded.
	ns := testNamespace
	exists := func(gvr schema.GroupVersionResource, name string) bool {
		_, err := kubeclient.Tracker().Get(gvr, ns, name)
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	type object struct {
		gvr  schema.GroupVersionResource
		name string
	}
	fullCopy := userConfigCopyName(&v1alpha2.LlamaStackDistribution{ObjectMeta: metav1.ObjectMeta{Name: "full"}}, startingUserConfig)
	optional := map[string]object{
		"HorizontalPodAutoscaler": {autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"), "full-hpa"},
		"PodDisruptionBudget":     {policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), "full-pdb"},
		"Ingress":                 {networkingv1.SchemeGroupVersion.WithResource("ingresses"), "full-ingress"},
		"NetworkPolicy":           {networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), "full-network-policy"},
		"user config copy":        {corev1.SchemeGroupVersion.WithResource("configmaps"), fullCopy},
		"CA bundle":               {corev1.SchemeGroupVersion.WithResource("configmaps"), "full-ca-bundle"},
	}
	llsdGVR := v1alpha2.SchemeGroupVersion.WithResource("llamastackdistributions")
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}
	cr := func(name string) *v1alpha2.LlamaStackDistribution {
		obj, err := client.Tracker().Get(llsdGVR, ns, name)
		require.NoError(t, err)
		return obj.(*v1alpha2.LlamaStackDistribution).DeepCopy()
	}
	phase := func(name string) v1alpha2.Phase { return cr(name).Status.Phase }
	for what, o := range optional {
		waitFor(what+" is created", func() bool { return exists(o.gvr, o.name) })
	}
	monitorExists := func() bool {
		_, err := dynamicclient.Resource(children.ServiceMonitorResource).Namespace(ns).Get(ctx, "full-service-monitor", metav1.GetOptions{})
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	waitFor("the ServiceMonitor is created", monitorExists)
	openShiftRouteExists := func() bool {
		_, err := dynamicclient.Resource(children.RouteResource).Namespace(ns).Get(ctx, "openshift-route", metav1.GetOptions{})
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	waitFor("the Route is created", openShiftRouteExists)
	unexpose := func() {
		l := cr("openshift")
		if l.Spec.Networking == nil {
			return
		}
		l.Spec.Networking = nil
		l.Generation, l.ResourceVersion = 2, fmt.Sprint(time.Now().UnixNano())
		require.NoError(t, client.Tracker().Update(llsdGVR, l, ns))
	}
	waitFor("the Route is deleted", func() bool { unexpose(); return !openShiftRouteExists() })
	waitFor("the PVC is created", func() bool {
		return exists(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "full-pvc")
	})
	waitFor("both statuses are written", func() bool { return phase("full") != "" && phase("broken") == v1alpha2.PhaseFailed })
	routeExists := func() bool {
		_, err := gatewayclient.Tracker().Get(children.HTTPRouteResource, ns, "routed-route")
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	waitFor("the HTTPRoute is created", routeExists)
	policyExists := func() bool {
		_, err := gatewayclient.Tracker().Get(children.BackendTLSPolicyResource, ns, "routed-backend-tls")
		require.True(t, err == nil || apierrors.IsNotFound(err), "%v", err)
		return err == nil
	}
	backendCA := corev1.SchemeGroupVersion.WithResource("configmaps")
	waitFor("the BackendTLSPolicy is created", policyExists)
	waitFor("its CA is created", func() bool { return exists(backendCA, "routed-backend-ca") })
	// The fake's status update stores the whole object the controller read, so a status
	// write racing this edit can undo it: the edit is made again until it holds.
	unroute := func() {
		l := cr("routed")
		if l.Spec.Networking == nil {
			return
		}
		l.Spec.Networking = nil
		l.Generation, l.ResourceVersion = 2, fmt.Sprint(time.Now().UnixNano())
		require.NoError(t, client.Tracker().Update(llsdGVR, l, ns))
	}
	waitFor("the HTTPRoute is deleted", func() bool { unroute(); return !routeExists() })
	waitFor("the BackendTLSPolicy and its CA are deleted", func() bool {
		unroute()
		return !policyExists() && !exists(backendCA, "routed-backend-ca")
	})
	// A repeated Event is patched (its count) by the recorder rather than created again.
	for range 2 {
		c.recorder.Event(hub(broken), corev1.EventTypeWarning, "Repeated", "the same event twice")
	}

	// Every optional child and managed ConfigMap goes away.
	// As for the route, the edit is made again until it holds.
	edit := func() {
		l := cr("full")
		if l.Generation == 2 {
			return
		}
		l.Spec = hub(newLLSDv1("full", func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
		})).Spec
		l.Generation, l.ResourceVersion = 2, fmt.Sprint(time.Now().UnixNano()) // the fake tracker bumps neither
		require.NoError(t, client.Tracker().Update(llsdGVR, l, ns))
	}
	edit()
	op := opConfig(false)
	op.ResourceVersion = "2"
	require.NoError(t, kubeclient.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), op, testOperatorNamespace))
	// The managed ConfigMaps go once the Deployment has rolled out without them, as the
	// Deployment controller would report it.
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	// It answers every change of the Deployment's spec, as the Deployment controller
	// does (its observedGeneration follows each new generation, which the fake does not
	// bump).
	var answered *appsv1.DeploymentSpec
	rollOut := func() {
		obj, err := kubeclient.Tracker().Get(deployments, ns, "full")
		require.NoError(t, err)
		d := obj.(*appsv1.Deployment).DeepCopy()
		// As many replicas as the spec asks for at that moment: the handover from the
		// HPA (removed by the edit) may leave it at more than one for a while.
		n := ptr.Deref(d.Spec.Replicas, 1)
		if equality.Semantic.DeepEqual(answered, &d.Spec) && !mountsConfigMap(d, fullCopy) && !mountsConfigMap(d, "full-ca-bundle") &&
			d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == n && d.Status.AvailableReplicas == n && d.Status.Replicas == n {
			return
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		d.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		require.NoError(t, kubeclient.Tracker().Update(deployments, d, ns))
		answered = d.Spec.DeepCopy()
	}
	for what, o := range optional {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true,
			func(context.Context) (bool, error) { edit(); rollOut(); return !exists(o.gvr, o.name), nil })
		if err != nil {
			// What the two sides saw, for a failure seen once under load and not since.
			obj, _ := kubeclient.Tracker().Get(deployments, ns, "full")
			d := obj.(*appsv1.Deployment)
			t.Logf("the Deployment: resourceVersion %s, replicas %v, status %+v, volumes %+v", d.ResourceVersion, ptr.Deref(d.Spec.Replicas, -1), d.Status, d.Spec.Template.Spec.Volumes)
			if cached, err := c.deployments.Cached(ns, "full"); err == nil {
				t.Logf("the Deployment the controller's cache holds: resourceVersion %s, status %+v", cached.ResourceVersion, cached.Status)
			}
			l := cr("full")
			t.Logf("the CR: generation %d, spec %+v, conditions %+v", l.Generation, l.Spec, l.Status.Conditions)
			t.Fatalf("%s is deleted: %v", what, err)
		}
	}
	waitFor("the ServiceMonitor is deleted", func() bool { return !monitorExists() })
	// A server of its own certificate: its Secret is read. Made once the rest is done,
	// so that its writes do not race the edits above.
	require.NoError(t, kubeclient.Tracker().Add(newTestServing(t, "serving-service.demo.svc").secret("serving-cert")))
	require.NoError(t, client.Tracker().Add(newLLSD("serving", withServerTLS("serving-cert"))))
	waitFor("the TLS server's status is written", func() bool { return phase("serving") != "" })

	// A failed rollout rolled back: the template of the ReplicaSet that served is read.
	// The test plays the Deployment controller and the kubelet.
	require.NoError(t, client.Tracker().Add(newLLSD("rb")))
	rbDeployment := func() *appsv1.Deployment {
		obj, err := kubeclient.Tracker().Get(deployments, ns, "rb")
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return obj.(*appsv1.Deployment).DeepCopy()
	}
	rollOutRevision := func(rev string) *appsv1.ReplicaSet {
		d := rbDeployment()
		d.UID = "rb-uid"
		d.Annotations[rollout.RevisionAnnotation] = rev
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		if rev != "1" {
			d.Status.AvailableReplicas, d.Status.ReadyReplicas = 0, 0
		}
		d.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		require.NoError(t, kubeclient.Tracker().Update(deployments, d, ns))
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rb-" + rev, Namespace: ns, UID: types.UID("rb-" + rev + "-uid"),
			Labels: d.Spec.Template.Labels, Annotations: map[string]string{rollout.RevisionAnnotation: rev},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Template: *d.Spec.Template.DeepCopy()}}
		require.NoError(t, kubeclient.Tracker().Add(rs))
		return rs
	}
	waitFor("the Deployment is created", func() bool { return rbDeployment() != nil })
	rollOutRevision("1")
	waitFor("the ReplicaSet that serves is remembered", func() bool {
		return cr("rb").Status.Rollback != nil && cr("rb").Status.Rollback.ServedReplicaSet == "rb-1"
	})
	changed := cr("rb")
	changed.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}}
	changed.Generation, changed.ResourceVersion = 2, fmt.Sprint(time.Now().UnixNano())
	require.NoError(t, client.Tracker().Update(llsdGVR, changed, ns))
	waitFor("the change is rolled out", func() bool {
		return len(rbDeployment().Spec.Template.Spec.Containers[0].Env) > 0 &&
			slices.ContainsFunc(rbDeployment().Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "LOG_LEVEL" })
	})
	rs2 := rollOutRevision("2")
	require.NoError(t, kubeclient.Tracker().Add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rb-2-x", Namespace: ns, Labels: rs2.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs2, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "llama-stack", RestartCount: rollout.RollbackAfterRestarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: v1alpha2.ReasonCrashLoopBackOff}}}}},
	}))
	waitFor("the failed rollout is rolled back", func() bool { return rbDeployment().Annotations[rollout.AnnotationRolledBack] != "" })
	waitFor("the repeated Event is patched", func() bool {
		return slices.ContainsFunc(kubeclient.Actions(), func(a core.Action) bool {
			return a.GetVerb() == "patch" && a.GetResource().Resource == "events"
		})
	})
	cancel()
	require.NoError(t, <-done)

	used := sets.New[string]()
	for _, a := range slices.Concat(kubeclient.Actions(), client.Actions(), crdclient.Actions(), gatewayclient.Actions(), dynamicclient.Actions()) {
		res := a.GetResource()
		name := res.Resource
		if s := a.GetSubresource(); s != "" {
			name += "/" + s
		}
		p := permission(res.Group, name, a.GetVerb())
		var fieldSel fields.Selector
		switch act := a.(type) {
		case core.ListAction:
			fieldSel = act.GetListRestrictions().Fields
		case core.WatchAction:
			fieldSel = act.GetWatchRestrictions().Fields
		}
		if fieldSel != nil {
			if n, ok := fieldSel.RequiresExactMatch("metadata.name"); ok {
				// Authorized as a request for that object: a rule may name it.
				p += " @" + n
			}
		}
		used.Insert(p)
		if p, ok := a.(core.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
			// A server-side apply that creates the object is also authorized as a create.
			used.Insert(permission(res.Group, name, "create"))
		}
	}
	t.Logf("requests: %s", strings.Join(sets.List(used), ", "))
	return used
}
