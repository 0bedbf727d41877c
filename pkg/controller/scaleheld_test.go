package controller

import (
	"slices"
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
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/rollout"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// Scaling is never held hostage: while a problem keeps the Deployment's template (a
// config edit refused, a TLS Secret that cannot serve, a pod the API server would
// reject) or a rollback holds it, the CR's replica count still reaches the Deployment
// that serves, its template exactly as it runs, and the problem's message says so.

// scaledAsItRuns is the apply that scales the stored Deployment d to n and changes
// nothing else: the fields the controller applied (the fakes default nothing, and the
// others' annotations are left out), with spec.replicas n and the resourceVersion it
// was read at.
func scaledAsItRuns(d *appsv1.Deployment, n int32, othersAnnotations ...string) *appsv1.Deployment {
	d = d.DeepCopy()
	for _, a := range othersAnnotations {
		delete(d.Annotations, a)
	}
	d.Spec.Replicas = ptr.To(n)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, Labels: d.Labels, Annotations: d.Annotations,
			OwnerReferences: d.OwnerReferences, ResourceVersion: d.ResourceVersion},
		Spec: d.Spec,
	}
}

// refusedEdit is a served CR with a user ConfigMap in its namespace, then an in-place
// edit of it the pre-flight refuses: the CR stays Ready, the refusal in Progressing.
func refusedEdit(t *testing.T, mods ...func(*v1alpha1.LlamaStackDistribution)) *fixture {
	t.Helper()
	f := newFixture(t, newLLSDv1("app", append([]func(*v1alpha1.LlamaStackDistribution){withUserConfigMap(userConfigName, "")}, mods...)...),
		configMap(testNamespace, userConfigName, map[string]string{"config.yaml": startingUserConfig}, nil))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	refused := map[string]string{"config.yaml": strings.Replace(startingUserConfig, "remote::vllm", "remote::no-such-provider", 1)}
	f.putConfigMap(configMap(testNamespace, userConfigName, refused, nil))
	f.converge("app")
	l := f.llsd("app")
	require.Equal(t, v1alpha2.ReasonConfigInvalid, cond(t, l, v1alpha2.ConditionProgressing).Reason)
	require.Equal(t, metav1.ConditionTrue, cond(t, l, v1alpha2.ConditionReady).Status)
	events := f.events()
	require.True(t, slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "Warning ConfigInvalid") && strings.HasSuffix(e, keepsTemplate+status.ReplicasNote(l))
	}), "the refusal's Event says what is held: %q", events)
	return f
}

const keepsTemplate = "the Deployment keeps its template, "

// While an in-place edit of the user config is refused, a scale of the CR (v1alpha2's
// scale subresource writes spec.workload.replicas, v1alpha1's spec.replicas) is one
// apply of the Deployment, its template as it runs, with the PDB that two replicas
// ask for; the refusal's condition and Event say what is held and that the count
// follows the CR. Nothing is written again once it is; scaling to zero is applied the same way.
func TestScaleDuringARefusedUserConfigEdit(t *testing.T) {
	for name, scale := range map[string]func(f *fixture, n int32){
		"v1alpha2": func(f *fixture, n int32) {
			f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To(n) })
		},
		"v1alpha1": func(f *fixture, n int32) {
			f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = n })
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := refusedEdit(t)
			before := f.deployment("app").DeepCopy()

			scale(f, 2)
			l := f.llsd("app")
			checkWrites(t, f.sync("app"), []expectedWrite{
				{"patch", "deployments", "app", scaledAsItRuns(before, 2)},
				{"patch", "poddisruptionbudgets", llsd.PDBName(l), children.NewPDB(l)},
				{"update", "llamastackdistributions/status", "app", nil},
			})
			d := f.deployment("app")
			assert.Equal(t, before.Spec.Template, d.Spec.Template, "the pods keep the accepted config")
			assert.Equal(t, ptr.To[int32](2), d.Spec.Replicas)
			// One replica of two serves: the count is why the CR is not ready, not the
			// refusal, which stays in Progressing.
			l = f.llsd("app")
			assert.Equal(t, v1alpha2.PhaseInitializing, l.Status.Phase)
			assert.Equal(t, v1alpha2.ReasonDeploymentScaling, cond(t, l, v1alpha2.ConditionDeploymentReady).Reason)
			p := cond(t, l, v1alpha2.ConditionProgressing)
			assert.Equal(t, v1alpha2.ReasonConfigInvalid, p.Reason)
			assert.Contains(t, p.Message, "remote::no-such-provider")
			assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count follows the CR"), p.Message)
			// The refusal was told with what is held (refusedEdit); a scale does not
			// change it, so it is not told again (an HPA or KEDA on the scale
			// subresource would otherwise repeat it at every scale).
			assert.Zero(t, countEvents(f.events(), "Warning"), "the held problem is not told again")

			// The second replica serves: Ready again, the refusal in Progressing.
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			l = f.llsd("app")
			assert.Equal(t, metav1.ConditionTrue, cond(t, l, v1alpha2.ConditionReady).Status)
			p = cond(t, l, v1alpha2.ConditionProgressing)
			assert.Equal(t, v1alpha2.ReasonConfigInvalid, p.Reason)
			assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count follows the CR"), p.Message)
			assert.Empty(t, f.sync("app"), "nothing changes: nothing is sent")

			// Scaled to zero while held: applied, the PDB goes, the CR is scaled to zero.
			before = f.deployment("app").DeepCopy()
			scale(f, 0)
			checkWrites(t, f.sync("app"), []expectedWrite{
				{"patch", "deployments", "app", scaledAsItRuns(before, 0)},
				{"delete", "poddisruptionbudgets", llsd.PDBName(l), nil},
				{"update", "llamastackdistributions/status", "app", nil},
			})
			assert.Equal(t, before.Spec.Template, f.deployment("app").Spec.Template)
			f.converge("app")
			l = f.llsd("app")
			assert.Equal(t, v1alpha2.ReasonScaledToZero, cond(t, l, v1alpha2.ConditionReady).Reason)
			assert.True(t, strings.HasSuffix(cond(t, l, v1alpha2.ConditionProgressing).Message, keepsTemplate+"its replica count follows the CR"))
			assert.Empty(t, f.sync("app"))
		})
	}
}

