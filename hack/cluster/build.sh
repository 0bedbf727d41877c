#!/usr/bin/env bash
# Builds the binaries of the local control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl and kwok) from the tool
# modules in hack/cluster/tools and hack/cluster/kwok, and writes the kwok
# stages file next to them.
#
# Output goes to a cache directory outside the repository:
#   ${LLSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llama-stack-controller}/cluster-<hash>/
#     bin/               the six binaries
#     kwok-stages.yaml   Stage objects for kwok's --config
# where <hash> covers both tool modules' go.mod/go.sum, versions.env and
# `go version`. When that directory is complete the script only checks it and
# returns. The first build takes about 16 minutes on two cores, and says so;
# it prints a line per binary, and one a minute while a binary builds.
#
# Logs go to stderr; the last line on stdout is the bin directory.
set -euo pipefail

# Everything goes to stderr except the final answer, written to fd 3.
exec 3>&1 1>&2

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools_dir="${here}/tools"
kwok_dir="${here}/kwok"
versions_file="${here}/versions.env"

# Bump when the way the binaries are built changes (flags, file layout), so an
# old cache directory is not reused.
build_recipe=1

log() { printf '[cluster-build] %s\n' "$*"; }
die() { printf '[cluster-build] error: %s\n' "$*"; exit 1; }

command -v go >/dev/null || die "go is not on PATH"

# Tool modules are built on their own, whatever the caller's environment says.
export GOWORK=off
export GOFLAGS="-mod=readonly -buildvcs=false"

# --- versions.env: the only place where the versions are chosen --------------
KUBE_VERSION="" ETCD_VERSION="" KWOK_VERSION=""
while IFS='=' read -r key value; do
	case "${key}" in
	KUBE_VERSION) KUBE_VERSION="${value}" ;;
	ETCD_VERSION) ETCD_VERSION="${value}" ;;
	KWOK_VERSION) KWOK_VERSION="${value}" ;;
	'' | '#'*) ;;
	*) die "unknown key '${key}' in ${versions_file}" ;;
	esac
