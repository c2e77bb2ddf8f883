package admission_test

import (
	"testing"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// mirror is a mux fed as informers would, and the guards' index over it.
type mirror struct {
	*watchmux.Mux
	*whatif.Index
}

// muxOf returns a mux of RoleBindings fed with steps, synced unless told
// otherwise, and its index.
func muxOf(t *testing.T, synced bool, steps []tf.Step) mirror {
	t.Helper()
	m := tf.Mirror(synced, steps, "rolebindings")
	return mirror{Mux: m, Index: whatif.New(m)}
}

// with returns the hierarchy (tf.Hierarchy), then more.
func with(more ...tf.Step) []tf.Step { return append(tf.Hierarchy(), more...) }
