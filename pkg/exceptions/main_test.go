package exceptions_test

import (
	"testing"

	"go.uber.org/goleak"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// writer's watcher and worker stop with their context.
func TestMain(m *testing.M) {
	exceptions.RegisterMetrics(legacyregistry.MustRegister)
	goleak.VerifyTestMain(m)
}
