package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/implicit-dev/implicit-apiserver/pkg/apiserver"
)

// FleetOptions make the server a member of its hub's fleet: it reports to
// its MemberCluster on the hub (pkg/fleet, docs/fleets.md).
type FleetOptions struct {
	// MemberName is the member's name, its MemberCluster's on the hub; ""
	// turns the member's registration and reports off.
	MemberName string
	// ReportInterval is how often the member writes its report.
	ReportInterval time.Duration
	// ReportKubeconfig reaches the hub for the registration and the
	// reports; "": --global-kubeconfig.
	ReportKubeconfig string
}

// AddFlags adds the fleet's flags to fs.
func (f *FleetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.MemberName, "fleet-member-name", f.MemberName,
		"This member cluster's name in its hub's fleet: the MemberCluster (fleet.implicit.dev) the hub's admin registered for it, "+
			"whose labels cluster stages select on and whose status the server keeps as its report (served revision, staleness, "+
			"counts per hub source). Needs --global-kubeconfig. Empty: no registration, no reports.")
	fs.DurationVar(&f.ReportInterval, "fleet-report-interval", f.ReportInterval,
		"How often the member writes its report to the hub (besides soon after a change of the hub's sources, at most once per 2s). At least 1s.")
	fs.StringVar(&f.ReportKubeconfig, "fleet-report-kubeconfig", f.ReportKubeconfig,
		"Kubeconfig of the hub for the member's registration and reports, when they must travel another path, or as another "+
			"identity, than the reads of the global sources. Empty: --global-kubeconfig.")
}

// Validate checks the fleet's flags; globalKubeconfig is --global-kubeconfig.
func (f *FleetOptions) Validate(globalKubeconfig string) []error {
	var errs []error
	if f.MemberName != "" {
		if msgs := validation.IsDNS1123Subdomain(f.MemberName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--fleet-member-name %q: %s", f.MemberName, strings.Join(msgs, ", ")))
		}
		if globalKubeconfig == "" {
			errs = append(errs, fmt.Errorf("--fleet-member-name needs --global-kubeconfig: a member reads its global sources from its hub, and reports there"))
		}
	}
	if f.ReportKubeconfig != "" && f.MemberName == "" {
		errs = append(errs, fmt.Errorf("--fleet-report-kubeconfig needs --fleet-member-name"))
	}
	if f.ReportInterval < time.Second {
		errs = append(errs, fmt.Errorf("--fleet-report-interval %s: must be at least 1s", f.ReportInterval))
	}
	return errs
}

// config builds the member's hub client, on a connection of its own with
// a small rate limit (a report every interval, a watch of one object); nil
// when the server is no member.
func (f *FleetOptions) config(globalKubeconfig string) (*apiserver.MemberConfig, error) {
	if f.MemberName == "" {
		return nil, nil
	}
	path, flag := f.ReportKubeconfig, "--fleet-report-kubeconfig"
	if path == "" {
		path, flag = globalKubeconfig, "--global-kubeconfig"
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	client, err := dynamic.NewForConfig(ownConnection(cfg, 5, 10))
	if err != nil {
		return nil, fmt.Errorf("the fleet's hub client: %w", err)
	}
	return &apiserver.MemberConfig{Name: f.MemberName, Client: client, ReportInterval: f.ReportInterval}, nil
}
