#!/usr/bin/env bash
# Cross-compiles kubectl-implicit for each krew platform into
# DIST/kubectl-implicit-VERSION-OS-ARCH.tar.gz (the binary, its completion
# script kubectl_complete-implicit and LICENSE), and
# renders the krew manifest hack/krew/implicit.yaml into DIST/krew/implicit.yaml
# with each archive's sha256. No signing.
#
#   hack/krew/release.sh VERSION DIST [LDFLAGS]
#   KREW_URL_BASE: where the archives will be downloaded from
#   (default: the GitHub release of VERSION).
set -euo pipefail

version=$1
dist=$2
ldflags=${3:-}
go=${GO:-go}
platforms=${KREW_PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"}
url_base=${KREW_URL_BASE:-https://github.com/implicit-dev/implicit-apiserver/releases/download/${version}}
root=$(cd "$(dirname "$0")/../.." && pwd)

if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
	echo "release.sh: krew needs a semver version (vX.Y.Z), got $version: the manifest is rendered, but krew will refuse it" >&2
fi
mkdir -p "$dist/krew"
dist=$(cd "$dist" && pwd)
manifest=$(sed -e '/^#/d' -e "s|@VERSION@|${version}|g" -e "s|@URL_BASE@|${url_base}|g" "$root/hack/krew/implicit.yaml")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for platform in $platforms; do
	os=${platform%/*}
	arch=${platform#*/}
	name="kubectl-implicit-${version}-${os}-${arch}"
	mkdir -p "$work/$name"
	(cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -trimpath -ldflags "-s -w $ldflags" \
		-o "$work/$name/kubectl-implicit" ./cmd/kubectl-implicit)
	cp "$root/LICENSE" "$work/$name/"
	cp "$root/hack/krew/kubectl_complete-implicit" "$work/$name/"
	chmod 0755 "$work/$name/kubectl_complete-implicit"
	# Reproducible archives: fixed order, owner and times.
	tar -C "$work/$name" --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' \
		-cf - kubectl-implicit kubectl_complete-implicit LICENSE | gzip -n > "$dist/$name.tar.gz"
	sum=$(sha256sum "$dist/$name.tar.gz" | cut -d' ' -f1)
	manifest=${manifest//@SHA256_${os}_${arch}@/$sum}
	echo "$name.tar.gz $sum"
done
printf '%s\n' "$manifest" > "$dist/krew/implicit.yaml"
if grep -q '@SHA256_' "$dist/krew/implicit.yaml"; then
	echo "release.sh: KREW_PLATFORMS left platforms of the manifest without an archive" >&2
fi
