//go:build e2e

package chaos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// The scenarios write their CRs in v1alpha1, as the first release's users did, but
// the harness reads and writes them in v1alpha2, the storage version: a v1alpha1
// request goes through the conversion webhook, which the controller serves, and the
// scenarios create, edit and read CRs while it is killed. These helpers convert at
// the harness's boundary with the API's own conversion functions.

// toHub is l in v1alpha2.
func toHub(t testing.TB, l *v1alpha1.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	t.Helper()
	var out v1alpha2.LlamaStackDistribution
	require.NoError(t, l.ConvertTo(&out))
	return &out
}

// fromHub is l in v1alpha1.
func fromHub(t testing.TB, l *v1alpha2.LlamaStackDistribution) *v1alpha1.LlamaStackDistribution {
	t.Helper()
	var out v1alpha1.LlamaStackDistribution
	require.NoError(t, out.ConvertFrom(l))
	return &out
}

// getCR reads a CR (in v1alpha2) and returns it in v1alpha1.
func getCR(ctx context.Context, t testing.TB, ns, name string) (*v1alpha1.LlamaStackDistribution, error) {
	l, err := env.client.LlamastackV1alpha2().LlamaStackDistributions(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromHub(t, l), nil
}
