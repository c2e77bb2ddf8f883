package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// localUpFleetStart bounds how long `make run-fleet`'s local-up may take:
// three kube-apiservers and three implicit-apiservers.
const localUpFleetStart = 8 * time.Minute

// fleetWarning is the fan-out warning on a hub (--fleet-hub).
var fleetWarning = regexp.MustCompile(`(?m)^Warning: implicit\.dev: this change reaches (\d+) namespaces in (\d+) clusters?(.*)$`)

// TestLocalUpFleetHubGuards runs `make run-fleet`'s local-up: the hub runs
// an implicit-apiserver of its own (--fleet-hub), so a locked hub source
// needs unlock on the hub; its fan-out warning counts the members'
// namespaces by their reports, compared with a fresh list of each member's
// views; and `kubectl implicit fleet status` on the hub shows each member.
// Members whose binary can't report yet (no --fleet-member-name) get
// their report written by hand, as a member writes it: the status
// subresource of its MemberCluster, from its views.
func TestLocalUpFleetHubGuards(t *testing.T) {
	path := buildPlugin(t)
	work, reports, stop := runLocalUpFleet(t)
	defer stop()

	hub := pluginUser{t: t, name: "hub admin", path: path, kubeconfig: filepath.Join(work, "hub.kubeconfig"), home: t.TempDir()}
	members := []pluginUser{
		{t: t, name: "member-1 admin", path: path, kubeconfig: filepath.Join(work, "member-1.kubeconfig"), home: t.TempDir()},
		{t: t, name: "member-2 admin", path: path, kubeconfig: filepath.Join(work, "member-2.kubeconfig"), home: t.TempDir()},
	}

	t.Log("the hub's admin registered member-1 (canary) and member-2 (main)")
	hub.expectKubectl(0, func(r pluginRun) error {
		for _, want := range []string{"member-1 canary", "member-2 main"} {
			if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
				return fmt.Errorf("no %q", want)
			}
		}
		return nil
	}, "get", "memberclusters.fleet.implicit.dev", "--no-headers", "-o", `custom-columns=NAME:.metadata.name,STAGE:.metadata.labels.implicit\.dev/cluster-stage`)

	t.Log("the hub's locks need unlock on the hub: an admin of implicit-global without it is refused")
	hub.expectKubectl(0, nil, "create", "rolebinding", "alice-admin", "-n", "implicit-global", "--clusterrole=admin", "--user=alice")
	hub.expectKubectl(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, `admission webhook "locks.implicit.dev" denied the request`) {
			return fmt.Errorf("stderr %q: want the lock guard's denial", r.stderr)
		}
		return nil
	}, "label", "rolebinding", "org-security-auditors", "-n", "implicit-global", "tier=org", "--as=alice")
	hub.expectKubectl(0, nil, "create", "role", "unlock-org-security-auditors", "-n", "implicit-global", "--verb=unlock",
		"--resource=rolebindings.rbac.authorization.k8s.io", "--resource-name=org-security-auditors")
	hub.expectKubectl(0, nil, "create", "rolebinding", "alice-unlocks", "-n", "implicit-global", "--role=unlock-org-security-auditors", "--user=alice")
	hub.expectKubectl(0, nil, "label", "rolebinding", "org-security-auditors", "-n", "implicit-global", "tier=org", "--as=alice")

	if !reports {
		t.Log("the binary's members can't report yet: each member's report is written by hand from a fresh list of its views")
		for i, m := range members {
			writeReport(t, hub, fmt.Sprintf("member-%d", i+1), memberViews(t, m))
		}
	}

	t.Log("the fan-out warning of a hub source counts the hub and the members, by their reports")
	// The members report on their own schedule: once their reports have
	// caught up with their views, the figure is the hub's own count plus
	// the members' (a fresh list of each).
	eventually(t, "the hub's fan-out warning counts the hub's and the members' views of ci-bot", func(ctx context.Context) error {
		r := hub.kubectl(ctx, "annotate", "rolebinding", "ci-bot", "-n", "implicit-global", "note=fleet", "--dry-run=server")
		if r.code != 0 {
			return errorf("kubectl annotate --dry-run=server: exit %d: %s", r.code, r.stderr)
		}
		m := fleetWarning.FindStringSubmatch(r.stderr)
		if m == nil {
			return errorf("stderr %q: want the fleet's fan-out warning", r.stderr)
		}
		figure, _ := strconv.Atoi(m[1])
		if clusters, _ := strconv.Atoi(m[2]); clusters != 3 || strings.Contains(m[3], "not reported") {
			return errorf("warning %q: want the hub and both members counted", m[0])
		}
		want := hubReach(t, hub, "ci-bot")
		for _, mem := range members {
			want += memberViews(t, mem).sources["ci-bot"].namespaces
		}
		if figure != want {
			return errorf("the warning %q counts %d namespaces, want %d (the hub's own count plus the members' fresh lists)", m[0], figure, want)
		}
		t.Logf("the hub's warning: %s (the hub's own count plus the members' fresh lists: %d)", m[0], want)
		return nil
	})

	t.Log("kubectl implicit fleet status on the hub: a row per member")
	r := hub.expect(0, func(r pluginRun) error {
		for _, want := range []string{"member-1", "implicit.dev/cluster-stage=canary", "member-2", "implicit.dev/cluster-stage=main", "Current"} {
			if !strings.Contains(r.stdout, want) {
				return fmt.Errorf("no %q", want)
			}
		}
		return nil
	}, "fleet", "status")
	t.Logf("$ kubectl implicit fleet status\n%s", r.stdout)
	r = hub.expect(0, func(r pluginRun) error {
		if !strings.Contains(r.stdout, "rolebindings.rbac.authorization.k8s.io implicit-global/ci-bot: the hub's resourceVersion") {
			return fmt.Errorf("no header naming the hub's version")
		}
		return nil
	}, "fleet", "status", "rolebinding", "ci-bot", "-n", "implicit-global")
	t.Logf("$ kubectl implicit fleet status rolebinding ci-bot -n implicit-global\n%s", r.stdout)

	if !reports {
		t.Log("an edit on the hub the members' (hand-written) reports don't follow: both members are Behind, by one source")
		hub.expectKubectl(0, nil, "annotate", "rolebinding", "ci-bot", "-n", "implicit-global", "note=fleet")
		hub.expect(0, func(r pluginRun) error {
			if n := strings.Count(r.stdout, "Behind"); n != 2 {
				return fmt.Errorf("%d members Behind, want 2", n)
			}
			return nil
		}, "fleet", "status")
	}
}

