package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// Ready means serving: a change configgen refuses leaves a CR whose Deployment serves
// Ready, the refusal in Progressing (and ConfigGenerated), with one Warning Event and
// no write but the status. When the pods go away, the problem is why the CR is not
// Ready, and back again, without a second Warning; fixed, Progressing follows the
// Deployment again.
func TestRefusedChangeKeepsAServingCRReady(t *testing.T) {
	f := newFixture(t, newGenLLSD("app"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	before := f.llsd("app")
	require.Equal(t, v1alpha2.PhaseReady, before.Status.Phase)
	readySince := cond(t, before, v1alpha2.ConditionReady).LastTransitionTime
	deployment := f.deployment("app").DeepCopy()
	f.events()

	// ollama has no API key field: configgen refuses it; CEL does not.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers.Inference[0].Provider = "ollama" })
	actions := f.sync("app")
	assert.Equal(t, []string{"update llamastackdistributions/status app"}, describe(mutating(actions)), "nothing but the status is written")
	assert.Equal(t, deployment.Spec, f.deployment("app").Spec, "the Deployment is kept as it runs")

	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
	ready := cond(t, got, v1alpha2.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha2.ReasonReady, ready.Reason)
	assert.Equal(t, readySince, ready.LastTransitionTime, "Ready did not flip")
	dr := cond(t, got, v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, metav1.ConditionTrue, dr.Status, "DeploymentReady describes the Deployment: %s", dr.Message)
	assert.Equal(t, v1alpha2.ReasonDeploymentReady, dr.Reason)
	p := cond(t, got, v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionFalse, p.Status)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, p.Reason)
	assert.Contains(t, p.Message, "spec.providers.inference[0]")
	cg := cond(t, got, v1alpha2.ConditionConfigGenerated)
	assert.Equal(t, metav1.ConditionFalse, cg.Status)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cg.Reason)
	assert.Equal(t, before.Status.ResolvedDistribution, got.Status.ResolvedDistribution, "resolvedDistribution still describes what runs")
	events := f.events()
	assert.Len(t, events, 1, "one Warning Event: %v", events)
	assert.Equal(t, 1, countEvents(events, "Warning ConfigInvalid"), "%v", events)

	assert.Empty(t, mutating(f.sync("app")), "no retry spin")
	assert.Empty(t, f.events())

	// The pods go away: nothing serves, and the problem is why the CR is not Ready.
	f.setDeploymentStatus("app", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 })
	f.converge("app")
	got = f.llsd("app")
	requireUserError(t, got, v1alpha2.ReasonConfigInvalid, "spec.providers.inference[0]")
	assert.Equal(t, v1alpha2.ReasonRollingOut, cond(t, got, v1alpha2.ConditionProgressing).Reason, "Progressing follows the Deployment")
	assert.Zero(t, countEvents(f.events(), "Warning"), "the same problem is reported once")

	// Back: Ready again, the refusal in Progressing, still no second Warning.
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionReady).Status)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cond(t, got, v1alpha2.ConditionProgressing).Reason)
	events = f.events()
	assert.Zero(t, countEvents(events, "Warning"), "%v", events)
	assert.Equal(t, 1, countEvents(events, "Normal Ready"), "%v", events)

	// Fixed: the file generates again, and Progressing follows the Deployment.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Providers.Inference[0].Provider = "vllm" })
	f.converge("app")
	got = f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	p = cond(t, got, v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionTrue, p.Status)
	assert.Equal(t, v1alpha2.ReasonRolloutComplete, p.Reason)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionConfigGenerated).Status)
	assert.Empty(t, f.events())
}

// A new CR whose config configgen refuses has nothing serving: it is Failed, as any
// user error that keeps the server from starting, and no Deployment is made.
func TestRefusedConfigOfANewCRIsFailed(t *testing.T) {
	f := newFixture(t, newGenLLSD("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Providers.Inference[0].Provider = "ollama"
	}))
	f.converge("app")
	assert.Nil(t, f.stored(kindDeployment, "app"), "no Deployment")
	got := f.llsd("app")
	requireUserError(t, got, v1alpha2.ReasonConfigInvalid, "spec.providers.inference[0]")
	cg := cond(t, got, v1alpha2.ConditionConfigGenerated)
	assert.Equal(t, metav1.ConditionFalse, cg.Status)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, cg.Reason)
	assert.Nil(t, findCondition(got, v1alpha2.ConditionProgressing), "no Deployment, no Progressing")
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning ConfigInvalid"), "%v", events)
	assert.Empty(t, mutating(f.sync("app")))
	assert.Empty(t, f.events())
}

