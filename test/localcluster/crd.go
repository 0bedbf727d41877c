package localcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
