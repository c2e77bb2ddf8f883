package server_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

func TestNewOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := server.NewOptions()
	if o.GlobalNamespace != "implicit-global" {
		t.Errorf("GlobalNamespace = %q, want implicit-global", o.GlobalNamespace)
	}
	if want := []string{"kube-system", "kube-public", "kube-node-lease"}; !slices.Equal(o.ExcludeNamespaces, want) {
		t.Errorf("ExcludeNamespaces = %v, want %v", o.ExcludeNamespaces, want)
	}
	if o.ConfigFile != "" {
		t.Errorf("ConfigFile = %q, want none", o.ConfigFile)
	}
	if o.HostSchemaTimeout <= 0 {
		t.Errorf("HostSchemaTimeout = %v, want positive", o.HostSchemaTimeout)
	}
	if o.Fleet.MemberName != "" || o.Fleet.ReportInterval != 30*time.Second || o.Fleet.ReportKubeconfig != "" {
		t.Errorf("Fleet = %+v, want no member, reports every 30s", o.Fleet)
	}
	if o.Recommended.Etcd != nil || o.Recommended.Admission != nil {
		t.Errorf("etcd and admission options are set: views have neither")
	}
	if err := o.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(o *server.Options)
		// wantErrs are substrings of the error, one per expected problem.
		wantErrs []string
	}{
		{name: "defaults", modify: func(*server.Options) {}},
		{
			name:     "bad global namespace",
			modify:   func(o *server.Options) { o.GlobalNamespace = "Implicit_Global" },
			wantErrs: []string{`--global-namespace "Implicit_Global"`},
		},
		{
			name:     "empty global namespace",
			modify:   func(o *server.Options) { o.GlobalNamespace = "" },
			wantErrs: []string{`--global-namespace ""`},
		},
		{
			name:     "bad excluded namespace",
			modify:   func(o *server.Options) { o.ExcludeNamespaces = []string{"kube-system", "not.a.label"} },
			wantErrs: []string{`--exclude-namespaces "not.a.label"`},
		},
		{
			name:     "global namespace excluded",
			modify:   func(o *server.Options) { o.ExcludeNamespaces = []string{"kube-system", "implicit-global"} },
			wantErrs: []string{`--exclude-namespaces lists the global namespace "implicit-global"`},
		},
		{
			name:     "negative shutdown delay",
			modify:   func(o *server.Options) { o.ShutdownDelay = -time.Second },
			wantErrs: []string{"--shutdown-delay-duration -1s: must not be negative"},
		},
		{
			name:     "zero host schema timeout",
			modify:   func(o *server.Options) { o.HostSchemaTimeout = 0 },
			wantErrs: []string{"--host-schema-timeout must be positive"},
		},
		{
			name:     "hub kubeconfig without a cluster name",
			modify:   func(o *server.Options) { o.GlobalKubeconfig = "/hub.kubeconfig" },
			wantErrs: []string{"--global-cluster-name is required with --global-kubeconfig"},
		},
		{
			name:     "cluster name without a hub kubeconfig",
			modify:   func(o *server.Options) { o.GlobalClusterName = "hub" },
			wantErrs: []string{"--global-cluster-name needs --global-kubeconfig"},
		},
		{
			name:     "bad cluster name",
			modify:   func(o *server.Options) { o.GlobalKubeconfig, o.GlobalClusterName = "/hub.kubeconfig", "Hub Cluster" },
			wantErrs: []string{`--global-cluster-name "Hub Cluster"`},
		},
		{
			name: "a hub reading another hub",
			modify: func(o *server.Options) {
				o.FleetHub, o.GlobalKubeconfig, o.GlobalClusterName = true, "/hub.kubeconfig", "hub"
			},
			wantErrs: []string{"--fleet-hub is a hub's"},
		},
		{
			name:   "a fleet's hub",
			modify: func(o *server.Options) { o.FleetHub = true },
		},
		{
			name:   "hub kubeconfig and cluster name",
			modify: func(o *server.Options) { o.GlobalKubeconfig, o.GlobalClusterName = "/hub.kubeconfig", "hub-eu-1" },
		},
		{
			name: "fleet member",
			modify: func(o *server.Options) {
				o.GlobalKubeconfig, o.GlobalClusterName = "/hub.kubeconfig", "hub"
				o.Fleet.MemberName, o.Fleet.ReportKubeconfig, o.Fleet.ReportInterval = "member-1.eu", "/reports.kubeconfig", time.Second
			},
		},
		{
			name:     "fleet member without a hub",
			modify:   func(o *server.Options) { o.Fleet.MemberName = "member-1" },
			wantErrs: []string{"--fleet-member-name needs --global-kubeconfig"},
		},
		{
			name: "bad fleet member name, report kubeconfig without a member, short interval",
			modify: func(o *server.Options) {
				o.GlobalKubeconfig, o.GlobalClusterName = "/hub.kubeconfig", "hub"
				o.Fleet.MemberName = "Member_1"
				o.Fleet.ReportInterval = 500 * time.Millisecond
			},
			wantErrs: []string{`--fleet-member-name "Member_1"`, "--fleet-report-interval 500ms: must be at least 1s"},
		},
		{
			name:     "report kubeconfig without a member",
			modify:   func(o *server.Options) { o.Fleet.ReportKubeconfig = "/reports.kubeconfig" },
			wantErrs: []string{"--fleet-report-kubeconfig needs --fleet-member-name"},
		},
		{
			name:     "negative host schema timeout",
			modify:   func(o *server.Options) { o.HostSchemaTimeout = -time.Second },
			wantErrs: []string{"--host-schema-timeout must be positive"},
		},
		{
			name: "every problem at once",
			modify: func(o *server.Options) {
				o.GlobalNamespace = "Global"
				o.ExcludeNamespaces = []string{"kube_system", "Global"}
				o.HostSchemaTimeout = 0
			},
			wantErrs: []string{
				`--global-namespace "Global"`,
				`--exclude-namespaces "kube_system"`,
				`--exclude-namespaces "Global"`,
				`--exclude-namespaces lists the global namespace "Global"`,
				"--host-schema-timeout must be positive",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := server.NewOptions()
			tc.modify(o)
			err := o.Validate()
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var agg utilerrors.Aggregate
			if !errors.As(err, &agg) {
				t.Fatalf("Validate = %v, want an aggregate", err)
			}
			if len(agg.Errors()) != len(tc.wantErrs) {
				t.Errorf("%d errors, want %d: %v", len(agg.Errors()), len(tc.wantErrs), agg.Errors())
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestCommandFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		wantGlobal  string
		wantExclude []string
		wantConfig  string
	}{
		{
			name:        "defaults",
			wantGlobal:  "implicit-global",
			wantExclude: []string{"kube-system", "kube-public", "kube-node-lease"},
		},
		{
			name:        "every implicit flag",
			args:        []string{"--global-namespace=org", "--exclude-namespaces=kube-system,infra", "--config", "/etc/implicit/config.yaml"},
			wantGlobal:  "org",
			wantExclude: []string{"kube-system", "infra"},
			wantConfig:  "/etc/implicit/config.yaml",
		},
		{
			name:        "repeated --exclude-namespaces accumulate",
			args:        []string{"--exclude-namespaces=a", "--exclude-namespaces=b,c"},
			wantGlobal:  "implicit-global",
			wantExclude: []string{"a", "b", "c"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := server.NewCommand(context.Background()).Flags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%v): %v", tc.args, err)
			}
			if got, err := fs.GetString("global-namespace"); err != nil || got != tc.wantGlobal {
				t.Errorf("--global-namespace = %q (%v), want %q", got, err, tc.wantGlobal)
			}
			if got, err := fs.GetStringSlice("exclude-namespaces"); err != nil || !slices.Equal(got, tc.wantExclude) {
				t.Errorf("--exclude-namespaces = %v (%v), want %v", got, err, tc.wantExclude)
			}
			if got, err := fs.GetString("config"); err != nil || got != tc.wantConfig {
				t.Errorf("--config = %q (%v), want %q", got, err, tc.wantConfig)
			}
		})
	}
}

