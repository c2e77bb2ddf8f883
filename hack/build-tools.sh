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

build() {
  local name=$1 version=$2 pkg=$3 expect=$4 mod=${5:-${tools_mod}}
  local target="${bin}/${name}-${version}"
  if [[ -x "${target}" ]]; then
    ln -sf "${name}-${version}" "${bin}/${name}"
    return
  fi
  # One build per tool and version at a time: a second make (another work
  # tree, a test run beside make run) waits for the first one's binary
  # instead of building it again on the same cores.
  if command -v flock >/dev/null; then
    local lock
    exec {lock}>"${bin}/.${name}-${version}.lock"
    if ! flock -n "${lock}"; then
      echo ">> waiting for another build of ${name} ${version}" >&2
      flock "${lock}"
    fi
    if [[ -x "${target}" ]]; then
      exec {lock}>&-
      ln -sf "${name}-${version}" "${bin}/${name}"
      return
    fi
  fi
  echo ">> building ${name} ${version} from the Go module proxy (first build takes about ${expect} on 2 cores; cached in ${bin})" >&2
  local start=${SECONDS}
  # Build to a temporary name first: an interrupted build never leaves a
  # half-written binary under the cached name.
  (cd "${mod}" && CGO_ENABLED=0 go build -trimpath -o "${target}.tmp.$$" "${pkg}")
  mv "${target}.tmp.$$" "${target}"
  ln -sf "${name}-${version}" "${bin}/${name}"
  [[ -z "${lock:-}" ]] || exec {lock}>&-
  echo ">> built ${name} in $((SECONDS - start))s" >&2
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(etcd kube-apiserver)
for tool in "${want[@]}"; do
  case "${tool}" in
    etcd) build etcd "${etcd_version}" ./etcd "1 minute" ;;
    kube-apiserver) build kube-apiserver "${kube_version}" k8s.io/kubernetes/cmd/kube-apiserver "8 minutes" ;;
    kube-controller-manager) build kube-controller-manager "${kube_version}" k8s.io/kubernetes/cmd/kube-controller-manager "8 minutes" ;;
    kube-scheduler) build kube-scheduler "${kube_version}" k8s.io/kubernetes/cmd/kube-scheduler "6 minutes" ;;
    # kubelet is for make e2e only (hack/e2e): a real node on containerd.
    kubelet) build kubelet "${kube_version}" k8s.io/kubernetes/cmd/kubelet "8 minutes" ;;
    helm) build helm "${helm_version}" helm.sh/helm/v4/cmd/helm "3 minutes" "${helm_mod}" ;;
    # sample-apiserver is for make bench only: the aggregated-path reference.
    sample-apiserver) build sample-apiserver "${sample_version}" k8s.io/sample-apiserver "4 minutes" "${sample_mod}" ;;
    *) echo "unknown tool ${tool}" >&2; exit 2 ;;
  esac
done
echo "${bin}"
