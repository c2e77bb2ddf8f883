package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestDryRunOutputWithoutManagedFields: what a client dry run prints (the
// object to write, read from the server with its managedFields) leaves
// them out, as kubectl's printers do.
func TestDryRunOutputWithoutManagedFields(t *testing.T) {
	t.Parallel()
	obj := binding("org-viewers", "uid", "7", nil, "view", "org:viewers")
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate}})
	for _, format := range []string{"yaml", "json"} {
		var out bytes.Buffer
		if err := printObject(&out, format, obj.Object); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "managedFields") || !strings.Contains(out.String(), "org-viewers") {
			t.Errorf("-o %s:\n%s", format, out.String())
		}
	}
}