// runLocalUpFleet starts `make run-fleet`'s local-up and says whether its
// members report to the hub (the binary has --fleet-member-name).
func runLocalUpFleet(t *testing.T) (work string, reports bool, stop func()) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	binary, err := filepath.Abs(os.Getenv(binaryEnv))
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.CommandContext(t.Context(), binary, "--help").CombinedOutput()
	reports = strings.Contains(string(help), "--fleet-member-name")
	localUp := filepath.Join(t.TempDir(), "local-up")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", localUp, "./hack/local-up")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building local-up: %v\n%s", err, out)
	}
	work = t.TempDir()
	if err := os.Mkdir(localUpHome(work), 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"--fleet", "--bin-dir=" + os.Getenv(toolsBinEnv), "--implicit-binary=" + binary, "--work-dir=" + work}
	return work, reports, startLocalUpWithin(t, localUpFleetStart, root, localUpHome(work), localUp, args...)
}

// viewCounts are a member's global items as its views hold them: per hub
// source name, the namespaces that inherit it and its resourceVersion.
type viewCounts struct {
	namespaces int
	sources    map[string]sourceCount
}

type sourceCount struct {
	namespaces      int
	resourceVersion string
}

// memberViews lists a member's global view items (a fresh list).
func memberViews(t *testing.T, m pluginUser) viewCounts {
	t.Helper()
	// Not logged: the views' JSON is long.
	r := m.kubectl(t.Context(), "get", "rolebindings.implicit.dev", "-A", "-l", v1alpha1.LabelScope+"=global", "-o", "json")
	if r.code != 0 {
		t.Fatalf("%s: kubectl get rolebindings.implicit.dev -A: exit %d\n%s", m.name, r.code, r.stderr)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Namespace   string            `json:"namespace"`
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	out := viewCounts{sources: map[string]sourceCount{}}
	tenants := map[string]bool{}
	for _, it := range list.Items {
		tenants[it.Metadata.Namespace] = true
		c := out.sources[it.Metadata.Name]
		c.namespaces++
		c.resourceVersion = it.Metadata.Annotations[v1alpha1.AnnotationSourceResourceVersion]
		out.sources[it.Metadata.Name] = c
	}
	out.namespaces = len(tenants)
	return out
}

// writeReport writes member's report on the hub as the member would: its
// MemberCluster's status subresource.
func writeReport(t *testing.T, hub pluginUser, member string, v viewCounts) {
	t.Helper()
	var sources []map[string]any
	for name, c := range v.sources {
		sources = append(sources, map[string]any{"resource": "rolebindings.rbac.authorization.k8s.io", "name": name, "resourceVersion": c.resourceVersion, "namespaces": c.namespaces})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"reportTime": time.Now().UTC().Format(time.RFC3339), "namespaces": v.namespaces, "sources": sources,
	}})
	if err != nil {
		t.Fatal(err)
	}
	hub.expectKubectl(0, nil, "patch", "memberclusters.fleet.implicit.dev", member, "--subresource=status", "--type=merge", "-p", string(patch))
}

// hubReach counts the hub's own namespaces whose view holds the global
// source name (the hub's count in its fan-out warning).
func hubReach(t *testing.T, hub pluginUser, name string) int {
	t.Helper()
	r := hub.expectKubectl(0, nil, "get", "rolebindings.implicit.dev", "-A", "-l", v1alpha1.LabelScope+"=global", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	n := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if l == name {
			n++
		}
	}
	return n
}
