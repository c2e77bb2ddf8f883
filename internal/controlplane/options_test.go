package controlplane

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOptionsComplete(t *testing.T) {
	t.Parallel()
	// A bin directory with kube-apiserver only: enough for a control plane
	// on an external etcd, not for one that runs its own.
	binDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, KubeAPIServerBinary), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string // "" for success
	}{
		{
			name:    "own etcd needs the etcd binary",
			opts:    Options{BinDir: binDir},
			wantErr: "etcd not found",
		},
		{
			name: "external etcd needs no etcd binary",
			opts: Options{BinDir: binDir, ExternalEtcdURL: "http://127.0.0.1:2379", EtcdPrefix: "/member-1"},
		},
		{
			name:    "external etcd is a URL",
			opts:    Options{BinDir: binDir, ExternalEtcdURL: "127.0.0.1:2379"},
			wantErr: "ExternalEtcdURL",
		},
		{
			name:    "external etcd has a host",
			opts:    Options{BinDir: binDir, ExternalEtcdURL: "http:///path"},
			wantErr: "ExternalEtcdURL",
		},
		{
			name:    "no etcd args without an etcd to pass them to",
			opts:    Options{BinDir: binDir, ExternalEtcdURL: "http://127.0.0.1:2379", EtcdArgs: []string{"--log-level=debug"}},
			wantErr: "EtcdArgs",
		},
		{
			name:    "prefix starts with a slash",
			opts:    Options{BinDir: binDir, ExternalEtcdURL: "http://127.0.0.1:2379", EtcdPrefix: "member-1"},
			wantErr: "must start with /",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			err := opts.complete()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("complete() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("complete() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestKubeAPIServerArgsEtcdPrefix(t *testing.T) {
	t.Parallel()
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		prefix string
		want   string // the --etcd-prefix flag, "" for none
	}{
		{name: "default prefix passes no flag", prefix: "", want: ""},
		{name: "prefix passes the flag", prefix: "/member-1", want: "--etcd-prefix=/member-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cp := &ControlPlane{opts: Options{EtcdPrefix: tt.prefix}, pki: p, etcdURL: "http://127.0.0.1:2379"}
			args := cp.kubeAPIServerArgs(6443)
			var got []string
			for _, a := range args {
				if flagName(a) == "etcd-prefix" {
					got = append(got, a)
				}
			}
			var want []string
			if tt.want != "" {
				want = []string{tt.want}
			}
			if !slices.Equal(got, want) {
				t.Errorf("--etcd-prefix flags = %q, want %q (all args %q)", got, want, args)
			}
			if !slices.Contains(args, "--etcd-servers=http://127.0.0.1:2379") {
				t.Errorf("args %q lack --etcd-servers", args)
			}
		})
	}
}
