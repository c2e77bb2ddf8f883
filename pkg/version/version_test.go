package version_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

func TestString(t *testing.T) {
	if got, want := version.String(), "implicit-apiserver "+version.Version; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	want := fmt.Sprintf(`# HELP implicit_build_info [ALPHA] A metric with a constant value of 1, labeled by the version implicit-apiserver was built from and the Go version that built it.
# TYPE implicit_build_info gauge
implicit_build_info{go_version=%q,version=%q} 1
`, runtime.Version(), version.Version)
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "implicit_build_info"); err != nil {
		t.Error(err)
	}
}
