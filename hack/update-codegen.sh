#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: deepcopy functions, the typed
# clientset (with fake), listers, informers, apply configurations, and the CRD.
set -o errexit -o nounset -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${SCRIPT_ROOT}"
MODULE=$(go list -m)

# go.sum must hold every package the generators load, or gengo silently emits nothing.
go mod download
CODEGEN_PKG=${CODEGEN_PKG:-$(go list -m -f '{{.Dir}}' k8s.io/code-generator)}
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${SCRIPT_ROOT}/hack/boilerplate.go.txt" \
    "${SCRIPT_ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --output-dir "${SCRIPT_ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${SCRIPT_ROOT}/hack/boilerplate.go.txt" \
    "${SCRIPT_ROOT}/pkg/apis"

# The CRD comes from the same types' +kubebuilder markers. controller-gen is a
# build-time tool of its own module (hack/tools), never a dependency of the controller.
rm -rf "${SCRIPT_ROOT}/artifacts/crd/"*.yaml
go -C "${SCRIPT_ROOT}/hack/tools" tool controller-gen crd \
    paths="${SCRIPT_ROOT}/pkg/apis/..." \
    output:crd:dir="${SCRIPT_ROOT}/artifacts/crd"
# controller-gen has no marker for spec.conversion: the webhook stanza (strategy
# Webhook, the controller's Service) is added to its output by a tool of the same module.
go -C "${SCRIPT_ROOT}/hack/tools" run ./crdconversion \
    "${SCRIPT_ROOT}/artifacts/crd/llamastack.io_llamastackdistributions.yaml"
# Kept on helm uninstall: deleting the CRD would delete every CR and, through them,
# their claims. kubectl ignores the annotation; the chart renders the same CRD.
sed -i '/^  annotations:$/a\    helm.sh/resource-policy: keep' \
    "${SCRIPT_ROOT}/artifacts/crd/llamastack.io_llamastackdistributions.yaml"
# The Helm chart's templates that are artifacts/ as they are (hack/update-chart.sh).
"${SCRIPT_ROOT}/hack/update-chart.sh"
