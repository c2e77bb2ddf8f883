package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestExceptionWarningWindow: a week by default; a window that is not
// positive is refused, naming the flag.
func TestExceptionWarningWindow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr string
	}{
		{name: "default", want: 168 * time.Hour},
		{name: "set", args: []string{"--exception-warning-window=72h"}, want: 72 * time.Hour},
		{name: "zero", args: []string{"--exception-warning-window=0s"}, wantErr: "--exception-warning-window 0s: must be positive"},
		{name: "negative", args: []string{"--exception-warning-window=-1h"}, wantErr: "--exception-warning-window -1h0m0s: must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := server.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Validate: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if o.ExceptionWarningWindow != tt.want {
				t.Errorf("window %s, want %s", o.ExceptionWarningWindow, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "exception-warning-window") {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}
