#!/usr/bin/env bash
# Fails when anything generated from pkg/apis (code or CRD) is not current.
set -o errexit -o nounset -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

# Regenerate in a copy of the tree so the work tree is never touched.
tar -C "${SCRIPT_ROOT}" --exclude=.git -cf - . | tar -C "${TMP}" -xf -
"${TMP}/hack/update-codegen.sh" >/dev/null

status=0
for dir in pkg/apis pkg/generated artifacts/crd charts/llama-stack-controller/templates; do
    if ! diff -Naupr "${SCRIPT_ROOT}/${dir}" "${TMP}/${dir}"; then
        status=1
    fi
done
if [[ ${status} -ne 0 ]]; then
    echo "Generated files are out of date: run hack/update-codegen.sh and commit the result." >&2
    exit 1
fi
echo "Generated files are current."
