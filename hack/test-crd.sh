#!/usr/bin/env bash
# Checks the generated CRD the way the API server would, without one: the schema is
# structural, every CEL rule compiles within its cost budget, every example in
# artifacts/examples (upstream's samples among them) is admitted, and invalid objects
# are rejected with the expected messages, in both versions; v1alpha1 is compared with
# the CRD that served it alone, which the tests generate into a temporary directory with
# this module's controller-gen; and the admission policy on v1alpha1 writes
# (artifacts/policy) judges every v1alpha2 rule a v1alpha1 write could break, as the CRD
# has it. The tests live in the hack/tools module, so
# the apiextensions-apiserver libraries stay out of the controller's dependencies.
set -o errexit -o nounset -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
go -C "${SCRIPT_ROOT}/hack/tools" test -count=1 "$@" ./crdcheck/... ./crdconversion/...
