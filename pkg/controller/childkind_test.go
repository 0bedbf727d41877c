package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// TestChildKindWiring checks that each kind's functions reach that kind's resource
// with the expected verb, and that the kinds the controller never deletes (the
// Deployment and Service, which go with the CR, and the claim) or takes over have no
// delete or patch function.
func TestChildKindWiring(t *testing.T) {
	f := newFixture(t)
	c := f.c
	cases := []struct {
		resource   string
		check      func(t *testing.T, resource string, wantPatch, wantDelete bool)
		wantPatch  bool
		wantDelete bool
	}{
		{"deployments", wiringCheck(f, c.deployments), true, false},
		{"services", wiringCheck(f, c.services), true, false},
		{"persistentvolumeclaims", wiringCheck(f, c.pvcs), false, false},
		{"horizontalpodautoscalers", wiringCheck(f, c.hpas), true, true},
		{"poddisruptionbudgets", wiringCheck(f, c.pdbs), true, true},
		{"ingresses", wiringCheck(f, c.ingresses), true, true},
		{"networkpolicies", wiringCheck(f, c.networkPolicies), true, true},
		{"configmaps", wiringCheck(f, c.configMapCopies), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			tc.check(t, tc.resource, tc.wantPatch, tc.wantDelete)
		})
	}
}

// wiringCheck calls every function of k for an object that does not exist and checks
// the actions they send.
func wiringCheck[T metav1.Object, AC any](f *fixture, k *children.Kind[T, AC]) func(t *testing.T, resource string, wantPatch, wantDelete bool) {
	return func(t *testing.T, resource string, wantPatch, wantDelete bool) {
		ctx := f.ctx
		require.NotEmpty(t, k.Name)
		require.NotNil(t, k.Extract)
		_, err := k.Cached(testNamespace, "missing")
		require.True(t, apierrors.IsNotFound(err), "cached: %v", err)

		f.kubeclient.ClearActions()
		_, err = k.Live(ctx, testNamespace, "missing")
		require.True(t, apierrors.IsNotFound(err), "live: %v", err)
		if wantPatch {
			require.NotNil(t, k.Patch)
			_, err = k.Patch(ctx, testNamespace, "missing", []byte(`[]`), metav1.PatchOptions{FieldManager: FieldManager})
			require.True(t, apierrors.IsNotFound(err), "patch: %v", err)
		} else {
			require.Nil(t, k.Patch)
		}
		if wantDelete {
			require.NotNil(t, k.Delete)
			err = k.Delete(ctx, testNamespace, "missing", metav1.DeleteOptions{})
			require.True(t, apierrors.IsNotFound(err), "delete: %v", err)
		} else {
			require.Nil(t, k.Delete)
		}

		want := []string{"get"}
		if wantPatch {
			want = append(want, "patch")
		}
		if wantDelete {
			want = append(want, "delete")
		}
		var got []string
		for _, a := range f.kubeclient.Actions() {
			require.Equal(t, resource, a.GetResource().Resource, "%s", a)
			require.Equal(t, testNamespace, a.GetNamespace())
			if p, ok := a.(core.PatchAction); ok {
				require.Equal(t, types.JSONPatchType, p.GetPatchType())
			}
			got = append(got, a.GetVerb())
		}
		require.Equal(t, want, got)
	}
}

// A kind's cache reads answer as its lister would: the object, NotFound, or an error for
// an object of another type.
func TestFromIndexer(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "app-service"}}))
	require.NoError(t, indexer.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "odd"}}))
	get := children.FromIndexer[*corev1.Service](indexer, corev1.Resource("services"))

	svc, err := get(testNamespace, "app-service")
	require.NoError(t, err)
	require.Equal(t, "app-service", svc.Name)
	_, err = get(testNamespace, "missing")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = get("other", "app-service")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = get(testNamespace, "odd")
	require.ErrorContains(t, err, "holds a *v1.ConfigMap")
}

// Every kind the factory watches for the controller is bound, with its handler.
func TestEveryChildKindIsWatched(t *testing.T) {
	f := newFixture(t)
	var watched []string
	f.childInformers.Start(f.ctx.Done())
	for typ := range f.childInformers.WaitForCacheSync(f.ctx.Done()) {
		watched = append(watched, typ.String())
	}
	require.ElementsMatch(t, []string{"*v1.Deployment", "*v1.Service", "*v1.PersistentVolumeClaim",
		"*v2.HorizontalPodAutoscaler", "*v1.PodDisruptionBudget", "*v1.Ingress", "*v1.NetworkPolicy"}, watched)
}
