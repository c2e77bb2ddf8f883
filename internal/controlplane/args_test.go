package controlplane

import (
	"slices"
	"testing"
)

func TestMergeFlags(t *testing.T) {
	t.Parallel()
	defaults := []string{"--secure-port=1", "--authorization-mode=Node,RBAC", "--v=0"}
	tests := []struct {
		name      string
		overrides []string
		want      []string
	}{
		{
			name: "no overrides",
			want: defaults,
		},
		{
			name:      "new flag is appended",
			overrides: []string{"--feature-gates=A=true"},
			want:      []string{"--secure-port=1", "--authorization-mode=Node,RBAC", "--v=0", "--feature-gates=A=true"},
		},
		{
			name:      "same name replaces the default",
			overrides: []string{"--v=4"},
			want:      []string{"--secure-port=1", "--authorization-mode=Node,RBAC", "--v=4"},
		},
		{
			name:      "authorization-config supersedes authorization-mode",
			overrides: []string{"--authorization-config=/tmp/authz.yaml"},
			want:      []string{"--secure-port=1", "--v=0", "--authorization-config=/tmp/authz.yaml"},
		},
		{
			name:      "single dash and boolean flags",
			overrides: []string{"-v=2", "--profiling"},
			want:      []string{"--secure-port=1", "--authorization-mode=Node,RBAC", "-v=2", "--profiling"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mergeFlags(defaults, tt.overrides)
			if !slices.Equal(got, tt.want) {
				t.Errorf("mergeFlags(%q, %q) = %q, want %q", defaults, tt.overrides, got, tt.want)
			}
		})
	}
}
