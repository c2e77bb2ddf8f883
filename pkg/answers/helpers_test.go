package answers_test

import (
	"testing"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/answers"
)

const (
	global     = tf.GlobalNamespace
	rbResource = "rolebindings"
)

// answersOf returns the answers of a mux of RoleBindings fed with steps,
// synced unless told otherwise.
func answersOf(t *testing.T, synced bool, steps []tf.Step) *answers.Answers {
	t.Helper()
	return answers.New(tf.Mirror(synced, steps, rbResource))
}

func putRB(namespace, name string, opts ...tf.ObjectOpt) tf.Step {
	return tf.PutSource(rbResource, tf.SourceRoleBinding(namespace, name, opts...))
}
