//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var llsdResource = schema.GroupVersionResource{Group: "llamastack.io", Version: "v1alpha1", Resource: "llamastackdistributions"}

// Every example (upstream's samples among them) is admitted by the API server.
func TestCRDAdmitsEveryExample(t *testing.T) {
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join(env.root, "artifacts", "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	seen := 0
	for _, f := range files {
		objs, err := readObjects(f)
		require.NoError(t, err)
		for _, o := range objs {
			if o.GetKind() != "LlamaStackDistribution" {
				continue
			}
			seen++
			o.SetNamespace(ns)
			t.Run(filepath.Base(f)+"/"+o.GetName(), func(t *testing.T) {
				_, err := env.dynamic.Resource(llsdResource).Namespace(ns).Create(context.Background(), o,
					metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				assert.NoError(t, err)
			})
		}
	}
	assert.GreaterOrEqual(t, seen, 15, "examples found")
}

// Each invalid combination the schema and CEL rules cover is rejected at admission,
// with its message.
func TestCRDRejectsInvalidSpecs(t *testing.T) {
	ns := newNamespace(t)
	tests := map[string]struct {
		name string
		spec string
		want string
	}{
		"name and image":              {spec: `{server: {distribution: {name: starter, image: "x:1"}}}`, want: "Only one of name or image can be specified"},
		"neither name nor image":      {spec: `{server: {distribution: {}}}`, want: "One of name or image must be specified"},
		"maxReplicas 0":               {spec: `{server: {distribution: {name: starter}, autoscaling: {maxReplicas: 0}}}`, want: "spec.server.autoscaling.maxReplicas in body should be greater than or equal to 1"},
		"min above max":               {spec: `{server: {distribution: {name: starter}, autoscaling: {minReplicas: 5, maxReplicas: 2}}}`, want: "minReplicas must be less than or equal to maxReplicas"},
		"both PDB fields":             {spec: `{server: {distribution: {name: starter}, podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}}`, want: "Only one of minAvailable or maxUnavailable can be specified"},
		"port too high":               {spec: `{server: {distribution: {name: starter}, containerSpec: {port: 70000}}}`, want: "spec.server.containerSpec.port in body should be less than or equal to 65535"},
		"negative replicas":           {spec: `{replicas: -1, server: {distribution: {name: starter}}}`, want: "spec.replicas in body should be greater than or equal to 0"},
		"CA key with a slash":         {spec: `{server: {distribution: {name: starter}, tlsConfig: {caBundle: {configMapName: ca, configMapKeys: ["a/b"]}}}}`, want: "configMapKeys[0] in body should match"},
		"CA key with dots":            {spec: `{server: {distribution: {name: starter}, tlsConfig: {caBundle: {configMapName: ca, configMapKeys: ["a..b"]}}}}`, want: "must not contain '..'"},
		"label key with =":            {spec: `{server: {distribution: {name: starter}}, network: {allowedFrom: {labels: ["team=frontend"]}}}`, want: "spec.network.allowedFrom.labels[0] in body should match"},
		"name of 49 characters":       {name: strings.Repeat("a", 49), spec: `{server: {distribution: {name: starter}}}`, want: "at most 48 characters"},
		"name that is not DNS1035":    {name: "1abc", spec: `{server: {distribution: {name: starter}}}`, want: "DNS-1035 label"},
		"zero workers":                {spec: `{server: {distribution: {name: starter}, workers: 0}}`, want: "spec.server.workers in body should be greater than or equal to 1"},
		"ingress host not a DNS name": {spec: `{server: {distribution: {name: starter}}, network: {exposeRoute: true, ingress: {host: "Bad_Host"}}}`, want: "spec.network.ingress.host in body should match"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.spec), &spec))
			n := tc.name
			if n == "" {
				n = "invalid"
			}
			o := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "llamastack.io/v1alpha1", "kind": "LlamaStackDistribution",
				"metadata": map[string]any{"name": n, "namespace": ns},
				"spec":     spec,
			}}
			_, err := env.dynamic.Resource(llsdResource).Namespace(ns).Create(context.Background(), o,
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A relative mountPath is rejected at admission, with a message naming the field (for
// volumeMounts, its index); absolute paths, written with a trailing slash or a dot
// segment, are admitted.
func TestCRDRejectsRelativeMountPaths(t *testing.T) {
	ns := newNamespace(t)
	tests := map[string]struct {
		spec string
		want []string // none: admitted
	}{
		"relative storage.mountPath": {
			spec: `{server: {distribution: {name: starter}, storage: {mountPath: data}}}`,
			want: []string{"spec.server.storage.mountPath", "storage.mountPath must be an absolute path, starting with '/'"},
		},
		"relative podOverrides mountPath": {
			spec: `{server: {distribution: {name: starter}, podOverrides: {volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}], volumeMounts: [{name: a, mountPath: /a}, {name: b, mountPath: ./b}]}}}`,
			want: []string{"spec.server.podOverrides.volumeMounts[1].mountPath", "mountPath must be an absolute path, starting with '/'"},
		},
		"absolute paths": {
			spec: `{server: {distribution: {name: starter}, storage: {mountPath: /.llama/}, podOverrides: {volumes: [{name: a, emptyDir: {}}], volumeMounts: [{name: a, mountPath: /models/./x}]}}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var spec map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(tc.spec), &spec))
			o := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "llamastack.io/v1alpha1", "kind": "LlamaStackDistribution",
				"metadata": map[string]any{"name": "mounts", "namespace": ns},
				"spec":     spec,
			}}
			_, err := env.dynamic.Resource(llsdResource).Namespace(ns).Create(context.Background(), o,
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