done <"${versions_file}"
for v in KUBE_VERSION ETCD_VERSION KWOK_VERSION; do
	[[ "${!v}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "${v}='${!v}' in ${versions_file} is not vX.Y.Z"
done
# Staging modules are published as v0.<minor>.<patch> next to kubernetes v1.<minor>.<patch>.
staging_version="v0.${KUBE_VERSION#v1.}"
kube_minor="${KUBE_VERSION#v1.}"
kube_minor="${kube_minor%%.*}"

# require_version FILE MODULE VERSION: FILE's require line for MODULE names VERSION.
require_version() {
	local got
	got="$(awk -v m="$2" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == "require" && $2 == "(" { inreq = 1; next }
		inreq && $1 == ")" { inreq = 0; next }
		inreq && $1 == m { print $2; exit }' "$1")"
	[[ "${got}" == "$3" ]] || die "$1 requires $2 ${got:-(nothing)}, but ${versions_file} says $3"
}

require_version "${tools_dir}/go.mod" k8s.io/kubernetes "${KUBE_VERSION}"
require_version "${tools_dir}/go.mod" go.etcd.io/etcd/server/v3 "${ETCD_VERSION}"
require_version "${kwok_dir}/go.mod" sigs.k8s.io/kwok "${KWOK_VERSION}"

# --- cache directory ------------------------------------------------------
go_version="$(go version)"
hash="$(
	{
		echo "recipe ${build_recipe}"
		echo "${go_version}"
		for f in "${tools_dir}/go.mod" "${tools_dir}/go.sum" "${kwok_dir}/go.mod" "${kwok_dir}/go.sum" "${versions_file}"; do
			echo "== ${f#"${here}/"}"
			cat "${f}"
		done
	} | sha256sum | cut -c1-16
)"
cache_root="${LLSC_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/llama-stack-controller}"
cache_dir="${cache_root}/cluster-${hash}"
bin_dir="${cache_dir}/bin"
stages_file="${cache_dir}/kwok-stages.yaml"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

mkdir -p "${cache_root}"
# One build per cache directory at a time (other sessions may share the cache).
exec 9>"${cache_dir}.lock"
if ! flock -n 9; then
	log "another process is building this control plane; waiting for it (${cache_dir}.lock)"
	flock 9
fi

complete() {
	[[ -f "${cache_dir}/.complete" && -s "${stages_file}" ]] || return 1
	local b
	for b in "${binaries[@]}"; do
		[[ -x "${bin_dir}/${b}" ]] || return 1
	done
}

if complete; then
	log "up to date: ${bin_dir}"
	echo "${bin_dir}" >&3
	exit 0
fi

log "first build of the local control plane: done once, then reused from the cache; about 16 minutes on two cores, more on a busy machine"
log "(six binaries: a line as each starts and ends, and one a minute meanwhile)"
start=${SECONDS}

# Checked before building (a cached build was checked when it was made).
# The staging replaces must be exactly those of k8s.io/kubernetes' own go.mod,
# each pointing at the matching published release.
kube_gomod="$(cd "${tools_dir}" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
[[ -f "${kube_gomod}" ]] || die "cannot find the go.mod of k8s.io/kubernetes@${KUBE_VERSION}"
want_replaces="$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "${kube_gomod}" | sort)"
have_replaces="$(awk -v v="${staging_version}" '
	$2 == "=>" && $3 == $1 && $4 == v { print $1 }
	$3 == "=>" && $4 == $2 && $5 == v { print $2 }' "${tools_dir}/go.mod" | sort)"
if [[ "${want_replaces}" != "${have_replaces}" ]]; then
	diff <(echo "${want_replaces}") <(echo "${have_replaces}") || true
	die "${tools_dir}/go.mod must replace each staging module of k8s.io/kubernetes ${KUBE_VERSION} with its ${staging_version} release"
fi
# etcd must be the version kubernetes itself requires, or the build graph moves.
kube_etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${kube_gomod}")"
[[ "${kube_etcd}" == "${ETCD_VERSION}" ]] ||
	die "k8s.io/kubernetes ${KUBE_VERSION} requires etcd ${kube_etcd}; ETCD_VERSION=${ETCD_VERSION} would move its dependencies"

work="${cache_dir}.tmp"
rm -rf "${work}" "${cache_dir}"
mkdir -p "${work}/bin"
log "building ${KUBE_VERSION} (etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION}) with ${go_version#go version } into ${cache_dir}"

# -X stamps for both version packages, so kubectl version and clients that
# parse gitVersion see the real release instead of v0.0.0-master.
version_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	version_ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1"
	version_ldflags+=" -X ${pkg}.gitMinor=${kube_minor} -X ${pkg}.gitTreeState=clean"
done

# build NAME DIR LDFLAGS PACKAGE: one binary, from the tool module in DIR, with a
# line when it starts, one a minute while it runs (the largest take minutes), and its time.
built=0
ticker=""
stop_ticker() {
	if [[ -n "${ticker}" ]]; then
		kill "${ticker}" 2>/dev/null || true
		wait "${ticker}" 2>/dev/null || true
		ticker=""
	fi
}
trap stop_ticker EXIT
build() {
	local name=$1 dir=$2 ldflags=$3 pkg=$4 t=${SECONDS}
	built=$((built + 1))
	log "building ${name} (${built}/${#binaries[@]})"
	(
		exec 3>&- 9>&-
		trap 'kill "${nap}" 2>/dev/null; exit 0' TERM
		elapsed=0
		while true; do
			sleep 60 </dev/null >/dev/null 2>&1 &
			nap=$!
			wait "${nap}"
			elapsed=$((elapsed + 60))
			log "  still building ${name}: $((elapsed / 60)) min so far"
		done
	) &
	ticker=$!
	go -C "${dir}" build -trimpath -ldflags="${ldflags}" -o "${work}/bin/${name}" "${pkg}"
	stop_ticker
	log "built ${name} in $((SECONDS - t)) s"
}

log "downloading the modules of the kubernetes tool module (go mod download)"
go -C "${tools_dir}" mod download
build etcd "${tools_dir}" "-s -w" go.etcd.io/etcd/server/v3
build kube-apiserver "${tools_dir}" "-s -w${version_ldflags}" k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager "${tools_dir}" "-s -w${version_ldflags}" k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler "${tools_dir}" "-s -w${version_ldflags}" k8s.io/kubernetes/cmd/kube-scheduler
build kubectl "${tools_dir}" "-s -w${version_ldflags}" k8s.io/kubernetes/cmd/kubectl
log "downloading the modules of the kwok tool module (go mod download)"
go -C "${kwok_dir}" mod download
build kwok "${kwok_dir}" "-s -w" sigs.k8s.io/kwok/cmd/kwok

# --- kwok stages ------------------------------------------------------------
# The kwok binary has no built-in stages; take the Stage objects that kwokctl
# uses for fast nodes and pods from the module itself, in kustomization order.
kwok_mod_dir="$(cd "${kwok_dir}" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
[[ -d "${kwok_mod_dir}" ]] || die "cannot find sigs.k8s.io/kwok in the module cache"
{
	echo "# Stage objects of sigs.k8s.io/kwok ${KWOK_VERSION}, copied by hack/cluster/build.sh from"
	echo "# kustomize/stage/{node/fast,node/heartbeat-with-lease,pod/fast} in the module."
	for stage in node/fast node/heartbeat-with-lease pod/fast; do
		kdir="${kwok_mod_dir}/kustomize/stage/${stage}"
		[[ -f "${kdir}/kustomization.yaml" ]] || die "missing ${kdir}/kustomization.yaml"
		resources="$(awk '
			/^resources:/ { inres = 1; next }
			inres && /^- / { print $2; next }
			inres && /^[^ -]/ { inres = 0 }' "${kdir}/kustomization.yaml")"
		[[ -n "${resources}" ]] || die "no resources in ${kdir}/kustomization.yaml"
		for r in ${resources}; do
			grep -q '^kind: Stage$' "${kdir}/${r}" || die "${kdir}/${r} is not a Stage"
			echo "---"
			echo "# ${stage}/${r}"
			cat "${kdir}/${r}"
		done
	done
} >"${work}/kwok-stages.yaml"

# --- check what was built ---------------------------------------------------
# The output is captured before it is matched: with pipefail, `cmd | grep -q` fails
# whenever grep exits early and cmd is killed by SIGPIPE while still writing.
v=$("${work}/bin/kube-apiserver" --version)
grep -qx "Kubernetes ${KUBE_VERSION}" <<<"${v}" || die "kube-apiserver --version: ${v}"
v=$("${work}/bin/etcd" --version)
grep -q "^etcd Version: ${ETCD_VERSION#v}$" <<<"${v}" || die "etcd --version: ${v}"
v=$("${work}/bin/kwok" --version)
grep -q "${KWOK_VERSION#v}" <<<"${v}" || die "kwok --version: ${v}"

touch "${work}/.complete"
mv "${work}" "${cache_dir}"
log "done in $((SECONDS - start)) s: $(du -sh "${bin_dir}" | cut -f1) in ${bin_dir}"
echo "${bin_dir}" >&3
