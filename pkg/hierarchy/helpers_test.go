package hierarchy_test

import (
	"testing"

	"go.uber.org/goleak"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	hierarchy.RegisterMetrics(legacyregistry.MustRegister)
	goleak.VerifyTestMain(m)
}

const global = "implicit-global"

// policy is the default tenant policy of DESIGN.md.
func policy() merge.Policy {
	return merge.Policy{
		GlobalNamespace: global,
		Excluded:        map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true},
	}
}

// Namespace builders, shared with the other packages' tests.
var (
	parent    = testfixture.Parent
	namespace = testfixture.Namespace
	parentUID = testfixture.ParentUID
)
