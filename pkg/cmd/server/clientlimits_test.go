package server_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestKubeAPIClientLimits checks the host client's rate limit flags: their
// defaults are far above client-go's 5 per second, which had every guarded
// write wait behind the others' access reviews, and nonsense is refused;
// likewise the guards' own access review limits.
func TestKubeAPIClientLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
		wantErr   string
	}{
		{name: "defaults", wantQPS: 50, wantBurst: 100},
		{name: "set", args: []string{"--kube-api-qps=20", "--kube-api-burst=40"}, wantQPS: 20, wantBurst: 40},
		{name: "zero qps", args: []string{"--kube-api-qps=0"}, wantQPS: 0, wantBurst: 100, wantErr: "--kube-api-qps must be positive"},
		{name: "zero burst", args: []string{"--kube-api-burst=0"}, wantQPS: 50, wantBurst: 0, wantErr: "--kube-api-burst must be at least 1"},
		{name: "access reviews set", args: []string{"--access-review-qps=10", "--access-review-burst=20", "--access-reviews-per-request=8"}, wantQPS: 50, wantBurst: 100},
		{name: "zero access review qps", args: []string{"--access-review-qps=0"}, wantQPS: 50, wantBurst: 100, wantErr: "--access-review-qps must be positive"},
		{name: "zero access review burst", args: []string{"--access-review-burst=0"}, wantQPS: 50, wantBurst: 100, wantErr: "--access-review-burst must be at least 1"},
		{name: "zero access reviews per request", args: []string{"--access-reviews-per-request=0"}, wantQPS: 50, wantBurst: 100, wantErr: "--access-reviews-per-request must be at least 1"},
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
			if o.KubeAPIQPS != tt.wantQPS || o.KubeAPIBurst != tt.wantBurst {
				t.Errorf("qps %v burst %d, want %v and %d", o.KubeAPIQPS, o.KubeAPIBurst, tt.wantQPS, tt.wantBurst)
			}
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil && (strings.Contains(err.Error(), "kube-api") || strings.Contains(err.Error(), "access-review")):
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestMaterializeWorkers checks --materialize-workers: 32 by default (as
// many writes in flight as a 32-worker copier), set, and nonsense refused.
func TestMaterializeWorkers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{name: "default", want: 32},
		{name: "set", args: []string{"--materialize-workers=8"}, want: 8},
		{name: "zero", args: []string{"--materialize-workers=0"}, want: 0, wantErr: "--materialize-workers must be at least 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := server.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if o.MaterializeWorkers != tt.want {
				t.Errorf("workers %d, want %d", o.MaterializeWorkers, tt.want)
			}
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil && strings.Contains(err.Error(), "materialize"):
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