// A TLS Secret that cannot serve holds the switch to HTTPS, not the scale asked with it.
func TestScaleDuringAnInvalidTLSSecret(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	before := f.deployment("app").DeepCopy()
	invalid := newTestServing(t, "app-service.demo.svc").secret("serving")
	invalid.Data[corev1.TLSCertKey] = []byte("hello")
	_, err := f.kubeclient.CoreV1().Secrets(testNamespace).Create(f.ctx, invalid, metav1.CreateOptions{})
	require.NoError(t, err)

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		withServerTLS("serving")(l)
		l.Spec.Workload.Replicas = ptr.To[int32](3)
	})
	l := f.llsd("app")
	checkWrites(t, f.sync("app"), []expectedWrite{
		{"patch", "deployments", "app", scaledAsItRuns(before, 3)},
		{"patch", "poddisruptionbudgets", llsd.PDBName(l), children.NewPDB(l)},
		{"update", "llamastackdistributions/status", "app", nil},
	})
	d := f.deployment("app")
	assert.False(t, children.ServesTLS(d), "still plain HTTP")
	assert.Equal(t, before.Spec.Template, d.Spec.Template)
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, v1alpha2.ReasonTLSSecretInvalid, p.Reason)
	assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count follows the CR"), p.Message)
	f.converge("app")
	assert.Empty(t, f.sync("app"))
}

// While the TLS Secret the running pods mount is gone, a scale-up waits (a new pod could
// not mount it) and the condition says so; a scale-down is applied; once the Secret is
// back, the CR's count is.
func TestScaleUpWaitsForAMountedTLSSecret(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("serving")))
	f.putSecret(serving.secret("serving"))
	f.converge("app")
	f.setDeploymentStatus("app", rolledOut)
	f.converge("app")
	require.True(t, children.ServesTLS(f.deployment("app")))
	before := f.deployment("app").DeepCopy()
	f.secretEvent(serving.secret("serving"), nil)
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonTLSSecretNotFound, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
	f.events()

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](3) })
	f.converge("app")
	d := f.deployment("app")
	assert.Equal(t, before.Spec, d.Spec, "the count waits for the Secret")
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.Equal(t, v1alpha2.ReasonTLSSecretNotFound, p.Reason)
	assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count stays at 1 until the TLS Secret is back: a new pod could not mount it"), p.Message)
	assert.Empty(t, f.sync("app"), "nothing more to write")

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](0) })
	f.converge("app")
	assert.Equal(t, ptr.To[int32](0), f.deployment("app").Spec.Replicas, "a scale-down is applied")
	assert.Equal(t, before.Spec.Template, f.deployment("app").Spec.Template)

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Replicas = ptr.To[int32](2) })
	f.queued()
	f.secretEvent(nil, serving.secret("serving"))
	f.converge("app")
	assert.Equal(t, ptr.To[int32](2), f.deployment("app").Spec.Replicas, "the Secret back, the CR's count")
}

