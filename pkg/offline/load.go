package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// File is one manifest file as read: its path, relative to the directory
// or tree it was read from, and its bytes.
type File struct {
	Path string
	Data []byte
}

// Object is one document of a manifest file.
type Object struct {
	*unstructured.Unstructured
	// From is "path#index": the file and the document's 0-based position
	// in it (items of a List count as documents of their own).
	From string
}

// manifest reports whether a file's name says it holds manifests.
func manifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// notBuilt reports whether a file is a build input the loader never builds
// (a kustomization, a Helm chart's): the tool reads built output only.
func notBuilt(name string) bool {
	switch filepath.Base(name) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization", "Chart.yaml", "values.yaml":
		return true
	}
	return false
}

// ReadDir reads the manifest files under dir, recursively, in lexical
// order, skipping hidden directories (.git) and build inputs (kustomization
// and Helm chart files: pass kustomize's or helm template's output
// instead). A symbolic link is followed only when it stays inside dir;
// one that leaves it is an error: the files are pull-request content.
func ReadDir(dir string) ([]File, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err = filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	var out []File
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !manifest(d.Name()) || notBuilt(d.Name()) {
			return nil
		}
		target := path
		if d.Type()&fs.ModeSymlink != 0 {
			target, err = filepath.EvalSymlinks(path)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if inside, _ := filepath.Rel(root, target); inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) || filepath.IsAbs(inside) {
				return fmt.Errorf("%s: a symbolic link to %s, outside %s: refused", rel, target, dir)
			}
		}
		data, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		out = append(out, File{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Decode splits files into objects: multi-document YAML or JSON, a List's
// items in its place. A document without apiVersion or kind is an error
// naming it; empty documents are skipped.
func Decode(files []File) ([]Object, error) {
	var out []Object
	var errs []error
	for _, f := range files {
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(f.Data), 4096)
		for i := 0; ; i++ {
			var raw json.RawMessage
			err := d.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: document %d: %w", f.Path, i, err))
				break
			}
			if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("{}")) {
				continue
			}
			from := fmt.Sprintf("%s#%d", f.Path, i)
			// unstructured's decoding keeps integers int64, as the API
			// server's does.
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", from, err))
				continue
			}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				errs = append(errs, fmt.Errorf("%s: apiVersion and kind are required", from))
				continue
			}
			if u.IsList() {
				err := u.EachListItem(func(o runtime.Object) error {
					item, ok := o.(*unstructured.Unstructured)
					if !ok || item.GetAPIVersion() == "" || item.GetKind() == "" {
						return fmt.Errorf("%s: a List item without apiVersion or kind", from)
					}
					out = append(out, Object{Unstructured: item, From: from})
					return nil
				})
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
			out = append(out, Object{Unstructured: u, From: from})
		}
	}
	return out, errors.Join(errs...)
}
