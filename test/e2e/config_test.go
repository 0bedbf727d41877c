//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

const hashAnnotation = "configmap.hash/user-config"

// A user ConfigMap edit rolls the pods within seconds; a metadata-only edit does not;
// an edit the server would refuse reaches no pod, a scale-up's included: the pods
// mount an immutable copy of the file that was accepted. The refusal holds the
// template, never the scale: a scale of the CR reaches the Deployment.
func TestUserConfigEditRollsPods(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cms := env.kube.CoreV1().ConfigMaps(ns)
	_, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "llama-stack-config"},
		Data:       map[string]string{"config.yaml": starterConfig},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "llama-stack-config"}
	}))
	waitReady(t, ns, "app")
	d := deployment(t, ns, "app")
	first := d.Spec.Template.Annotations[hashAnnotation]
	require.NotEmpty(t, first)
	// starter's pin is an OGX image: its own entrypoint runs the mounted file.
	assert.Empty(t, server(d).Command)
	runConfig, _ := envValue(server(d), "RUN_CONFIG_PATH")
	assert.Equal(t, "/etc/llama-stack/config.yaml", runConfig)

	// Metadata only: nothing rolls.
	cm, err := cms.Get(ctx, "llama-stack-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Labels = map[string]string{"edited": "yes"}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Quiet means the controller has seen the edit and decided: nothing to roll.
	settle(t)
	d2 := deployment(t, ns, "app")
	assert.Equal(t, d.Generation, d2.Generation, "a metadata-only edit changed the Deployment")

	// Data: the pods roll within seconds.
	start := time.Now()
	cm, err = cms.Get(ctx, "llama-stack-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["config.yaml"] = starterConfig + "# edited\n"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the pod template hash changes", func(ctx context.Context) (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Annotations[hashAnnotation] != first, err
	})
	t.Logf("the Deployment was updated %s after the ConfigMap edit", time.Since(start).Round(time.Millisecond))
	waitReady(t, ns, "app")

	// An edit the server would refuse at start-up (a provider of an API 1.x removed) rolls
	// nothing: the pods keep serving the file they read, the CR stays Ready, the refusal
	// in Progressing.
	before := deployment(t, ns, "app")
	cm, err = cms.Get(ctx, "llama-stack-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["config.yaml"] = starterConfig + "  safety: [{provider_id: llama-guard, provider_type: \"inline::llama-guard\"}]\n"
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	l := waitCondition(t, ns, "app", v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha2.ReasonConfigInvalid)
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady), "the CR stays Ready")
	assert.Contains(t, meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing).Message, "providers.safety: server 1.3.0 has no safety API (removed in 1.0")
	eventually(t, 30*time.Second, "one Warning Event ConfigInvalid", func(ctx context.Context) (bool, error) {
		return countCREvents(ctx, ns, "app", corev1.EventTypeWarning, v1alpha2.ReasonConfigInvalid) == 1, nil
	})
	settle(t)
	after := deployment(t, ns, "app")
	assert.Equal(t, before.Generation, after.Generation, "nothing rolled")
	assert.Equal(t, before.Spec.Template.Annotations[hashAnnotation], after.Spec.Template.Annotations[hashAnnotation])

	// The refused file reaches no pod: the pods mount an immutable copy of the accepted
	// one. Scaling is not held with it: the CR scaled from 1 to 2 through v1alpha1's scale
	// subresource scales the Deployment, its template as it runs (the same config hash),
	// in one write, and the new pod is made of the accepted copy too. The refusal's
	// condition and a Warning Event say that the template is kept and the count applied.
	accepted := map[string]string{"config.yaml": starterConfig + "# edited\n"}
	copyName := userConfigCopy("app", accepted)
	requests := env.requests.snapshot()
	scaleCR(t, ns, "app", 2)
	scaled := waitDeployment(t, ns, "app", "two replicas", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	assert.True(t, equality.Semantic.DeepEqual(before.Spec.Template, scaled.Spec.Template), "the template is kept:\n%s",
		cmp.Diff(before.Spec.Template, scaled.Spec.Template))
	const held = "the Deployment keeps its template, its replica count follows the CR"
	eventually(t, 90*time.Second, "two replicas serve, Ready, and Progressing says what is held", func(ctx context.Context) (bool, error) {
		l = get(t, ns, "app")
		c := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing)
		return l.Status.AvailableReplicas == 2 && meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady) &&
			c != nil && c.Reason == v1alpha2.ReasonConfigInvalid && strings.HasSuffix(c.Message, held), nil
	})
	eventually(t, 30*time.Second, "a Warning Event says what is held", func(ctx context.Context) (bool, error) {
		evs, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == "app" && e.Type == corev1.EventTypeWarning &&
				e.Reason == v1alpha2.ReasonConfigInvalid && strings.HasSuffix(e.Message, held)
		}), err
	})
	settle(t)
	patches := 0
	for _, r := range env.requests.since(requests) {
		if strings.HasSuffix(r, " PATCH /apis/apps/v1/namespaces/"+ns+"/deployments/app") {
			patches += atoi(t, strings.TrimSuffix(strings.Fields(r)[0], "x"))
		}
	}
	assert.Equal(t, 1, patches, "one write of the Deployment, none while the pods came up; requests: %v", env.requests.since(requests))
	after = deployment(t, ns, "app")
	assert.Equal(t, before.Spec.Template.Annotations[hashAnnotation], after.Spec.Template.Annotations[hashAnnotation])
	var pods *corev1.PodList
	eventually(t, 60*time.Second, "two pods", func(ctx context.Context) (bool, error) {
		pods, err = env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
		running := 0
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					running++
				}
			}
		}
		return running == 2, err
	})
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		var mounted string
		for _, v := range p.Spec.Volumes {
			if v.Name == "user-config" && v.ConfigMap != nil {
				mounted = v.ConfigMap.Name
			}
		}
		assert.Equal(t, copyName, mounted, "pod %s mounts the copy of the accepted file", p.Name)
	}
	cp, err := cms.Get(ctx, copyName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, accepted, cp.Data, "the copy holds the accepted file")
	assert.Equal(t, ptr.To(true), cp.Immutable)
	user, err := cms.Get(ctx, "llama-stack-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, accepted, user.Data, "the user's ConfigMap holds the refused edit")
}