func TestCommandRejectsUnknownFlag(t *testing.T) {
	t.Parallel()
	fs := server.NewCommand(context.Background()).Flags()
	if err := fs.Parse([]string{"--global-namespaces=org"}); err == nil {
		t.Errorf("Parse accepted an unknown flag")
	}
}

// TestOptionsAddFlags checks the flags write into the options.
func TestOptionsAddFlags(t *testing.T) {
	t.Parallel()
	o := server.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	args := []string{"--global-namespace=org", "--exclude-namespaces=infra", "--config=/c.yaml", "--host-schema-timeout=5s"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if o.GlobalNamespace != "org" || !slices.Equal(o.ExcludeNamespaces, []string{"infra"}) || o.ConfigFile != "/c.yaml" || o.HostSchemaTimeout != 5*time.Second {
		t.Errorf("options = global %q excluded %v config %q timeout %v, want the flags' values",
			o.GlobalNamespace, o.ExcludeNamespaces, o.ConfigFile, o.HostSchemaTimeout)
	}
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	cmd := server.NewCommand(context.Background())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	start, end := strings.Index(help, "Implicit flags:"), strings.Index(help, "Secure serving flags:")
	if start < 0 || end < start {
		t.Fatalf("--help has no implicit section before the secure serving one:\n%s", help)
	}
	section := help[start:end]
	for _, flag := range []string{"--global-namespace", "--exclude-namespaces", "--config", "--host-schema-timeout"} {
		if !strings.Contains(section, flag) {
			t.Errorf("the implicit section does not list %s:\n%s", flag, section)
		}
	}
	if strings.Contains(section, "--secure-port") {
		t.Errorf("the implicit section lists a generic flag:\n%s", section)
	}
}

func TestOptionsComplete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// config is the --config file's content; none when empty.
		config  string
		wantErr string
	}{
		{name: "no configuration file"},
		{name: "a valid configuration file", config: header + defaultResources},
		{name: "an invalid configuration file", config: header + "resources: []\n", wantErr: "resources: at least one is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := server.NewOptions()
			if tc.config != "" {
				o.ConfigFile = writeConfig(t, tc.config)
			}
			err := o.Complete()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), o.ConfigFile) {
				t.Errorf("Complete = %v, want an error naming %s and containing %q", err, o.ConfigFile, tc.wantErr)
			}
		})
	}
}

