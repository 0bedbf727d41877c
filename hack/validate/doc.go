// Package validate checks what pkg/controller's builders make of the FuzzBuilders corpus
// with the Kubernetes API's own validation (k8s.io/kubernetes/pkg/apis/.../validation,
// after defaulting and conversion to the internal types, as the API server does) and
// each input's CR with the CRD itself (structural schema, defaults and CEL rules, as
// apiextensions-apiserver admits it). hack/fuzz.sh writes the objects and runs it.
//
// It is a module of its own so that k8s.io/kubernetes never enters the controller's
// module. Its build list is hack/cluster/tools' (k8s.io/kubernetes with the same
// replaces, and nothing from the controller's module), so with -trimpath its packages
// come from the build cache of the local control plane's build.
package validate
