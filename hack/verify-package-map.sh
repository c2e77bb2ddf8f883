#!/usr/bin/env bash
# Fails when a directory of the tree that holds Go code is not named in
# docs/design.md's package map (a row that names it in backquotes).
set -euo pipefail
cd "$(dirname "$0")/.."
map=$(sed -n '/^## Package map/,/^implicit-apiserver has no storage/p' docs/design.md)
missing=()
while read -r dir; do
	grep -qF "\`$dir\`" <<<"$map" || missing+=("$dir")
done < <(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^_output/' | xargs -n1 dirname | sort -u)
if ((${#missing[@]})); then
	echo "docs/design.md's package map does not name:" >&2
	printf '  %s\n' "${missing[@]}" >&2
	exit 1
fi
