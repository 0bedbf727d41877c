//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// newNamespace creates a namespace for one test and deletes it afterwards. When the test
// fails it prints the controller's log since the test began and the namespace's objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("e2e-%s-%04x", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), rand.IntN(1<<16))
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = "e" + strings.TrimLeft(name[1:], "-")
	}
	_, err := env.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	logStart := env.controllerLog.Len()
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, name, logStart)
		}
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// dump prints what a failing test needs: the controller's log and the objects.
func dump(t *testing.T, ns string, logStart int) {
	ctx := context.Background()
	log := env.controllerLog.String()
	if logStart <= len(log) {
		log = log[logStart:]
	}
	var lines []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, ns) || strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W") {
			lines = append(lines, line)
		}
	}
	if len(lines) > 400 {
		lines = append([]string{"…"}, lines[len(lines)-400:]...)
	}
	t.Logf("controller log since the test began, lines about %s and errors:\n%s", ns, strings.Join(lines, "\n"))
	if l, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range l.Items {
			l.Items[i].ManagedFields = nil
			y, _ := yaml.Marshal(l.Items[i])
			t.Logf("LlamaStackDistribution %s/%s:\n%s", ns, l.Items[i].Name, y)
		}
	}
	if d, err := env.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range d.Items {
			y, _ := yaml.Marshal(d.Items[i])
			t.Logf("Deployment %s/%s:\n%s", ns, d.Items[i].Name, y)
		}
	}
	for what, list := range map[string]func() (any, error){
		"HorizontalPodAutoscalers": func() (any, error) {
			return env.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		},
		"PodDisruptionBudgets": func() (any, error) {
			return env.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		},
		"Ingresses": func() (any, error) { return env.kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}) },
		"NetworkPolicies": func() (any, error) {
			return env.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		},
		"PersistentVolumeClaims": func() (any, error) {
			return env.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		},
		"ConfigMaps": func() (any, error) { return env.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}) },
		"Pods":       func() (any, error) { return env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}) },
	} {
		if l, err := list(); err == nil {
			y, _ := yaml.Marshal(l)
			if len(y) > 6000 {
				y = append(y[:6000], []byte("\n…")...)
			}
			t.Logf("%s in %s:\n%s", what, ns, y)
		}
	}
	if svcs, err := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range svcs.Items {
			t.Logf("Service %s/%s (uid %s, created %s, deleting %v, owners %v)", ns, s.Name, s.UID, s.CreationTimestamp, s.DeletionTimestamp, s.OwnerReferences)
		}
	}
	if ev, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range ev.Items {
			t.Logf("Event %s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, "waiting until %s", what)
}

// llsd builds a CR; mods change it.
func llsd(ns, name string, mods ...func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
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

func create(t *testing.T, l *v1alpha1.LlamaStackDistribution) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	out, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(l.Namespace).Create(context.Background(), l, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func get(t *testing.T, ns, name string) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	l, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

// edit changes a CR's spec, retrying on conflicts.
func edit(t *testing.T, ns, name string, mod func(*v1alpha1.LlamaStackDistribution)) {
	t.Helper()
	eventually(t, 10*time.Second, "the CR is updated", func(ctx context.Context) (bool, error) {
		l, err := env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mod(l)
		_, err = env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// waitReady waits for the CR's Ready condition with a current observedGeneration, and
// for its rollout to be complete.
func waitReady(t *testing.T, ns, name string) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	return waitReadyWithin(t, ns, name, 60*time.Second)
}

func waitReadyWithin(t *testing.T, ns, name string, timeout time.Duration) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	var l *v1alpha1.LlamaStackDistribution
	eventually(t, timeout, ns+"/"+name+" is Ready", func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		// Ready alone holds through a rollout that keeps the server available: wait for
		// the rollout to be complete too.
		p := meta.FindStatusCondition(l.Status.Conditions, v1alpha1.ConditionProgressing)
		return l.Status.ObservedGeneration == l.Generation && l.Status.Phase == v1alpha1.PhaseReady &&
			meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha1.ConditionReady) &&
			p != nil && p.Reason == v1alpha1.ReasonRolloutComplete, nil
	})
	return l
}

// waitCondition waits until the CR has the condition with that status and reason.
func waitCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	var l *v1alpha1.LlamaStackDistribution
	eventually(t, 30*time.Second, fmt.Sprintf("%s/%s has %s=%s (%s)", ns, name, condType, status, reason), func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.client.LlamastackV1alpha1().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(l.Status.Conditions, condType)
		return l.Status.ObservedGeneration == l.Generation && c != nil && c.Status == status && c.Reason == reason, nil
	})
	return l
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

// waitDeployment waits until the Deployment satisfies cond.
func waitDeployment(t *testing.T, ns, name, what string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
		var err error
		d, err = env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cond(d), err
	})
	return d
}

// gone waits until get reports NotFound. Garbage collection can take a while right
// after the CRD is installed: the collector learns new resource types every 30s.
// appears waits up to 30 s until get finds what (its error is not NotFound), the twin
// of gone.
func appears(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func gone(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	eventually(t, 90*time.Second, what+" is gone", func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func server(d *appsv1.Deployment) corev1.Container {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "llama-stack" {
			return c
		}
	}
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// kubectl runs the kubectl built with the control plane against the test cluster.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.binDir+"/kubectl", append([]string{"--kubeconfig", env.cluster.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// hubOf is l in v1alpha2, the storage version, for a client that cannot count on the
// conversion webhook (a cluster whose controller serves none, or is down).
func hubOf(t *testing.T, l *v1alpha1.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	var out v1alpha2.LlamaStackDistribution
	require.NoError(t, l.ConvertTo(&out))
	return &out
}

// printedColumns is the CR as kubectl get prints it in version (v1alpha1 or v1alpha2):
// the API server's Table of it, each cell by its column's name.
func printedColumns(t *testing.T, ns, name, version string) map[string]string {
	t.Helper()
	rest := env.client.LlamastackV1alpha2().RESTClient()
	if version == "v1alpha1" {
		rest = env.client.LlamastackV1alpha1().RESTClient()
	}
	raw, err := rest.Get().Namespace(ns).Resource("llamastackdistributions").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Len(t, table.Rows, 1)
	require.Len(t, table.Rows[0].Cells, len(table.ColumnDefinitions))
	out := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		out[c.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}

// userConfigCopy is the name of CR cr's copy of a user config holding data: the pods
// mount an immutable copy named by its content hash.
func userConfigCopy(cr string, data map[string]string) string {
	return cr + "-user-config-" + revision.HashData(data, nil)
}