// A ConfigMap in another namespace is used only when it opts in; it is copied into the
// CR's namespace, and withdrawing the opt-in is reported.
func TestCrossNamespaceUserConfig(t *testing.T) {
	ns := newNamespace(t)
	shared := newNamespace(t)
	ctx := context.Background()
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-config", Namespace: shared},
		Data:       map[string]string{"config.yaml": starterConfig},
	}
	_, err := env.kube.CoreV1().ConfigMaps(shared).Create(ctx, src, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.UserConfig = &v1alpha1.UserConfigSpec{ConfigMapName: "shared-config", ConfigMapNamespace: shared}
	}))
	waitCondition(t, ns, "app", v1alpha1.ConditionDeploymentReady, metav1.ConditionFalse, v1alpha1.ReasonConfigMapNotAllowed)

	cm, err := env.kube.CoreV1().ConfigMaps(shared).Get(ctx, "shared-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Annotations = map[string]string{"llamastack.io/allowed-namespaces": "somewhere-else, " + ns}
	_, err = env.kube.CoreV1().ConfigMaps(shared).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "app")
	cp, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, userConfigCopy("app", src.Data), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, src.Data, cp.Data)
	d := deployment(t, ns, "app")
	var mounted string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "user-config" && v.ConfigMap != nil {
			mounted = v.ConfigMap.Name
		}
	}
	assert.Equal(t, userConfigCopy("app", src.Data), mounted)

	cm, err = env.kube.CoreV1().ConfigMaps(shared).Get(ctx, "shared-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Annotations = nil
	cm.Data["config.yaml"] = "version: '2'\nsecret: do-not-copy\n"
	_, err = env.kube.CoreV1().ConfigMaps(shared).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The pods keep serving the copy they mount: the CR stays Ready, and the refusal is
	// a change that does not go through, in Progressing.
	l := waitCondition(t, ns, "app", v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonConfigMapNotAllowed)
	assert.Equal(t, v1alpha1.PhaseReady, l.Status.Phase)
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady))
	assert.True(t, meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionDeploymentReady))
	cp, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, userConfigCopy("app", src.Data), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, src.Data, cp.Data, "the copy stopped following the source")
	assert.Equal(t, d.Generation, deployment(t, ns, "app").Generation, "the Deployment was left as it was")
}

// An HPA changing spec.replicas is never reverted, and turning autoscaling on never
// lowers the running replica count.
func TestHPACoexistence(t *testing.T) {
	ns := newNamespace(t)
	create(t, llsd(ns, "app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 }))
	waitReady(t, ns, "app")

	// Watch the replica count while autoscaling is switched on.
	stop := make(chan struct{})
	lowest := make(chan int32, 1)
	go func() {
		low := int32(3)
		for {
			select {
			case <-stop:
				lowest <- low
				return
			case <-time.After(50 * time.Millisecond):
			}
			d, err := env.kube.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{})
			if err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas < low {
				low = *d.Spec.Replicas
			}
		}
	}()
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptrTo(int32(1)), MaxReplicas: 5}
	})
	waitReady(t, ns, "app")
	time.Sleep(5 * time.Second)
	close(stop)
	assert.Equal(t, int32(3), <-lowest, "enabling autoscaling lowered the replica count")

	// The HPA enforces its bounds: lowering maxReplicas to 2 makes it scale to 2,
	// and the controller must not take that back.
	edit(t, ns, "app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptrTo(int32(1)), MaxReplicas: 2}
	})
	waitDeployment(t, ns, "app", "the HPA scaled to 2", func(d *appsv1.Deployment) bool {
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	for range 20 {
		time.Sleep(250 * time.Millisecond)
		d := deployment(t, ns, "app")
		require.Equal(t, int32(2), *d.Spec.Replicas, "the HPA's replica count was reverted")
	}
	l := waitReady(t, ns, "app")
	assert.Equal(t, int32(2), l.Status.AvailableReplicas)
}

func ptrTo[T any](v T) *T { return &v }

// scaleCR sets the CR's replicas through v1alpha1's scale subresource, as kubectl
// scale does.
func scaleCR(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	rc := env.client.LlamastackV1alpha1().RESTClient()
	raw, err := rc.Get().Namespace(ns).Resource("llamastackdistributions").Name(name).SubResource("scale").DoRaw(ctx)
	require.NoError(t, err)
	var scale autoscalingv1.Scale
	require.NoError(t, json.Unmarshal(raw, &scale))
	scale.Spec.Replicas = replicas
	body, err := json.Marshal(&scale)
	require.NoError(t, err)
	_, err = rc.Put().Namespace(ns).Resource("llamastackdistributions").Name(name).SubResource("scale").
		SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
	require.NoError(t, err)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
