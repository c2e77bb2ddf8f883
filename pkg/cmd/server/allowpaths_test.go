package server_test

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestWebhookPathsSurviveAlwaysAllowFlag checks that the webhook endpoints
// stay always allowed whatever --authorization-always-allow-paths says: an
// operator who adds /metrics must not make kube-apiserver's webhook calls
// fail authorization (failurePolicy Fail refuses every guarded write then).
func TestWebhookPathsSurviveAlwaysAllowFlag(t *testing.T) {
	t.Parallel()
	want := append([]string{authz.Path}, webhookconfig.Paths...)
	tests := []struct {
		name  string
		args  []string
		extra []string // other paths that must stay
	}{
		{name: "default"},
		{name: "operator adds /metrics", args: []string{"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"}, extra: []string{"/metrics", "/healthz"}},
		{name: "operator empties the list", args: []string{"--authorization-always-allow-paths="}},
		{name: "operator lists a webhook path already", args: []string{"--authorization-always-allow-paths=/authorize,/metrics"}, extra: []string{"/metrics"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := server.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			got := o.Recommended.Authorization.AlwaysAllowPaths
			for _, p := range append(want, tt.extra...) {
				if !slices.Contains(got, p) {
					t.Errorf("always-allowed paths %v lack %s", got, p)
				}
			}
			seen := map[string]bool{}
			for _, p := range got {
				if seen[p] {
					t.Errorf("%s listed twice in %v", p, got)
				}
				seen[p] = true
			}
		})
	}
}
