package localcluster

import (
	"testing"

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
