package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CRDFile is the LlamaStackDistribution CRD in the repository.
const CRDFile = "artifacts/crd/llamastack.io_llamastackdistributions.yaml"

// LoopbackCRD reads the CRD under the module root and, when webhookPort is not 0,
// points its conversion webhook at https://127.0.0.1:<webhookPort>/convert instead of
// the webhook Service: a local control plane has no Service network, and the
// controller runs on this machine (--webhook-bind-address=127.0.0.1:<port>, with
// --webhook-cert-hosts=localhost,127.0.0.1 so that its certificate covers the URL;
// it then sets the caBundle itself).
func LoopbackCRD(root string, webhookPort int) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(root, CRDFile))
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", CRDFile, err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	if crd.GetKind() != "CustomResourceDefinition" {
		return nil, fmt.Errorf("%s holds a %s, not a CustomResourceDefinition", CRDFile, crd.GetKind())
	}
	if webhookPort == 0 {
		return crd, nil
	}
	if _, found, _ := unstructured.NestedMap(obj, "spec", "conversion", "webhook", "clientConfig"); !found {
		return nil, fmt.Errorf("%s has no spec.conversion.webhook.clientConfig", CRDFile)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort)
	if err := unstructured.SetNestedMap(obj, map[string]any{"url": url}, "spec", "conversion", "webhook", "clientConfig"); err != nil {
		return nil, err
	}
	return crd, nil
}

// WaitCRDEstablished waits until the CustomResourceDefinition name has the condition
// Established=True. `kubectl wait --for=condition=Established` fails outright, instead
// of waiting, when it reads the CRD before the API server has written any condition.
func WaitCRDEstablished(ctx context.Context, cfg *rest.Config, name string, timeout time.Duration) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		crd, err := client.Resource(crds).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err
		case crdEstablished(crd):
			return nil
		default:
			last = fmt.Errorf("not Established yet")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s: %w (waited %s)", name, last, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// crdEstablished tells whether crd has the condition Established=True.
func crdEstablished(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
