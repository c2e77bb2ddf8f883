package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestArchive builds an image from a stand-in binary, reads the archive back
// as an OCI layout, and checks what a runtime would see: the name, the user,
// the entrypoint and the files.
func TestArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "implicit-apiserver")
	ca := filepath.Join(dir, "ca.crt")
	must(t, os.WriteFile(bin, []byte("#!binary"), 0o755))
	must(t, os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	o := options{binary: bin, caBundle: ca, tag: "implicit-apiserver:v1.2.3", version: "v1.2.3", arch: "amd64",
		out: filepath.Join(dir, "out", "image.tar"), created: time.Unix(1700000000, 0).UTC()}

	digest, err := run(o)
	must(t, err)
	// The same inputs give the same digest (reproducible builds).
	again := o
	again.out = filepath.Join(dir, "again.tar")
	digest2, err := run(again)
	must(t, err)
	if digest != digest2 {
		t.Errorf("two builds of the same inputs: digests %s and %s", digest, digest2)
	}

	layoutDir := filepath.Join(dir, "layout")
	untar(t, o.out, layoutDir)
	idx, err := layout.ImageIndexFromPath(layoutDir)
	must(t, err)
	im, err := idx.IndexManifest()
	must(t, err)
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if got := desc.Annotations[annotationRefName]; got != o.tag {
		t.Errorf("%s = %q, want %q", annotationRefName, got, o.tag)
	}
	if got, want := desc.Annotations[annotationContainerdName], "docker.io/library/implicit-apiserver:v1.2.3"; got != want {
		t.Errorf("%s = %q, want %q", annotationContainerdName, got, want)
	}
	if desc.Digest.String() != digest {
		t.Errorf("index digest %s, run reported %s", desc.Digest, digest)
	}
	img, err := idx.Image(desc.Digest)
	must(t, err)
	cf, err := img.ConfigFile()
	must(t, err)
	if cf.Config.User != "65532:65532" {
		t.Errorf("User = %q, want 65532:65532", cf.Config.User)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != binaryPath {
		t.Errorf("Entrypoint = %q, want [%s]", cf.Config.Entrypoint, binaryPath)
	}
	if cf.Config.WorkingDir != "/home/nonroot" {
		t.Errorf("WorkingDir = %q, want the non-root user's home /home/nonroot", cf.Config.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != "v1.2.3" {
		t.Errorf("version label %q, want v1.2.3", got)
	}

	files := map[string]*tar.Header{}
	contents := map[string]string{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		files[strings.TrimSuffix(hdr.Name, "/")] = hdr
		b, err := io.ReadAll(tr)
		must(t, err)
		contents[strings.TrimSuffix(hdr.Name, "/")] = string(b)
	}
	for _, tc := range []struct {
		name, path string
		mode       int64
		uid        int
		contents   string
	}{
		{name: "binary", path: "usr/local/bin/implicit-apiserver", mode: 0o755, contents: "#!binary"},
		{name: "CA bundle", path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, contents: "-----BEGIN CERTIFICATE-----\n"},
		{name: "passwd", path: "etc/passwd", mode: 0o644, contents: passwd},
		{name: "group", path: "etc/group", mode: 0o644, contents: group},
		{name: "home", path: "home/nonroot", mode: 0o700, uid: nonRoot},
		{name: "tmp", path: "tmp", mode: 0o1777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, ok := files[tc.path]
			if !ok {
				t.Fatalf("%s not in the image", tc.path)
			}
			if hdr.Mode != tc.mode || hdr.Uid != tc.uid {
				t.Errorf("%s: mode %o uid %d, want %o uid %d", tc.path, hdr.Mode, hdr.Uid, tc.mode, tc.uid)
			}
			if got := contents[tc.path]; got != tc.contents {
				t.Errorf("%s contents %q, want %q", tc.path, got, tc.contents)
			}
			if !hdr.ModTime.Equal(o.created) {
				t.Errorf("%s mtime %v, want %v", tc.path, hdr.ModTime, o.created)
			}
		})
	}
}

func TestQualified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"implicit-apiserver:v1", "docker.io/library/implicit-apiserver:v1"},
		{"implicit-dev/implicit-apiserver:v1", "docker.io/implicit-dev/implicit-apiserver:v1"},
		{"ghcr.io/implicit-dev/implicit-apiserver:v1", "ghcr.io/implicit-dev/implicit-apiserver:v1"},
		{"localhost/implicit-apiserver:v1", "localhost/implicit-apiserver:v1"},
		{"registry:5000/implicit-apiserver:v1", "registry:5000/implicit-apiserver:v1"},
	} {
		if got := qualified(tc.in); got != tc.want {
			t.Errorf("qualified(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	must(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		must(t, err)
		path := filepath.Join(dir, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			must(t, os.MkdirAll(path, 0o755))
			continue
		}
		b, err := io.ReadAll(tr)
		must(t, err)
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, b, 0o644))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
