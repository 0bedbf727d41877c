#!/usr/bin/env bash
# Runs the controller against the cluster in $KUBECONFIG: installs the CRD and the
# artifacts' RBAC and operator ConfigMap, starts the controller, and (on the embedded
# local control plane, LLSC_LOCAL=1) applies an example CR. Ctrl-C stops it.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
: "${KUBECONFIG:?KUBECONFIG must name the cluster}"
BIN=${BIN:-bin/llama-stack-controller}
EXAMPLE=${EXAMPLE:-artifacts/examples/minimal.yaml}

kubectl apply --server-side -f artifacts/crd/
kubectl apply --server-side -f artifacts/controller/namespace.yaml -f artifacts/rbac/ -f artifacts/controller/operator_config.yaml
kubectl wait --for=condition=Established --timeout=60s crd/llamastackdistributions.llamastack.io

"${BIN}" --kubeconfig "${KUBECONFIG}" --operator-namespace llama-stack-controller-system "$@" &
controller=$!
trap 'kill -TERM "${controller}" 2>/dev/null || true; wait "${controller}" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

kubectl_path=$(command -v kubectl)
if [[ "${LLSC_LOCAL:-0}" == 1 ]]; then
    kubectl apply -n default -f "${EXAMPLE}"
    cat <<MSG

The controller runs on a local control plane (kube-apiserver, etcd, kwok fake nodes).
In another terminal:

    export KUBECONFIG=${KUBECONFIG}
    ${kubectl_path} get llsd -A -w
    ${kubectl_path} get deploy,svc,pods -n default

Ctrl-C stops the controller and the control plane.

MSG
else
    cat <<MSG

The controller runs against ${KUBECONFIG}. Try:

    kubectl apply -f ${EXAMPLE}
    kubectl get llsd -w

Ctrl-C stops it.

MSG
fi
wait "${controller}"
