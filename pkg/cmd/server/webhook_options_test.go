package server_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestWebhookAndHistoryFlags: the webhook caller and history flags parse
// into the options and are validated together.
func TestWebhookAndHistoryFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		check   func(*server.Options) bool
		wantErr string
	}{
		{
			name: "defaults: no CA, not anonymous, 256 MiB of history",
			check: func(o *server.Options) bool {
				return o.WebhookClientCAFile == "" && !o.AnonymousWebhooks && o.HistoryBytes == 256<<20
			},
		},
		{
			name: "CA and names",
			args: []string{"--webhook-client-ca-file=/ca.crt", "--webhook-client-names=a,b"},
			check: func(o *server.Options) bool {
				return o.WebhookClientCAFile == "/ca.crt" && strings.Join(o.WebhookClientNames, ",") == "a,b"
			},
		},
		{name: "anonymous", args: []string{"--anonymous-webhooks=true"}, check: func(o *server.Options) bool { return o.AnonymousWebhooks }},
		{name: "names without a CA", args: []string{"--webhook-client-names=a"}, wantErr: "--webhook-client-names needs --webhook-client-ca-file"},
		{name: "history bytes", args: []string{"--history-bytes=1048576"}, check: func(o *server.Options) bool { return o.HistoryBytes == 1<<20 }},
		{name: "history bytes too small", args: []string{"--history-bytes=1000"}, wantErr: "--history-bytes must be at least 1Mi"},
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
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.check != nil && !tt.check(o) {
				t.Errorf("options after %v: %+v", tt.args, o)
			}
		})
	}
}
