package whatif_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// global is the global namespace of tf.Policy.
const global = tf.GlobalNamespace

// The view resources of the Index tests (index_test.go,
// index_assumed_test.go), which feed a real watchmux.Mux.
const (
	rbResource   = "rolebindings"
	roleResource = "roles"
)

// mirror is a mux fed as informers would, and the what-if index over it.
type mirror struct {
	*watchmux.Mux
	*whatif.Index
}

// ParentCycle is ParentCycleAssuming with nothing assumed.
func (m mirror) ParentCycle(namespace, parent string) []string {
	return m.ParentCycleAssuming(namespace, parent, nil)
}

// muxOf returns a mux of resources (RoleBindings when none are given) fed
// with steps, synced unless told otherwise, and its index.
func muxOf(t *testing.T, synced bool, steps []tf.Step, resources ...string) mirror {
	t.Helper()
	if len(resources) == 0 {
		resources = []string{rbResource}
	}
	m := tf.Mirror(synced, steps, resources...)
	return mirror{Mux: m, Index: whatif.New(m)}
}

// with returns the hierarchy (tf.Hierarchy), then more.
func with(more ...tf.Step) []tf.Step { return append(tf.Hierarchy(), more...) }

func put(resource string, obj runtime.Object) tf.Step { return tf.PutSource(resource, obj) }
func del(resource string, obj runtime.Object) tf.Step { return tf.DeleteSource(resource, obj) }
func putRB(namespace, name string, opts ...tf.ObjectOpt) tf.Step {
	return put(rbResource, tf.SourceRoleBinding(namespace, name, opts...))
}
func delRB(namespace, name string) tf.Step {
	return del(rbResource, tf.SourceRoleBinding(namespace, name))
}
