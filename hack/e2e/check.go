package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// check runs what an operator would after the install, printing each
// command and its output: the pods and the APIService, a tenant's view read
// through the aggregator, and an admission webhook answered by the pods.
func (c *cluster) check(ctx context.Context) error {
	k := func(args ...string) (string, error) {
		out, _, err := c.cp.Kubectl(ctx, args...)
		fmt.Printf("$ kubectl %s\n%s", strings.Join(args, " "), out)
		return out, err
	}
	if _, err := k("get", "pods", "-n", releaseNamespace, "-o", "wide"); err != nil {
		return err
	}
	if _, err := k("wait", "--for=condition=Available", "--timeout=120s", "apiservice/v1alpha1.implicit.dev"); err != nil {
		return err
	}
	if _, err := k("get", "apiservice", "v1alpha1.implicit.dev"); err != nil {
		return err
	}
	// The chart's helm test: a pod of the product image running
	// `implicit-apiserver check` (the APIService Available, a view
	// answering). Not --logs: kube-apiserver can't reach this kubelet's
	// log endpoint (docs/install.md); the kubelet writes the pod's log
	// under pod-logs/.
	args := []string{"test", releaseName, "--kubeconfig=" + c.cp.KubeconfigPath(), "--namespace", releaseNamespace, "--timeout", "3m"}
	out, err := command(ctx, c.helm(), args...)
	fmt.Printf("$ helm %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		return fmt.Errorf("helm test: %w", err)
	}
	logs, _ := filepath.Glob(filepath.Join(c.o.workDir, "pod-logs", releaseNamespace+"_"+releaseName+"-test_*", "check", "*.log"))
	// The newest: an earlier run's pod logs stay in the work directory.
	var newest string
	var newestTime time.Time
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.ModTime().After(newestTime) {
			newest, newestTime = l, fi.ModTime()
		}
	}
	if raw, err := os.ReadFile(newest); err == nil {
		fmt.Printf("$ cat %s\n%s", newest, raw)
	}

	// A global RoleBinding, a parent and a child: the tenant of the child
	// inherits from both.
	setup := `apiVersion: v1
kind: Namespace
metadata: {name: implicit-global}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a-dev, labels: {implicit.dev/parent: team-a}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: global-auditors, namespace: implicit-global}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: auditors}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-a-admins, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: team-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: implicit-view-reader, namespace: team-a-dev}
rules: [{apiGroups: [implicit.dev], resources: [rolebindings], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-views, namespace: team-a-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: implicit-view-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
`
	applied, _, err := c.cp.KubectlWithInput(ctx, strings.NewReader(setup), "apply", "-f", "-")
	if err != nil {
		return err
	}
	fmt.Print(applied)
	alice, err := c.cp.WriteUserKubeconfig("alice")
	if err != nil {
		return err
	}
	// The view is eventually consistent with its sources: poll briefly.
	var view string
	if err := poll(ctx, 30*time.Second, "alice's view of team-a-dev", func(ctx context.Context) (bool, string, error) {
		out, _, err := c.cp.Kubectl(ctx, "--kubeconfig="+alice, "get", "rolebindings.implicit.dev", "-n", "team-a-dev")
		view = out
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(out, "global-auditors") && strings.Contains(out, "team-a-admins"), out, nil
	}); err != nil {
		return err
	}
	fmt.Printf("$ kubectl --kubeconfig=%s get rolebindings.implicit.dev -n team-a-dev   # as alice\n%s", alice, view)
	// alice may not read a namespace she does not inherit into.
	out, _, err = c.cp.Kubectl(ctx, "--kubeconfig="+alice, "get", "rolebindings.implicit.dev", "-n", "team-a")
	fmt.Printf("$ kubectl --kubeconfig=%s get rolebindings.implicit.dev -n team-a   # as alice\n%s", alice, out)
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("alice read team-a's view (want forbidden): %v", err)
	}
	fmt.Println(err)

	// The mutating parent-uid webhook, served by the pods, recorded the
	// parent's uid when team-a-dev was created.
	uid, err := k("get", "namespace", "team-a", "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		return err
	}
	fmt.Println()
	recorded, err := k("get", "namespace", "team-a-dev", "-o", `jsonpath={.metadata.annotations.implicit\.dev/parent-uid}`)
	if err != nil {
		return err
	}
	fmt.Println()
	if recorded != uid {
		return fmt.Errorf("team-a-dev's implicit.dev/parent-uid is %q, want team-a's uid %q (mutating webhook)", recorded, uid)
	}

	// The parent guard, served by the pods: closing a cycle is refused.
	out, _, err = c.cp.Kubectl(ctx, "label", "namespace", "team-a", "implicit.dev/parent=team-a-dev")
	fmt.Printf("$ kubectl label namespace team-a implicit.dev/parent=team-a-dev\n%s", out)
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "cycle") {
		return fmt.Errorf("the parent guard did not refuse a cycle: %v", err)
	}
	fmt.Println(err)
	_, err = k("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations")
	return err
}