// Any user error, not only configgen's: a serving CR that names a ConfigMap that does
// not exist stays Ready, the problem in Progressing; the ConfigMap made, it rolls.
func TestMissingConfigMapOfAServingCRIsARefusedChange(t *testing.T) {
	data := map[string]string{"config.yaml": startingUserConfig}
	f := newFixture(t, newLLSDv1("app", withUserConfigMap(userConfigName, "")), configMap(testNamespace, userConfigName, data, nil))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	f.events()

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.UserConfig.ConfigMapName = "other" })
	assert.Empty(t, childWrites(f.sync("app")))
	f.converge("app")
	got := f.llsd("app")
	assert.Equal(t, v1alpha2.PhaseReady, got.Status.Phase)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionReady).Status)
	assert.Equal(t, metav1.ConditionTrue, cond(t, got, v1alpha2.ConditionDeploymentReady).Status)
	p := cond(t, got, v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionFalse, p.Status)
	assert.Equal(t, v1alpha2.ReasonConfigMapNotFound, p.Reason)
	assert.Contains(t, p.Message, "demo/other")
	assert.Nil(t, findCondition(got, v1alpha2.ConditionConfigGenerated), "no generated config, no ConfigGenerated")
	assert.Equal(t, 1, countEvents(f.events(), "Warning ConfigMapNotFound"))

	f.putConfigMap(configMap(testNamespace, "other", data, nil))
	f.converge("app")
	// The same content: the same copy, which the pods already read.
	assert.Equal(t, copyOf(f, data), userConfigVolume(t, f.deployment("app")))
	p = cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, metav1.ConditionTrue, p.Status)
	assert.Zero(t, countEvents(f.events(), "Warning"))
}

// What serving is, for a CR with a problem: the Deployment available at the desired
// count (or scaled to zero, as asked), the Service, and the storage if any.
func TestProblemWhileServing(t *testing.T) {
	f := newFixture(t)
	problems := []fault.Problem{{Reason: v1alpha2.ReasonTLSSecretNotFound, Message: "Secret demo/tls not found"}}
	available := func(n int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: testNamespace, Generation: 1},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n},
		}
	}
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "app-pvc", Namespace: testNamespace},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	withStorage := func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} }
	for name, tc := range map[string]struct {
		mods        []func(*v1alpha1.LlamaStackDistribution)
		obs         func(*v1alpha2.LlamaStackDistribution) status.Observed
		ready       bool
		readyReason string
	}{
		"serving": {obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Deployment: available(1), Service: children.NewService(l, children.AskedListening(l, ""))}
		}, ready: true, readyReason: v1alpha2.ReasonReady},
		"serving with its storage": {mods: []func(*v1alpha1.LlamaStackDistribution){withStorage}, obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Deployment: available(1), Service: children.NewService(l, children.AskedListening(l, "")), PVC: bound}
		}, ready: true, readyReason: v1alpha2.ReasonReady},
		"scaled to zero": {mods: []func(*v1alpha1.LlamaStackDistribution){func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 0 }},
			obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
				d := available(0)
				d.Spec.Replicas = ptr.To(int32(0))
				d.Status.Replicas, d.Status.UpdatedReplicas = 0, 0
				return status.Observed{Deployment: d, Service: children.NewService(l, children.AskedListening(l, ""))}
			}, ready: true, readyReason: v1alpha2.ReasonScaledToZero},
		"no Deployment": {obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Service: children.NewService(l, children.AskedListening(l, ""))}
		}},
		"not available": {obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Deployment: available(0), Service: children.NewService(l, children.AskedListening(l, ""))}
		}},
		"no Service": {obs: func(*v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Deployment: available(1)}
		}},
		"storage not bound": {mods: []func(*v1alpha1.LlamaStackDistribution){withStorage}, obs: func(l *v1alpha2.LlamaStackDistribution) status.Observed {
			return status.Observed{Deployment: available(1), Service: children.NewService(l, children.AskedListening(l, ""))}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			l := hub(newLLSDv1("app", tc.mods...))
			obs := tc.obs(l)
			obs.Problems = problems
			l.Status = f.c.calculateStatus(l, obs, metav1.Now())
			ready, dr := cond(t, l, v1alpha2.ConditionReady), cond(t, l, v1alpha2.ConditionDeploymentReady)
			if !tc.ready {
				requireUserError(t, l, v1alpha2.ReasonTLSSecretNotFound, "Secret demo/tls not found")
				if p := findCondition(l, v1alpha2.ConditionProgressing); p != nil {
					assert.NotEqual(t, v1alpha2.ReasonTLSSecretNotFound, p.Reason, "Progressing follows the Deployment")
				}
				return
			}
			assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)
			assert.Equal(t, metav1.ConditionTrue, ready.Status)
			assert.Equal(t, tc.readyReason, ready.Reason)
			assert.Equal(t, metav1.ConditionTrue, dr.Status)
			assert.False(t, strings.Contains(dr.Message, "Secret"), dr.Message)
			p := cond(t, l, v1alpha2.ConditionProgressing)
			assert.Equal(t, metav1.ConditionFalse, p.Status)
			assert.Equal(t, v1alpha2.ReasonTLSSecretNotFound, p.Reason)
			assert.Equal(t, "Secret demo/tls not found", p.Message)
			assert.Equal(t, p, *status.ReportedProblem(l.Status.Conditions))
		})
	}
}
