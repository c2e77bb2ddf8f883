// Command image builds implicit-apiserver's container image without a
// container daemon and writes it as an OCI image layout in one tar file
// (an "oci-archive", which podman load, skopeo and containerd's ctr import
// read):
//
//	go run . --binary _output/image/linux-amd64/implicit-apiserver \
//	    --tag implicit-apiserver:v0.1.0 --out _output/image/implicit-apiserver.tar
//
// No base image is pulled. The image has one layer, built here:
//
//	/usr/local/bin/implicit-apiserver   the static binary (CGO_ENABLED=0)
//	/etc/ssl/certs/ca-certificates.crt  the CA bundle, from the build host
//	                                    (Debian's ca-certificates package)
//	/etc/passwd, /etc/group             root and the non-root user nonroot (65532)
//	/home/nonroot, /tmp                 a home and scratch space
//
// and runs as 65532:65532. Every timestamp is --created (SOURCE_DATE_EPOCH in
// `make image`), so the same inputs give the same image digest.
//
// It is a module of its own (go-containerregistry stays out of the product's
// go.mod) and imports nothing of this module: it packages the binary make
// build wrote.
package main