// TestHTTP2StreamsPerConnection: the aggregator's watches are spread over
// connections of DefaultHTTP2MaxStreamsPerConnection streams unless the flag
// says otherwise (see NewOptions for why not k8s.io/apiserver's 100).
// TestShutdownDelayFlag: --shutdown-delay-duration sets ShutdownDelay
// (which Config passes to the generic server); none by default.
func TestShutdownDelayFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{want: 0},
		{args: []string{"--shutdown-delay-duration=5s"}, want: 5 * time.Second},
	} {
		o := server.NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("Parse(%v): %v", tc.args, err)
		}
		if o.ShutdownDelay != tc.want {
			t.Errorf("%v: ShutdownDelay %s, want %s", tc.args, o.ShutdownDelay, tc.want)
		}
	}
}

func TestHTTP2StreamsPerConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{name: "default", want: server.DefaultHTTP2MaxStreamsPerConnection},
		{name: "flag", args: []string{"--http2-max-streams-per-connection=100"}, want: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := server.NewCommand(context.Background()).Flags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%v): %v", tc.args, err)
			}
			if got, err := fs.GetInt("http2-max-streams-per-connection"); err != nil || got != tc.want {
				t.Errorf("--http2-max-streams-per-connection = %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}

// TestHTTP2WriteSchedulerFlag: the secure port is served by pkg/h2serve
// with the random write scheduler unless --http2-write-scheduler=k8s asks
// for k8s.io/apiserver's own serving; anything else does not validate.
func TestHTTP2WriteSchedulerFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{want: "random"},
		{args: []string{"--http2-write-scheduler=k8s"}, want: "k8s"},
		{args: []string{"--http2-write-scheduler=fifo"}, want: "fifo", wantErr: `--http2-write-scheduler "fifo": must be "random" or "k8s"`},
	} {
		o := server.NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("Parse(%v): %v", tc.args, err)
		}
		if o.HTTP2WriteScheduler != tc.want {
			t.Errorf("%v: HTTP2WriteScheduler %q, want %q", tc.args, o.HTTP2WriteScheduler, tc.want)
		}
		err := o.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: Validate: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: Validate = %v, want an error with %q", tc.args, err, tc.wantErr)
		}
	}
}
