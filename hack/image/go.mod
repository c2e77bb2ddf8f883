// Module image builds implicit-apiserver's container image without a
// container daemon (`make image`). It is separate from the product's module so
// that the image tooling never enters the server's dependencies.
module github.com/implicit-dev/implicit-apiserver/hack/image

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
