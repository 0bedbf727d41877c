package main

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const minimalCRD = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names:
    kind: Thing
    plural: things
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
`

func TestAddConversion(t *testing.T) {
	out, err := addConversion([]byte(minimalCRD))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), minimalCRD[:strings.Index(minimalCRD, "spec:\n")+len("spec:\n")]) ||
		!strings.HasSuffix(string(out), minimalCRD[strings.Index(minimalCRD, "  group:"):]) {
		t.Errorf("the rest of the file changed:\n%s", out)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(out, &crd); err != nil {
		t.Fatal(err)
	}
	c := crd.Spec.Conversion
	if c.Strategy != apiextensionsv1.WebhookConverter || len(c.Webhook.ConversionReviewVersions) != 1 || c.Webhook.ConversionReviewVersions[0] != "v1" {
		t.Errorf("conversion %+v", c)
	}
	s := c.Webhook.ClientConfig.Service
	if s.Namespace != serviceNamespace || s.Name != serviceName || *s.Path != servicePath || *s.Port != servicePort {
		t.Errorf("service %+v", s)
	}

	if _, err := addConversion(out); err == nil || !strings.Contains(err.Error(), "already set") {
		t.Errorf("a second run: %v, want an error (hack/update-codegen.sh regenerates the file first)", err)
	}
	if _, err := addConversion([]byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Error("a file without a top-level spec was accepted")
	}
}

// The CRD in artifacts/crd is this tool's output.
func TestArtifactsCRDHasTheStanza(t *testing.T) {
	raw, err := os.ReadFile("../../../artifacts/crd/llamastack.io_llamastackdistributions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\nspec:\n"+stanza+"  group: llamastack.io\n") {
		t.Error("artifacts/crd does not have the stanza right after spec: run hack/update-codegen.sh")
	}
}
