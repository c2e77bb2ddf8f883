#!/usr/bin/env bash
# build-tools.sh builds the local control plane from the Go module proxy and
# prints the directory that holds the binaries.
#
# The binaries are cached outside the checkout, keyed by version, so a fresh
# clone (CI's, or a second work tree) reuses them:
#   ${IMPLICIT_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/implicit-apiserver/tools}/<name>-<version>
#
# Usage: hack/build-tools.sh [etcd] [kube-apiserver] [kube-controller-manager]
#        [kube-scheduler] [kubelet] [helm] [sample-apiserver]
# (default: etcd and kube-apiserver). Progress goes to stderr; the bin
# directory is the only line on stdout. helm is pinned by a module of its own,
# hack/helm, so that its dependencies never meet k8s.io/kubernetes'; so is
# sample-apiserver (hack/sample-apiserver), make bench's reference aggregated
# server.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools_mod="${here}/tools"
kube_version=$(cd "${tools_mod}" && go list -m -f "{{.Version}}" k8s.io/kubernetes)
etcd_version=$(cd "${tools_mod}" && go list -m -f "{{.Version}}" go.etcd.io/etcd/server/v3)
helm_mod="${here}/helm"
helm_version=$(cd "${helm_mod}" && go list -m -f "{{.Version}}" helm.sh/helm/v4)
sample_mod="${here}/sample-apiserver"
sample_version=$(cd "${sample_mod}" && go list -m -f "{{.Version}}" k8s.io/sample-apiserver)
cache="${IMPLICIT_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/implicit-apiserver/tools}"
bin="${cache}/bin"
mkdir -p "${bin}"

# progress runs a command, saying on stderr what it does and why every 20 s
# while it runs (hack/progress): a first build is never silent for minutes.
progress() {
  (cd "${here}/.." && go run ./hack/progress "$@") >&2
}

build() {
  local name=$1 version=$2 pkg=$3 expect=$4 why=$5 mod=${6:-${tools_mod}}
  local target="${bin}/${name}-${version}"
  if [[ -x "${target}" ]]; then
    ln -sf "${name}-${version}" "${bin}/${name}"
    return
  fi
  # One build per tool and version at a time: a second make (another work
  # tree, a test run beside make run) waits for the first one's binary
  # instead of building it again on the same cores.
  if command -v flock >/dev/null; then
    local lock lockfile="${bin}/.${name}-${version}.lock"
    exec {lock}>"${lockfile}"
    if ! flock -n "${lock}"; then
      # Wait (saying so) until the other build releases the lock, then
      # take it: hack/progress runs its command without this shell's
      # descriptors, so the command waits on the file, not on ${lock}.
      progress --what="waiting for another build of ${name} ${version} (another make, or a test run)" \
        --why="${why}" --expect="${expect} on 2 cores" -- flock "${lockfile}" true
      flock "${lock}"
    fi
    if [[ -x "${target}" ]]; then
      exec {lock}>&-
      ln -sf "${name}-${version}" "${bin}/${name}"
      return
    fi
  fi
  # Build to a temporary name first: an interrupted build never leaves a
  # half-written binary under the cached name.
  progress --what="building ${name} ${version} from the Go module proxy into ${bin}" --why="${why}" \
    --expect="${expect} on 2 cores" -- env CGO_ENABLED=0 go -C "${mod}" build -trimpath -o "${target}.tmp.$$" "${pkg}"
  mv "${target}.tmp.$$" "${target}"
  ln -sf "${name}-${version}" "${bin}/${name}"
  [[ -z "${lock:-}" ]] || exec {lock}>&-
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(etcd kube-apiserver)
for tool in "${want[@]}"; do
  case "${tool}" in
    etcd) build etcd "${etcd_version}" ./etcd "about 1 minute" "the local control plane's store (make run, integration tests)" ;;
    kube-apiserver) build kube-apiserver "${kube_version}" k8s.io/kubernetes/cmd/kube-apiserver "about 8 minutes" \
      "the local control plane, with the aggregation layer that serves implicit.dev (make run, integration tests)" ;;
    kube-controller-manager) build kube-controller-manager "${kube_version}" k8s.io/kubernetes/cmd/kube-controller-manager "about 8 minutes" \
      "the local control plane's namespace deletion, garbage collection and role aggregation (make run, integration tests)" ;;
    kube-scheduler) build kube-scheduler "${kube_version}" k8s.io/kubernetes/cmd/kube-scheduler "about 6 minutes" "make e2e's node" ;;
    # kubelet is for make e2e only (hack/e2e): a real node on containerd.
    kubelet) build kubelet "${kube_version}" k8s.io/kubernetes/cmd/kubelet "about 8 minutes" "make e2e's node" ;;
    helm) build helm "${helm_version}" helm.sh/helm/v4/cmd/helm "about 3 minutes" "the chart's tests (test/chart) and make release" "${helm_mod}" ;;
    # sample-apiserver is for make bench only: the aggregated-path reference.
    sample-apiserver) build sample-apiserver "${sample_version}" k8s.io/sample-apiserver "about 4 minutes" "make bench's aggregated-path reference" "${sample_mod}" ;;
    *) echo "unknown tool ${tool}" >&2; exit 2 ;;
  esac
done
echo "${bin}"
