package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations on the index entry that name the image when the archive is
// loaded: the OCI ref name (podman load, skopeo) and containerd's image name
// (ctr images import), which is the fully qualified form of the same name.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// writeArchive writes img as an OCI image layout (oci-layout, index.json,
// blobs/sha256/...) in a tar file at out, replacing it atomically.
func writeArchive(img v1.Image, tag, out string, created time.Time) error {
	dir, err := os.MkdirTemp("", "implicit-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationRefName:        tag,
		annotationContainerdName: qualified(tag),
	})); err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp, created); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// qualified returns tag with the registry and repository defaults a
// container runtime adds to a short name: docker.io/library/name:tag.
func qualified(tag string) string {
	first, _, hasSlash := strings.Cut(tag, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + tag
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return tag
	default:
		return "docker.io/" + tag
	}
}

// tarDir writes the files under dir into a tar at out, in lexical order,
// with fixed times and owners.
func tarDir(dir, out string, created time.Time) error {
	var names []string
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, path := range names {
		if err := addFile(tw, dir, path, created); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, dir, path string, created time.Time) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Mode: 0o644}
	if fi.IsDir() {
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	r, err := os.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(tw, r)
	return err
}
