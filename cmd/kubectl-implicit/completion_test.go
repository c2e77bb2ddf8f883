package main

import (
	"strings"
	"testing"
)

// TestCompletion: cobra's __complete, which kubectl_complete-implicit
// calls, completes subcommands, kinds with the short names users type,
// the names of a namespace's view, namespaces and -o.
func TestCompletion(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	flags := serverFlags(t, srv)
	for _, tc := range []struct {
		args    []string
		want    []string
		wantNot []string
	}{
		{[]string{""}, []string{"tree", "why", "reach", "diff", "rollout", "can-i", "version"}, []string{"completion"}},
		{[]string{"rollout", ""}, []string{"status", "promote", "abort"}, nil},
		{[]string{"why", ""}, []string{"rolebindings", "rolebinding", "rb", "roles", "networkpolicies", "netpol", "np", "guardrails", "gr"},
			[]string{"explanations", "hierarchies", "previews", "namespaces", "ns"}},
		{[]string{"why", "r"}, []string{"rb", "rolebinding", "rolebindings", "role", "roles"}, []string{"netpol"}},
		{[]string{"why", "-n", "team-b", "rb", ""}, []string{"ci-bot", "org-viewers"}, nil},
		{[]string{"rollout", "status", "-n", "team-b", "rb", "c"}, []string{"ci-bot"}, []string{"org-viewers"}},
		{[]string{"tree", ""}, []string{"team-a", "team-b"}, nil},
		{[]string{"why", "rb", "x", "-n", ""}, []string{"team-a", "team-b"}, nil},
		{[]string{"why", "-o", "j"}, []string{"json", "jsonpath="}, []string{"yaml"}},
	} {
		args := append(append([]string{"__complete"}, flags...), tc.args...)
		code, out, errOut := runPlugin(t, args...)
		if code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
			continue
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(l, "\t")
			lines[name] = true
		}
		for _, w := range tc.want {
			if !lines[w] {
				t.Errorf("%v: no %q among\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.wantNot {
			if lines[w] {
				t.Errorf("%v: %q among\n%s", tc.args, w, out)
			}
		}
	}
}
