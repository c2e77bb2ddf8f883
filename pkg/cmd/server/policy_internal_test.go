package server

import (
	"io/fs"
	"maps"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func TestOwnNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  string
		file string // "" means the file does not exist
		want string
	}{
		{name: "downward API", env: "implicit-system", file: "other", want: "implicit-system"},
		{name: "service account file", file: "implicit-system\n", want: "implicit-system"},
		{name: "blank env falls back to the file", env: "  ", file: "implicit-system", want: "implicit-system"},
		{name: "not in a pod", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string {
				if k == podNamespaceEnv {
					return tt.env
				}
				return ""
			}
			readFile := func(path string) ([]byte, error) {
				if path != serviceAccountNamespaceFile || tt.file == "" {
					return nil, fs.ErrNotExist
				}
				return []byte(tt.file), nil
			}
			if got := ownNamespace(getenv, readFile); got != tt.want {
				t.Errorf("ownNamespace() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPolicyFromFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		args         []string
		wantExcluded []string
		wantMaxDepth int
		wantErr      string
	}{
		{
			name:         "defaults and the pod namespace flag",
			args:         []string{"--pod-namespace=implicit-system"},
			wantExcluded: []string{"kube-system", "kube-public", "kube-node-lease", "implicit-system"},
			wantMaxDepth: 32,
		},
		{
			name:         "max depth and exclusions",
			args:         []string{"--pod-namespace=ops", "--max-depth=5", "--exclude-namespaces=legacy"},
			wantExcluded: []string{"legacy", "ops"},
			wantMaxDepth: 5,
		},
		{
			name:         "no limit",
			args:         []string{"--pod-namespace=ops", "--max-depth=0"},
			wantExcluded: []string{"kube-system", "kube-public", "kube-node-lease", "ops"},
			wantMaxDepth: 0,
		},
		{name: "negative max depth", args: []string{"--pod-namespace=ops", "--max-depth=-1"}, wantErr: "--max-depth"},
		{name: "bad pod namespace", args: []string{"--pod-namespace=Not_A_Namespace"}, wantErr: "--pod-namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := NewOptions()
			fss := o.Flags()
			if err := fss.FlagSet("implicit").Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error about %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			p := o.policy()
			want := map[string]bool{}
			for _, ns := range tt.wantExcluded {
				want[ns] = true
			}
			if !maps.Equal(p.Excluded, want) {
				t.Errorf("Excluded = %v, want %v", p.Excluded, want)
			}
			if p.MaxDepth != tt.wantMaxDepth {
				t.Errorf("MaxDepth = %d, want %d", p.MaxDepth, tt.wantMaxDepth)
			}
			// The server's own namespace is no tenant, whatever its labels.
			own := &merge.Namespace{Name: o.PodNamespace, Labels: map[string]string{v1alpha1.LabelInherit: "true"}}
			if p.IsTenant(own) {
				t.Errorf("own namespace %s labelled inherit: \"true\" is a tenant", o.PodNamespace)
			}
		})
	}
}

// TestCompleteKeepsFlag checks that --pod-namespace wins over the pod's own.
func TestCompleteKeepsFlag(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	o.PodNamespace = "from-flag"
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.PodNamespace != "from-flag" {
		t.Errorf("PodNamespace = %q after Complete, want the flag's from-flag", o.PodNamespace)
	}
}
