package server_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

// TestVersionFlag: --version prints the version and exits before any other
// flag is validated or the host cluster is reached.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "alone", args: []string{"--version"}},
		{name: "with flags that would not validate", args: []string{"--version", "--global-namespace=Not_A_Label", "--history-bytes=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := server.NewCommand(ctx)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("Execute(%q): %v (output %q)", tc.args, err, out.String())
			}
			if got, want := out.String(), "implicit-apiserver "+version.Version+"\n"; got != want {
				t.Errorf("output = %q, want %q", got, want)
			}
		})
	}
}
