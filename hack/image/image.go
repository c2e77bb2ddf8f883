package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is the image's entrypoint.
	binaryPath = "/usr/local/bin/implicit-apiserver"
	// nonRoot is the user and group the server runs as, the uid the
	// Deployment's runAsUser names (distroless' "nonroot").
	nonRoot = 65532
)

// passwd and group name root and the non-root user, so that tools that map
// uids to names (ps, id, a debug container) show them; the server never reads
// them.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// build returns the image: one layer on an empty base, with the config
// (user, entrypoint, labels) a scratch-style image needs.
func build(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	layerTar, err := layerContents(bin, ca, o.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("building the layer: %w", err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: "hack/image: implicit-apiserver, CA certificates, passwd",
			Comment:   "built without a base image",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = o.arch
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRoot, nonRoot),
		Entrypoint: []string{binaryPath},
		// The home of the non-root user: the one writable directory, where
		// the server writes self-signed certificates when run without
		// --tls-cert-file (podman run for a trial; a Deployment passes them).
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "implicit-apiserver",
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.source":   "https://github.com/implicit-dev/implicit-apiserver",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// entry is one file or directory of the layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	body     []byte
	dir      bool
}

// layerContents returns the layer as an uncompressed tar: parents before
// children, every header with the same time, so the digest depends on the
// contents only.
func layerContents(bin, ca []byte, created time.Time) ([]byte, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: nonRoot, gid: nonRoot, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: binaryPath[1:], mode: 0o755, body: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: created,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
