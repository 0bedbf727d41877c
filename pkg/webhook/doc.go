// Package webhook serves the CRD's conversion webhook (llamastack.io v1alpha1 and
// v1alpha2) from the controller binary, with certificates it makes and renews itself.
//
// Three parts, each usable alone:
//
//   - ConversionHandler answers apiextensions.k8s.io/v1 ConversionReviews at /convert.
//     It checks the review and each object, and leaves the conversion itself to a
//     Converter: one unstructured object in, the same object in another apiVersion out.
//     It knows no API types; the conversion functions live beside them.
//   - Server serves the handler over HTTPS (TLS 1.2+, HTTP/1.1) with the certificate a
//     CertificateSource gives at each handshake, and reports readiness.
//   - CertManager is the default CertificateSource: a CA and a serving certificate in
//     one kubernetes.io/tls Secret of the controller's namespace shared by the replicas,
//     renewed at two thirds of their lives, and the CRD's
//     spec.conversion.webhook.clientConfig.caBundle kept current. A new CA is trusted in
//     the caBundle beside the old one before it signs anything served, and the old one
//     stays until it expires, so no conversion fails across a rotation.
//   - FileCertificates is the CertificateSource of a certificate someone else keeps
//     (cert-manager): tls.crt and tls.key read from a mounted Secret, and read again
//     when they change.
//
// # Wiring
//
// cmd/controller (app/webhook.go) starts it on every replica, outside leader election
// (the API server calls any replica through the Service), when --webhook-bind-address
// is set:
//
//	--webhook-bind-address=:9443           # "0" (the default) turns the webhook off
//	--webhook-service-name=llama-stack-controller-webhook
//	--webhook-cert-mode=self               # or "files": FileCertificates on a mounted
//	                                       #   Secret (the cert-manager overlay), whose
//	                                       #   CA injector then keeps the caBundle
//
// and adds the Server's Ready to /readyz, so that a replica receives conversions only
// once it serves a valid certificate. In artifacts/, the Service
// llama-stack-controller-webhook (port 443 to the container's 9443) selects the
// controller's pods, the CRD's spec.conversion names it (no caBundle: the CertManager
// sets it), and the kustomization installs webhook_role.yaml and
// webhook_role_binding.yaml. For make run and the test suites, the local API server
// reaches the webhook on loopback through clientConfig.url
// (https://127.0.0.1:<port>/convert), which the serving certificate's IP address
// covers (--webhook-cert-hosts=localhost,127.0.0.1).
package webhook
