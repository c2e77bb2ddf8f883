package replicas

import "testing"

// TestKubectlErrorLine pins how a failed `kubectl get -w` run is told from a
// healthy one, in both forms kubectl (v1.32) prints a 410.
func TestKubectlErrorLine(t *testing.T) {
	t.Parallel()
	const header = "NAME          ROLE                AGE\norg-viewers   ClusterRole/view    5s\n"
	tests := []struct {
		name           string
		stdout, stderr string
		wantLine       string
		wantExpired    bool
	}{
		{
			name:   "healthy run",
			stdout: header + "org-viewers   ClusterRole/view    6s\n",
		},
		{
			name:   "warnings only",
			stdout: header,
			stderr: "Warning: something deprecated\n",
		},
		{
			name:        "watch request answered 410",
			stdout:      header,
			stderr:      "Error from server (Expired): resourceVersion 123 was not issued by this server instance\n",
			wantLine:    "Error from server (Expired): resourceVersion 123 was not issued by this server instance",
			wantExpired: true,
		},
		{
			name:        "410 as an ERROR event, printed as a Status row",
			stdout:      header + "STATUS    REASON    MESSAGE\nFailure   Expired   resourceVersion 123 was not issued by this server instance\n",
			wantLine:    "Failure   Expired   resourceVersion 123 was not issued by this server instance",
			wantExpired: true,
		},
		{
			name:     "another error",
			stdout:   header + "STATUS    REASON          MESSAGE\nFailure   InternalError   stream error\n",
			wantLine: "Failure   InternalError   stream error",
		},
		{
			name:     "client error",
			stderr:   "error: the server doesn't have a resource type \"rolebindings\"\n",
			wantLine: "error: the server doesn't have a resource type \"rolebindings\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			line := errorLine(tt.stdout, tt.stderr)
			if line != tt.wantLine {
				t.Fatalf("errorLine = %q, want %q", line, tt.wantLine)
			}
			if got := line != "" && isExpired(line); got != tt.wantExpired {
				t.Errorf("isExpired(%q) = %v, want %v", line, got, tt.wantExpired)
			}
		})
	}
}
