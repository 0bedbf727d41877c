// Command crdconversion adds the conversion webhook stanza to the CRD that
// controller-gen wrote, which has no marker for it: spec.conversion with strategy
// Webhook, ConversionReview v1, and the controller's webhook Service. It is run by
// hack/update-codegen.sh right after controller-gen, so the stanza stays generated.
//
// Usage: crdconversion FILE
//
// The stanza is inserted as text right after the top-level "spec:" line, where its key
// sorts among controller-gen's (conversion before group), so the rest of the file is
// left byte for byte; the result is then decoded strictly as a CRD and checked.
package main

import (
	"bytes"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The webhook Service in artifacts/controller, and its path in the controller.
const (
	serviceNamespace = "llama-stack-controller-system"
	serviceName      = "llama-stack-controller-webhook"
	servicePath      = "/convert"
	servicePort      = 443
)

var stanza = fmt.Sprintf(`  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: %s
          namespace: %s
          path: %s
          port: %d
      conversionReviewVersions:
      - v1
`, serviceName, serviceNamespace, servicePath, servicePort)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdconversion FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdconversion:", err)
		os.Exit(1)
	}
}

func run(file string) error {
	in, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := addConversion(in)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, out, 0o644)
}

// addConversion returns crd with the stanza inserted after its top-level spec line.
func addConversion(crd []byte) ([]byte, error) {
	lines := bytes.SplitAfter(crd, []byte("\n"))
	at := -1
	for i, l := range lines {
		switch string(bytes.TrimRight(l, "\n")) {
		case "spec:":
			if at >= 0 {
				return nil, fmt.Errorf("more than one top-level spec")
			}
			at = i
		case "  conversion:":
			return nil, fmt.Errorf("spec.conversion is already set")
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("no top-level spec")
	}
	var out bytes.Buffer
	for i, l := range lines {
		out.Write(l)
		if i == at {
			out.WriteString(stanza)
		}
	}

	var check apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(out.Bytes(), &check); err != nil {
		return nil, fmt.Errorf("the result is not a CRD: %w", err)
	}
	c := check.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil ||
		c.Webhook.ClientConfig == nil || c.Webhook.ClientConfig.Service == nil {
		return nil, fmt.Errorf("the stanza did not land in spec.conversion")
	}
	return out.Bytes(), nil
}
