package apiserver

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// New registers them; the tests that read them may not call it first.
	registerMetrics()
	os.Exit(m.Run())
}
