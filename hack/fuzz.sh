#!/usr/bin/env bash
# Runs each fuzz target (pkg/controller, pkg/webhook, pkg/configgen, the v1alpha1 API) for
# FUZZTIME (default 30s), then checks every input of the builder targets, the seeds and
# what the fuzzing kept in the Go cache, with the Kubernetes API's own validators and the
# CRD itself (hack/validate, a module of its own so that k8s.io/kubernetes stays out of
# the controller's). Exits non-zero on the first failure, printing the failing input.
#
#   FUZZTIME=20s hack/fuzz.sh          # what CI runs
#   FUZZ_TARGETS=FuzzBuilders hack/fuzz.sh
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${root}"
fuzztime=${FUZZTIME:-30s}
targets=${FUZZ_TARGETS:-FuzzBuilders FuzzSpecFields FuzzOperatorConfig FuzzCABundle FuzzConversionRequest FuzzGenerate FuzzV1alpha1Edits}
pkg=github.com/llamastack/llama-stack-controller/pkg/controller
log=$(mktemp)
objects=$(mktemp -d)
trap 'rm -rf "${log}" "${objects}"' EXIT

# The package of each target: the conversion webhook's request body in pkg/webhook, config
# generation in pkg/configgen, v1alpha1 clients' edits of v1alpha2 objects in the v1alpha1
# API package, the rest in pkg/controller.
package_of() {
	case "$1" in
	FuzzConversionRequest) echo pkg/webhook ;;
	FuzzGenerate) echo pkg/configgen ;;
	FuzzV1alpha1Edits) echo pkg/apis/llamastack/v1alpha1 ;;
	*) echo pkg/controller ;;
	esac
}

for target in ${targets}; do
	dir=$(package_of "${target}")
	echo "fuzz: ${target} for ${fuzztime}"
	if ! go test "./${dir}" -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzztime}" 2>&1 | tee "${log}"; then
		# Go 1.26's fuzz coordinator can report the end of -fuzztime itself as a failure,
		# a bare "context deadline exceeded" with no input written (go.dev/issue/75804,
		# fixed in Go 1.27): that is not a finding.
		if ! grep -q "testdata/fuzz/${target}/" "${log}" && grep -qx "    context deadline exceeded" "${log}"; then
			echo "fuzz: ${target}: the fuzzing time ran out mid-run (go.dev/issue/75804), no failing input; not a finding"
			continue
		fi
		# go test names the file it wrote the input to; show the input itself.
		for f in $(grep -o "testdata/fuzz/${target}/[0-9a-f]*" "${log}" | sort -u); do
			echo "fuzz: ${target} failed on ${dir}/${f}:"
			cat "${dir}/${f}"
			echo "fuzz: reproduce with: go test ./${dir} -run '${target}/$(basename "${f}")'"
		done
		exit 1
	fi
done

# What the builders make of every FuzzBuilders and FuzzSpecFields input, checked with the
# real validators.
cache="$(go env GOCACHE)/fuzz/${pkg}"
corpus=""
for target in FuzzBuilders FuzzSpecFields; do
	corpus+="${root}/pkg/controller/testdata/fuzz/${target}:${cache}/${target}:"
done
LLSC_FUZZ_CORPUS="${corpus}" LLSC_FUZZ_OBJECTS="${objects}" \
	go test ./pkg/controller -count=1 -run '^TestWriteFuzzObjects$'
[[ -n "$(ls -A "${objects}")" ]] || { echo "fuzz: no objects were written"; exit 1; }
echo "fuzz: checking $(ls "${objects}" | wc -l) builder inputs with the API's validators (hack/validate)"
# -trimpath and the module's build list match hack/cluster/build.sh, so the Kubernetes
# packages come from the control plane's build cache.
LLSC_FUZZ_OBJECTS="${objects}" GOWORK=off GOFLAGS=-mod=readonly \
	go -C hack/validate test -trimpath -count=1 -v ./... | grep -v '^=== RUN'
