package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// webhookCABundle returns the caBundle of a CRD converted by a webhook given by a
// clientConfig, and whether it is one.
func webhookCABundle(crd *apiextensionsv1.CustomResourceDefinition) ([]byte, bool) {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, false
	}
	return conv.Webhook.ClientConfig.CABundle, true
}

// publication reads the CRD's caBundle: which CAs the API servers are given, and
// since when, as far as this replica has seen. A CA in the caBundle at the replica's
// first look has been there for an unknown time (the zero time: the plan then counts
// from when the CA was made); one that joins later is dated when this sync first sees
// it, which the CRD's watch event brings about at once. With no CRD, or one not
// converted by a webhook, every CA counts as published: nothing waits for it.
//
// Only sync calls it, from the one worker.
func (m *CertManager) publication(crd *apiextensionsv1.CustomResourceDefinition) publication {
	var bundle []byte
	ok := crd != nil
	if ok {
		bundle, ok = webhookCABundle(crd)
	}
	if !ok {
		return func(*x509.Certificate) (time.Time, bool) { return time.Time{}, true }
	}
	cas, _ := parseCertificates(bundle)
	now := m.clock.Now()
	seen := make(map[string]time.Time, len(cas))
	for _, ca := range cas {
		since, known := m.publishedSince[string(ca.Raw)]
		if !known && m.publishedSince != nil {
			since = now
		}
		seen[string(ca.Raw)] = since
	}
	// CAs no longer in the caBundle are forgotten: one that comes back is dated anew.
	m.publishedSince = seen
	return func(ca *x509.Certificate) (time.Time, bool) {
		since, ok := seen[string(ca.Raw)]
		return since, ok
	}
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// caBundlePatch sets the CRD's webhook caBundle, provided the CRD is still the one read
// (its resourceVersion) and still converted by a webhook.
func caBundlePatch(crd *apiextensionsv1.CustomResourceDefinition, bundle []byte) ([]byte, error) {
	patch, err := json.Marshal([]jsonPatchOp{
		{Op: "test", Path: "/metadata/resourceVersion", Value: crd.ResourceVersion},
		{Op: "test", Path: "/spec/conversion/strategy", Value: string(apiextensionsv1.WebhookConverter)},
		// "add" sets a member whether or not it is there; []byte marshals to base64.
		{Op: "add", Path: "/spec/conversion/webhook/clientConfig/caBundle", Value: bundle},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the caBundle patch: %w", err)
	}
	return patch, nil
}

// ensureCABundle makes the CRD's webhook caBundle bundle, when the CRD exists, is
// converted by a webhook, and has another caBundle.
//
// A JSON patch rather than an update or an apply: it sends and changes nothing but
// the caBundle, needs only the patch verb, leaves the field to whoever applies the
// CRD's manifest (which has no caBundle, so an apply neither removes it nor conflicts),
// and its test operations make it fail, instead of undoing anything, when the CRD
// changed since it was read.
func (m *CertManager) ensureCABundle(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, bundle []byte) error {
	logger := klog.FromContext(ctx)
	if crd == nil {
		logger.V(4).Info("The CRD does not exist yet: no caBundle to set", "crd", m.cfg.CRDName)
		return nil
	}
	current, ok := webhookCABundle(crd)
	if !ok {
		logger.V(4).Info("The CRD is not converted by a webhook: no caBundle to set", "crd", crd.Name)
		return nil
	}
	if bytes.Equal(current, bundle) {
		return nil
	}
	patch, err := caBundlePatch(crd, bundle)
	if err != nil {
		return err
	}
	if _, err := m.crdClient.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("setting the conversion webhook's caBundle of CRD %s: %w", crd.Name, err)
	}
	logger.V(2).Info("Set the conversion webhook's caBundle", "crd", crd.Name, "cas", countCertificates(bundle))
	return nil
}

func countCertificates(bundle []byte) int {
	cas, _ := parseCertificates(bundle)
	return len(cas)
}
