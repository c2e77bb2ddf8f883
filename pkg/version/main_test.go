package version_test

import (
	"os"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	version.RegisterMetrics(legacyregistry.MustRegister)
	os.Exit(m.Run())
}
