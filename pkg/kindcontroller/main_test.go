package kindcontroller

import (
	"os"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	RegisterMetrics(legacyregistry.MustRegister)
	os.Exit(m.Run())
}
