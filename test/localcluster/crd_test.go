package localcluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestLoopbackCRD(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := LoopbackCRD(root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name"); name != "llama-stack-controller-webhook" {
		t.Errorf("port 0: the webhook Service is %q, want it as artifacts/crd has it", name)
	}
	crd, err = LoopbackCRD(root, 12345)
	if err != nil {
		t.Fatal(err)
	}
	cc, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
	if len(cc) != 1 || cc["url"] != "https://127.0.0.1:12345/convert" {
		t.Errorf("clientConfig = %v, want only the loopback url", cc)
	}
	if s, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy"); s != "Webhook" {
		t.Errorf("strategy %q", s)
	}
}

func TestCRDEstablished(t *testing.T) {
	cases := []struct {
		name   string
		status any
		want   bool
	}{
		{"no status yet", nil, false},
		{"no conditions yet", map[string]any{}, false},
		{"names accepted only", map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
		}}, false},
		{"established false", map[string]any{"conditions": []any{
			map[string]any{"type": "Established", "status": "False"},
		}}, false},
		{"established", map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": "True"},
		}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := map[string]any{"kind": "CustomResourceDefinition"}
			if tc.status != nil {
				obj["status"] = tc.status
			}
			assert.Equal(t, tc.want, crdEstablished(&unstructured.Unstructured{Object: obj}))
		})
	}
}
