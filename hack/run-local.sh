#!/usr/bin/env bash
# Runs the controller against the cluster in $KUBECONFIG: installs the CRD, its
# admission policy, and the artifacts' RBAC and operator ConfigMap, starts the
# controller, and (on the embedded local control plane, LLSC_LOCAL=1) applies an
# example CR.
#
# The controller's metrics and health endpoints listen on 127.0.0.1, on the first free
# ports from 8080 and 8081 up, unless the arguments set --metrics-bind-address or
# --health-probe-bind-address. The ports are chosen once and kept across restarts.
#
# On the local control plane the CRD's conversion webhook is the controller's, on
# 127.0.0.1 at the first free port from 9443 up (the CRD's clientConfig.url; the
# controller's certificate covers 127.0.0.1 and sets the caBundle), unless the
# arguments set --webhook-bind-address. Against another cluster the CRD is applied as
# artifacts/crd has it (the webhook Service of an installed controller) and no webhook
# is served here: the API server could not reach it.
#
# When the controller exits on its own (a crash, a kill -9, a failed start) it is
# started again after a backoff: 1 s, doubling up to 30 s, back to 1 s after a run of
# 60 s or more. The cluster (on the local control plane: its data, every CR and PVC)
# stays. Ctrl-C (SIGINT) or SIGTERM stops the controller (SIGTERM, then SIGKILL if it
# still runs 30 s later) and ends the script.
#
# BIN is the controller binary, LOCALCLUSTER the localcluster binary (for free-ports),
# EXAMPLE the CR applied on the local control plane.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
: "${KUBECONFIG:?KUBECONFIG must name the cluster}"
BIN=${BIN:-bin/llama-stack-controller}
LOCALCLUSTER=${LOCALCLUSTER:-bin/localcluster}
EXAMPLE=${EXAMPLE:-artifacts/examples/minimal.yaml}

readonly first_delay=1 max_delay=30 healthy_run=60

say() { echo "run-local: $*" >&2; }

# The bind addresses the arguments set, if any (-flag=value, -flag value, with one or
# two dashes, as Go's flag package reads them).
metrics_addr='' health_addr=''
metrics_set=0 health_set=0 webhook_set=0
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
    -metrics-bind-address=* | --metrics-bind-address=*) metrics_set=1 metrics_addr=${args[i]#*=} ;;
    -metrics-bind-address | --metrics-bind-address) metrics_set=1 metrics_addr=${args[i + 1]:-} ;;
    -health-probe-bind-address=* | --health-probe-bind-address=*) health_set=1 health_addr=${args[i]#*=} ;;
    -health-probe-bind-address | --health-probe-bind-address) health_set=1 health_addr=${args[i + 1]:-} ;;
    -webhook-bind-address* | --webhook-bind-address*) webhook_set=1 ;;
    esac
done

# The local control plane reaches the controller's webhook on loopback.
webhook_flags=()
if [[ "${LLSC_LOCAL:-0}" == 1 && ${webhook_set} == 0 ]]; then
    [[ -x "${LOCALCLUSTER}" ]] || { say "${LOCALCLUSTER} not found: run make build (or set LOCALCLUSTER)"; exit 1; }
    webhook_port=$("${LOCALCLUSTER}" free-ports 9443)
    webhook_flags=(--webhook-bind-address "127.0.0.1:${webhook_port}" --webhook-cert-hosts localhost,127.0.0.1)
    kubectl patch --local -o yaml -f artifacts/crd/llamastack.io_llamastackdistributions.yaml --type=json \
        -p "[{\"op\":\"replace\",\"path\":\"/spec/conversion/webhook/clientConfig\",\"value\":{\"url\":\"https://127.0.0.1:${webhook_port}/convert\"}}]" |
        kubectl apply --server-side -f -
else
    kubectl apply --server-side -f artifacts/crd/
fi
kubectl apply --server-side -f artifacts/policy/ -f artifacts/controller/namespace.yaml -f artifacts/rbac/ \
    -f artifacts/controller/operator_config.yaml
# Not `kubectl wait --for=condition=Established`: it fails at once, instead of waiting, when
# it reads the CRD before the API server has written its first condition.
for ((i = 0; ; i++)); do
    established=$(kubectl get crd/llamastackdistributions.llamastack.io \
        -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null || true)
    [[ ${established} == True ]] && break
    ((i < 600)) || { say "the CRD llamastackdistributions.llamastack.io is not Established after 60s"; exit 1; }
    sleep 0.1
done

# Free loopback ports, chosen once: a restarted controller listens where the first did.
bind_flags=()
if ((metrics_set == 0 || health_set == 0)); then
    [[ -x "${LOCALCLUSTER}" ]] || { say "${LOCALCLUSTER} not found: run make build (or set LOCALCLUSTER)"; exit 1; }
    ports=$("${LOCALCLUSTER}" free-ports 8080 8081)
    read -r metrics_port health_port <<<"${ports}"
    if ((metrics_set == 0)); then
        metrics_addr=127.0.0.1:${metrics_port}
        bind_flags+=(--metrics-bind-address "${metrics_addr}")
    fi
    if ((health_set == 0)); then
        health_addr=127.0.0.1:${health_port}
        bind_flags+=(--health-probe-bind-address "${health_addr}")
    fi
fi

