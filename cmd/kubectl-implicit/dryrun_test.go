package main

import (
	"strings"
	"testing"
)

// TestDryRunFlag: --dry-run takes kubectl's none, client and server; a bare
// --dry-run is client; anything else is refused before the server is asked.
func TestDryRunFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want dryRun
	}{
		{nil, dryRunNone},
		{[]string{"--dry-run"}, dryRunClient},
		{[]string{"--dry-run=none"}, dryRunNone},
		{[]string{"--dry-run=client"}, dryRunClient},
		{[]string{"--dry-run=server"}, dryRunServer},
	} {
		o := &options{}
		cmd := o.rolloutPromoteCommand()
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, err := parseDryRun(cmd.Flags().Lookup("dry-run").Value.String())
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	code, _, errOut := runPlugin(t, "rollout", "abort", "rb", "x", "-n", "y", "--dry-run=maybe")
	if code != exitError || !strings.Contains(errOut, `invalid --dry-run value "maybe"`) {
		t.Errorf("--dry-run=maybe: exit %d, %s", code, errOut)
	}
}
