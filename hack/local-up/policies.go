package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// policyExampleFiles are what make run applies of the staged
// admission-policy example (artifacts/config/admission-policies): the
// policy, its [Audit, Warn] binding and the global parameter. Never the
// Deny binding: make run's policy blocks nothing.
var policyExampleFiles = []string{"policy.yaml", "binding-audit.yaml", "parameter.yaml"}

// servesConfigMaps reports whether the ImplicitConfiguration at path (""
// is the default, which does not) serves the view of ConfigMaps, the
// example policy's parameter kind.
func servesConfigMaps(path string) (bool, error) {
	if path == "" {
		return false, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var cfg struct {
		Resources []struct {
			Group    string `json:"group"`
			Resource string `json:"resource"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range cfg.Resources {
		if r.Group == "" && r.Resource == "configmaps" {
			return true, nil
		}
	}
	return false, nil
}

// applyPolicyExample applies policyExampleFiles from dir once
// kube-apiserver's aggregated discovery lists configmaps.implicit.dev: a
// policy whose paramKind kube-apiserver can't resolve yet is misconfigured,
// and its failurePolicy (Fail) would deny every Deployment it matches
// until then (docs/policies.md). The wait is bounded by two minutes
// (kube-apiserver refreshes an APIService's discovery every minute).
func applyPolicyExample(ctx context.Context, cp *controlplane.ControlPlane, dir string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	if err != nil {
		return err
	}
	say("waiting until kube-apiserver's discovery lists configmaps.implicit.dev, the example admission policy's parameter kind (up to a minute)")
	listed := func() bool {
		_, lists, _ := dc.ServerGroupsAndResources()
		for _, l := range lists {
			if l.GroupVersion != "implicit.dev/v1alpha1" {
				continue
			}
			for _, r := range l.APIResources {
				if r.Name == "configmaps" {
					return true
				}
			}
		}
		return false
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !listed() {
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver's discovery does not list configmaps.implicit.dev after two minutes: the example admission policy is not applied")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	args := []string{"apply"}
	for _, f := range policyExampleFiles {
		args = append(args, "-f", filepath.Join(dir, f))
	}
	say("applying the example admission policy (Audit and Warn only): %s", strings.Join(policyExampleFiles, ", "))
	stdout, stderr, err := cp.Kubectl(ctx, args...)
	fmt.Print(indent(stdout))
	if err != nil {
		return fmt.Errorf("applying the example admission policy from %s: %w\n%s", dir, err, stderr)
	}
	return nil
}

// printPolicyTour is the tour's admission-policy part.
func printPolicyTour() {
	fmt.Print(`
The admission policy replica-limit takes its parameter from each namespace's view of the ConfigMap
replica-limit (set once in implicit-global: 10 replicas). It audits and warns, it blocks nothing:

  kubectl get configmaps.implicit.dev replica-limit -n team-a -o yaml        # the inherited parameter
  kubectl create deployment web -n team-a --image=registry.k8s.io/pause:3.10 --replicas=11 --dry-run=server \
    --as=pat --as-group=platform:admins                                        # warned: over the inherited limit

docs/policies.md stages it to Deny, canaries first (artifacts/config/admission-policies/steps).
`)
}