// A pod the API server would reject (a volume named as one of the controller's) keeps
// the template; the scale asked with it is applied.
func TestScaleDuringAPodConflict(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	before := f.deployment("app").DeepCopy()
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Volumes: []corev1.Volume{{Name: llsd.VolumeStorage,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
		l.Spec.Workload.Replicas = ptr.To[int32](2)
	})
	l := f.llsd("app")
	checkWrites(t, f.sync("app"), []expectedWrite{
		{"patch", "deployments", "app", scaledAsItRuns(before, 2)},
		{"patch", "poddisruptionbudgets", llsd.PDBName(l), children.NewPDB(l)},
		{"update", "llamastackdistributions/status", "app", nil},
	})
	assert.Equal(t, before.Spec.Template, f.deployment("app").Spec.Template)
	dr := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonResourceInvalid, dr.Reason)
	assert.True(t, strings.HasSuffix(dr.Message, keepsTemplate+"its replica count follows the CR"), dr.Message)
	f.converge("app")
	assert.Empty(t, f.sync("app"))
}

// With autoscaling the HPA owns the count: a problem holds the Deployment whole (the
// HPA's count stays), and the HPA, which follows the CR alone, still takes the CR's
// new bounds.
func TestScaleWithAutoscalingDuringARefusedEdit(t *testing.T) {
	f := refusedEdit(t, func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5}
	})
	f.scaleAsHPA("app", 4)
	f.setDeploymentStatus("app", rolledOut)
	assert.Empty(t, childWrites(f.sync("app")), "the HPA's count is left to it")
	assert.Equal(t, int32(4), f.replicas("app"))

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Autoscaling.MinReplicas = ptr.To[int32](2) })
	l := f.llsd("app")
	checkWrites(t, f.sync("app"), []expectedWrite{
		{"patch", "horizontalpodautoscalers", llsd.HPAName(l), children.NewHPA(l)},
		{"update", "llamastackdistributions/status", "app", nil},
	})
	assert.Equal(t, int32(4), f.replicas("app"), "no replica count written")
	p := cond(t, f.llsd("app"), v1alpha2.ConditionProgressing)
	assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count is left to the HorizontalPodAutoscaler"), p.Message)
	f.converge("app")
	assert.Empty(t, f.sync("app"))
}

// While a rollback holds, a scale is one apply of the template that served with the new
// count; the hold and its record stay, and Progressing says the count is applied. With
// a problem besides (a TLS Secret missing), the same.
func TestScaleDuringAHeldRollback(t *testing.T) {
	for _, problem := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "held-and-a-problem"}[problem], func(t *testing.T) {
			f := newRollbackFixture(t, newGenLLSD("app"))
			f.failChange(true)
			f.converge("app")
			require.Equal(t, v1alpha2.ReasonRolledBack, cond(t, f.llsd("app"), v1alpha2.ConditionProgressing).Reason)
			f.rollOut()
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			before := f.deployment("app").DeepCopy()
			require.Contains(t, before.Annotations, rollout.AnnotationRolledBack)
			f.events()

			f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
				l.Spec.Workload.Replicas = ptr.To[int32](2)
				if problem {
					withServerTLS("missing")(l)
				}
			})
			l := f.llsd("app")
			checkWrites(t, f.sync("app"), []expectedWrite{
				{"patch", "deployments", "app", scaledAsItRuns(before, 2, rollout.RevisionAnnotation)},
				{"patch", "poddisruptionbudgets", llsd.PDBName(l), children.NewPDB(l)},
				{"update", "llamastackdistributions/status", "app", nil},
			})
			d := f.deployment("app")
			assert.Equal(t, before.Spec.Template, d.Spec.Template, "the template that served")
			assert.Equal(t, before.Annotations[rollout.AnnotationRolledBack], d.Annotations[rollout.AnnotationRolledBack])
			f.setDeploymentStatus("app", rolledOut)
			f.converge("app")
			got := f.llsd("app")
			if problem {
				p := cond(t, got, v1alpha2.ConditionProgressing)
				assert.Equal(t, v1alpha2.ReasonTLSSecretNotFound, p.Reason)
				assert.True(t, strings.HasSuffix(p.Message, keepsTemplate+"its replica count follows the CR"), p.Message)
			} else {
				p := cond(t, got, v1alpha2.ConditionProgressing)
				assert.Equal(t, v1alpha2.ReasonRolledBack, p.Reason)
				assert.True(t, strings.HasSuffix(p.Message, "the Deployment keeps the template that served, its replica count follows the CR"), p.Message)
			}
			assert.NotEmpty(t, got.Status.Rollback.FailedInputs, "the hold stays")
			assert.Equal(t, 0, countEvents(f.events(), "Warning RolledBack"), "no second rollback")
			assert.Empty(t, f.sync("app"))
		})
	}
}
