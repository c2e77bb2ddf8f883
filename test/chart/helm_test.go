package chart_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// helmEnv names the helm binary; else $IMPLICIT_TOOLS_BIN/helm (`make
	// integration` builds it there), else hack/build-tools.sh helm builds it.
	helmEnv     = "IMPLICIT_HELM"
	toolsBinEnv = "IMPLICIT_TOOLS_BIN"
	namespace   = "implicit-system"
)

var (
	repoRoot = func() string {
		_, file, _, _ := runtime.Caller(0)
		return filepath.Join(filepath.Dir(file), "..", "..")
	}()
	chartDir = filepath.Join(repoRoot, "charts", "implicit-apiserver")

	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns the helm binary, building it once if need be.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv(helmEnv); p != "" {
			helmPath = p
			return
		}
		if dir := os.Getenv(toolsBinEnv); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "helm")); err == nil {
				helmPath = filepath.Join(dir, "helm")
				return
			}
		}
		cmd := exec.Command(filepath.Join(repoRoot, "hack", "build-tools.sh"), "helm")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/build-tools.sh helm: %w", err)
			return
		}
		helmPath = filepath.Join(strings.TrimSpace(string(out)), "helm")
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs helm with args and returns its stdout, or its stderr as the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No cluster: lookup answers empty, as in `helm template`.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "HELM_CACHE_HOME="+t.TempDir(),
		"HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendered is the output of helm template, object by object.
type rendered []*unstructured.Unstructured

// testImage is the image.repository the tests render with: the chart has
// no default (the image is published nowhere).
const testImage = "image.repository=registry.example.com/implicit-apiserver"

// template renders the chart in namespace with the --set values given (after
// testImage, which they may override).
func template(t *testing.T, ns string, set ...string) (rendered, error) {
	t.Helper()
	args := []string{"template", "implicit-apiserver", chartDir, "--namespace", ns, "--set", testImage}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		return nil, err
	}
	return parse(t, out), nil
}

// mustTemplate renders the chart in implicit-system and fails the test on error.
func mustTemplate(t *testing.T, set ...string) rendered {
	t.Helper()
	objs, err := template(t, namespace, set...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func parse(t *testing.T, manifests string) rendered {
	t.Helper()
	var objs rendered
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("parsing the rendered manifests: %v", err)
		}
		if m == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// get returns the object of kind and name, or nil.
func (r rendered) get(kind, name string) *unstructured.Unstructured {
	for _, o := range r {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ofKind returns the objects of kind.
func (r rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// container returns the implicit-apiserver container of the one Deployment.
func (r rendered) container(t *testing.T) map[string]any {
	t.Helper()
	ds := r.ofKind("Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	cs, _, _ := unstructured.NestedSlice(ds[0].Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "implicit-apiserver" {
			return m
		}
	}
	t.Fatal("no container implicit-apiserver in the Deployment")
	return nil
}

// args returns the container's arguments.
func (r rendered) args(t *testing.T) []string {
	t.Helper()
	args, _, err := unstructured.NestedStringSlice(r.container(t), "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// readYAML decodes a repository file into out.
func readYAML(t *testing.T, rel string, out any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// convert decodes an unstructured object into a typed one.
func convert(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	if u == nil {
		t.Fatalf("converting to %T: object not rendered", out)
	}
	if err := apiruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