# endpoint describes where a bind address serves paths, or that it is off.
endpoint() {
    local addr=$1 paths=$2 host port
    if [[ -z "${addr}" || "${addr}" == 0 ]]; then
        echo "off"
        return
    fi
    host=${addr%:*} port=${addr##*:}
    [[ -n "${host}" ]] || host=localhost
    local p out=''
    for p in ${paths}; do
        out+="${out:+ and }http://${host}:${port}${p}"
    done
    echo "${out}"
}

controller='' sleeper='' started=0
# stop ends the controller: SIGTERM, then SIGKILL if it still runs 30 s later. Further
# signals are ignored meanwhile: a Ctrl-C reaches the script twice (from the terminal,
# and forwarded by localcluster run), and the second must not end the script before
# the controller is gone.
stop() {
    trap '' INT TERM
    if [[ -n "${sleeper}" ]]; then
        kill -TERM "${sleeper}" 2>/dev/null || true
    fi
    if [[ -n "${controller}" ]]; then
        kill -TERM "${controller}" 2>/dev/null || true
        local i
        for ((i = 0; i < 300; i++)); do
            kill -0 "${controller}" 2>/dev/null || break
            sleep 0.1
        done
        if ((i == 300)); then
            say "the controller (pid ${controller}) did not stop within 30s of SIGTERM; killing it"
            kill -KILL "${controller}" 2>/dev/null || true
        fi
        wait "${controller}" 2>/dev/null || true
    fi
    # A signal between a restart's fork and `controller=$!` leaves the new controller
    # unnamed: stop whatever background job is left.
    local rest
    rest=$(jobs -p)
    if [[ -n "${rest}" ]]; then
        # shellcheck disable=SC2086
        kill -TERM ${rest} 2>/dev/null || true
        wait 2>/dev/null || true
    fi
}
trap stop EXIT
# A trapped signal makes `wait` return at once; the trap then ends the script, and stop
# ends the controller, so the loop below never restarts a controller that was told to stop.
trap 'trap "" INT TERM; exit 130' INT
trap 'trap "" INT TERM; exit 143' TERM

start_controller() {
    "${BIN}" --kubeconfig "${KUBECONFIG}" --operator-namespace llama-stack-controller-system \
        ${bind_flags[@]+"${bind_flags[@]}"} ${webhook_flags[@]+"${webhook_flags[@]}"} "$@" &
    controller=$!
    started=${SECONDS}
    say "controller started (pid ${controller})"
}

start_controller "$@"

kubectl_path=$(command -v kubectl)
metrics_url=$(endpoint "${metrics_addr}" /metrics)
health_url=$(endpoint "${health_addr}" "/healthz /readyz")
webhook_url=off
if [[ -n "${webhook_port:-}" ]]; then
    webhook_url="https://127.0.0.1:${webhook_port}/convert (the CRD's conversion webhook)"
elif ((webhook_set)); then
    webhook_url="as the arguments set it"
fi
if [[ "${LLSC_LOCAL:-0}" == 1 ]]; then
    # The example is v1alpha1: the API server converts it through the controller's
    # webhook, which serves once it has its certificate and the caBundle is set.
    for ((i = 0; i < 120; i++)); do
        kubectl apply -n default --dry-run=server -f "${EXAMPLE}" >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! kubectl apply -n default -f "${EXAMPLE}"; then
        say "${EXAMPLE} was not applied: a v1alpha1 object needs the controller's conversion webhook (see its log); the controller keeps running"
    fi
    cat <<MSG

The controller runs on a local control plane (kube-apiserver, etcd, kwok fake nodes).
Metrics: ${metrics_url}
Health:  ${health_url}
Webhook: ${webhook_url}
In another terminal:

    export KUBECONFIG=${KUBECONFIG}
    ${kubectl_path} get llsd -A -w
    ${kubectl_path} get deploy,svc,pods -n default

If the controller exits on its own it is restarted (after 1 s, doubling up to 30 s);
the control plane and its data stay. Ctrl-C stops the controller and the control plane.

MSG
    still_up="The local control plane and its data are still up (KUBECONFIG=${KUBECONFIG})"
else
    cat <<MSG

The controller runs against ${KUBECONFIG}.
Metrics: ${metrics_url}
Health:  ${health_url}
Try:

    kubectl apply -f ${EXAMPLE}
    kubectl get llsd -w

If the controller exits on its own it is restarted (after 1 s, doubling up to 30 s).
Ctrl-C stops it.

MSG
    still_up="The cluster is untouched (KUBECONFIG=${KUBECONFIG})"
fi

delay=${first_delay}
while true; do
    status=0
    # (stderr: bash's own "Killed" notice for the job; the message below says it.)
    wait "${controller}" 2>/dev/null || status=$?
    pid=${controller} controller=''
    ran=$((SECONDS - started))
    if ((status > 128)) && signal=$(kill -l "$((status - 128))" 2>/dev/null); then
        how="was killed by SIG${signal} (exit status ${status})"
    else
        how="exited with status ${status}"
    fi
    if ((ran >= healthy_run)); then
        delay=${first_delay}
    fi
    say "the controller (pid ${pid}) ${how} after ${ran}s. ${still_up}; restarting the controller in ${delay}s (Ctrl-C stops everything)."
    sleep "${delay}" &
    sleeper=$!
    wait "${sleeper}" || true
    sleeper=''
    delay=$((delay * 2 > max_delay ? max_delay : delay * 2))
    start_controller "$@"
done
