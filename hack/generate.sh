#!/usr/bin/env bash
# Generates the deep copies, OpenAPI definitions and OpenAPI model names of
# pkg/apis/implicit/v1alpha1 with deepcopy-gen (k8s.io/code-generator) and
# openapi-gen (k8s.io/kube-openapi), at the versions hack/tools/go.mod pins
# (those k8s.io/kubernetes pins). `make generate` runs it; `make verify`
# runs it and fails (putting the committed files back) if they differ.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
bin=$root/_output/bin
pkg=github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1
dir=pkg/apis/implicit/v1alpha1

mkdir -p "$bin"
"$GO" -C "$root/hack/tools" build -o "$bin/deepcopy-gen" k8s.io/code-generator/cmd/deepcopy-gen
"$GO" -C "$root/hack/tools" build -o "$bin/openapi-gen" k8s.io/kube-openapi/cmd/openapi-gen

cd "$root"
header=$root/hack/boilerplate.go.txt
"$bin/deepcopy-gen" --go-header-file "$header" --output-file zz_generated.deepcopy.go "./$dir"
"$bin/openapi-gen" --go-header-file "$header" --output-dir "$root/$dir" --output-pkg "$pkg" \
	--output-file zz_generated.openapi.go --output-model-name-file zz_generated.model_name.go \
	--report-filename "$root/hack/api-rule-violations.list" \
	--readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 --readonly-pkg k8s.io/apimachinery/pkg/runtime \
	"./$dir" k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime
