package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
)

// The guard flood (issue 24, item 7): one tenant floods the parents guard
// with refused opt-outs, each of which asks an unlock access review per
// locked global item, while another tenant changes a namespace's parent.
const (
	floodNS       = "mine"      // alice's namespace
	floodUser     = "alice"     // the flooding tenant
	otherUser     = "bob"       // the tenant whose latency is measured
	otherChild    = "bob-child" // re-parented between bob-p1 and bob-p2
	floodRole     = "flood-namespace-updater"
	floodLeaseNS  = "kube-system"
	labelInherit  = "implicit.dev/inherit"
	annotationLck = "implicit.dev/locked"
)

// floodCase is one measurement: bob's changes while flood runs (nil: no
// flood).
type floodCase struct {
	name  string
	flood func(i int64) rest.ImpersonationConfig // the user of the flood's i-th request
}

// floodResult is what one case measured.
type floodResult struct {
	name                       string
	other                      samples
	otherFailed                int
	floodRequests, floodDenied int64
	floodOther                 int64
	floodWall                  time.Duration
	lease                      leaseWatch
}

// guardFlood starts a control plane like make run's (kube-apiserver with
// implicit-apiserver's authorization webhook, the guards registered, and
// networkpolicies materialized under leader election), then measures the
// cases one after the other on it and prints their table.
func guardFlood(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "implicit-flood-")
	if err != nil {
		return err
	}
	fmt.Printf("== guard flood: %d loops, %d locked global items, %d parent changes per case; work dir %s\n", o.floodLoops, o.floodLocked, o.floodSamples, work)
	webhook, err := controlplane.PrepareAuthorizationWebhook(work, "implicit-apiserver", authz.Path,
		authz.MatchCondition(globalNS, []string{"kube-system", "kube-public", "kube-node-lease"}))
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: work, KubeAPIServerArgs: webhook.KubeAPIServerArgs})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	ok := false
	defer func() {
		cp.Stop()
		if ok && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		}
	}()
	config := filepath.Join(work, "implicit-configuration.yaml")
	if err := os.WriteFile(config, []byte(materializeConfig), 0o644); err != nil {
		return err
	}
	args := slices.Concat([]string{"-v=1", "--webhook-configuration=" + controlplane.GuardsConfiguration,
		"--config=" + config, "--materialize-lease-namespace=" + floodLeaseNS}, cp.WebhookServerArgs(), o.implicitArgs)
	implicit, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.binary, Name: "implicit-apiserver", Port: webhook.Port, Args: args})
	if err != nil {
		return fmt.Errorf("starting implicit-apiserver: %w\n%s", err, cp.LogTails(40))
	}
	if err := cp.RegisterAPIService(ctx, implicit.Port()); err != nil {
		return fmt.Errorf("registering the APIService: %w\n%s", err, implicit.LogTail(40))
	}
	admin := cp.AdminConfig()
	admin.QPS, admin.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if err := floodSetup(ctx, kube, o.floodLocked); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	served := []schema.GroupResource{{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Resource: "roles"}, {Group: "networking.k8s.io", Resource: "networkpolicies"}}
	if err := cp.RegisterGuards(ctx, implicit, served); err != nil {
		return fmt.Errorf("registering the guards: %w", err)
	}
	as := func(user string, groups ...string) (kubernetes.Interface, error) {
		cfg := rest.CopyConfig(admin)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		return kubernetes.NewForConfig(cfg)
	}
	bob, err := as(otherUser)
	if err != nil {
		return err
	}
	alice, err := as(floodUser)
	if err != nil {
		return err
	}
	// Ready: the guards refuse alice's opt-out, and bob's change passes.
	parent := "bob-p1"
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := optOut(ctx, alice); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "locked") {
			return false, nil
		}
		next := map[string]string{"bob-p1": "bob-p2", "bob-p2": "bob-p1"}[parent]
		if err := reparent(ctx, bob, next); err != nil {
			return false, nil
		}
		parent = next
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the guards never refused alice's opt-out and admitted bob's parent change: %w\n%s", err, implicit.LogTail(30))
	}
	fmt.Println("guards registered: alice's opt-out is refused, bob's parent change admitted")

	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + floodNS, "system:authenticated"}
	cases := []floodCase{
		{name: "no flood"},
		{name: fmt.Sprintf("flood: %d loops as %s", o.floodLoops, floodUser), flood: func(int64) rest.ImpersonationConfig {
			return rest.ImpersonationConfig{UserName: floodUser, Groups: []string{"system:authenticated"}}
		}},
		{name: fmt.Sprintf("flood: %d loops, a new ServiceAccount of %s per request", o.floodLoops, floodNS), flood: func(i int64) rest.ImpersonationConfig {
			return rest.ImpersonationConfig{UserName: "system:serviceaccount:" + floodNS + ":flood-" + strconv.FormatInt(i, 10), Groups: saGroups}
		}},
		{name: "no flood (again)"},
	}
	var results []floodResult
	for _, c := range cases {
		r, err := runFloodCase(ctx, o, admin, kube, bob, &parent, c)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", c.name, err, implicit.LogTail(20))
		}
		results = append(results, r)
		fmt.Printf("  %s: other tenant's parent change %s, %d failed; flood %d requests (%d refused by the guard, %d other errors) in %s; %s\n",
			r.name, r.other, r.otherFailed, r.floodRequests, r.floodDenied, r.floodOther, r.floodWall.Round(time.Millisecond), r.lease)
	}
	table := floodTable(results)
	fmt.Print("\n" + table)
	if err := os.WriteFile(filepath.Join(o.outDir, "guard-flood.md"), []byte(table), 0o644); err != nil {
		return err
	}
	ok = true
	return nil
}

// floodSetup creates the locked global items, alice's namespace and bob's
// three, and grants each tenant update on their own namespaces.
func floodSetup(ctx context.Context, kube kubernetes.Interface, locked int) error {
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: floodRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: readerRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	mk := func(name string, labels map[string]string) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		return err
	}
	grant := func(ns string, subjects ...rbacv1.Subject) error {
		_, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: floodRole},
			Subjects:   subjects,
		}, metav1.CreateOptions{})
		return err
	}
	for _, ns := range []string{globalNS, floodNS, "bob-p1", "bob-p2"} {
		if err := mk(ns, nil); err != nil {
			return err
		}
	}
	for i := range locked {
		rb := roleBinding(fmt.Sprintf("locked-%d", i))
		rb.Annotations = map[string]string{annotationLck: "true"}
		if _, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := grant(floodNS, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: floodUser},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:" + floodNS}); err != nil {
		return err
	}
	for _, ns := range []string{"bob-p1", "bob-p2"} {
		if err := grant(ns, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: otherUser}); err != nil {
			return err
		}
	}
	if err := mk(otherChild, nil); err != nil {
		return err
	}
	return grant(otherChild, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: otherUser})
}

// optOut is alice's refused request: `kubectl label ns mine
// implicit.dev/inherit=false --dry-run=server`.
func optOut(ctx context.Context, c kubernetes.Interface) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, labelInherit)
	_, err := c.CoreV1().Namespaces().Patch(ctx, floodNS, types.MergePatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// reparent is bob's guarded change: bob-child's parent set to parent.
func reparent(ctx context.Context, c kubernetes.Interface, parent string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelParent, parent)
	_, err := c.CoreV1().Namespaces().Patch(ctx, otherChild, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// runFloodCase runs c's flood (o.floodLoops loops) while bob changes
// bob-child's parent o.floodSamples times, one after the other, and
// watches the materializer's Lease throughout.
func runFloodCase(ctx context.Context, o options, admin *rest.Config, kube, bob kubernetes.Interface, parent *string, c floodCase) (floodResult, error) {
	r := floodResult{name: c.name}
	stopLease, err := watchLease(ctx, kube)
	if err != nil {
		return r, err
	}
	floodCtx, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var next, denied, other atomic.Int64
	start := time.Now()
	if c.flood != nil {
		clients := map[string]kubernetes.Interface{}
		var mu sync.Mutex
		client := func(imp rest.ImpersonationConfig) (kubernetes.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			if cl, ok := clients[imp.UserName]; ok {
				return cl, nil
			}
			cfg := rest.CopyConfig(admin)
			cfg.Impersonate = imp
			cl, err := kubernetes.NewForConfig(cfg)
			if err == nil && len(clients) < 100 {
				clients[imp.UserName] = cl
			}
			return cl, err
		}
		for range o.floodLoops {
			wg.Go(func() {
				for floodCtx.Err() == nil {
					i := next.Add(1)
					if i > int64(o.floodMax) {
						return
					}
					cl, err := client(c.flood(i))
					if err == nil {
						err = optOut(floodCtx, cl)
					}
					switch {
					case floodCtx.Err() != nil:
					case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "locked"):
						denied.Add(1)
					default:
						other.Add(1)
					}
				}
			})
		}
		// Let the flood fill the queues first.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	deadline := time.Now().Add(o.floodCaseTimeout)
	for range o.floodSamples {
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		next := map[string]string{"bob-p1": "bob-p2", "bob-p2": "bob-p1"}[*parent]
		t0 := time.Now()
		err := reparent(ctx, bob, next)
		r.other = append(r.other, time.Since(t0))
		if err != nil {
			r.otherFailed++
			if r.otherFailed <= 3 {
				fmt.Printf("    other tenant's change failed: %v\n", err)
			}
			continue
		}
		*parent = next
	}
	stopFlood()
	wg.Wait()
	r.floodWall = time.Since(start)
	r.floodRequests = min(next.Load(), int64(o.floodMax))
	if c.flood == nil {
		r.floodRequests = 0
	}
	r.floodDenied, r.floodOther = denied.Load(), other.Load()
	r.lease = stopLease()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if len(r.other) == 0 {
		return r, errors.New("no parent change measured")
	}
	return r, nil
}

// leaseWatch is what became of the materializer's Lease during a case.
type leaseWatch struct {
	holderBefore, holderAfter           string
	transitionsBefore, transitionsAfter int32
	maxRenewAge                         time.Duration // longest time seen since a renewal
	reads                               int
}

func (l leaseWatch) kept() bool {
	return l.holderBefore != "" && l.holderBefore == l.holderAfter && l.transitionsBefore == l.transitionsAfter &&
		l.maxRenewAge < 15*time.Second
}

func (l leaseWatch) String() string {
	verdict := "Lease kept"
	if !l.kept() {
		verdict = fmt.Sprintf("Lease LOST (holder %q -> %q, transitions %d -> %d)", l.holderBefore, l.holderAfter, l.transitionsBefore, l.transitionsAfter)
	}
	return fmt.Sprintf("%s, longest since a renewal %s", verdict, dur(l.maxRenewAge))
}

// watchLease polls the materializer's Lease every 250 ms until the
// returned function is called, which returns what it saw.
func watchLease(ctx context.Context, kube kubernetes.Interface) (func() leaseWatch, error) {
	var l leaseWatch
	read := func(ctx context.Context) (string, int32, error) {
		lease, err := kube.CoordinationV1().Leases(floodLeaseNS).Get(ctx, materialize.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return "", 0, err
		}
		if lease.Spec.RenewTime != nil {
			l.maxRenewAge = max(l.maxRenewAge, time.Since(lease.Spec.RenewTime.Time))
		}
		l.reads++
		return ptrOr(lease.Spec.HolderIdentity), ptrOr(lease.Spec.LeaseTransitions), nil
	}
	var err error
	// The materializer campaigns once the server knows its own identity.
	werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l.holderBefore, l.transitionsBefore, err = read(ctx)
		return err == nil && l.holderBefore != "", nil
	})
	if werr != nil {
		return nil, fmt.Errorf("the materializer's Lease %s/%s never had a holder: %v (%w)", floodLeaseNS, materialize.DefaultLeaseName, err, werr)
	}
	l.maxRenewAge = 0
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(pctx, 250*time.Millisecond, false, func(ctx context.Context) (bool, error) {
			_, _, _ = read(ctx)
			return false, nil
		})
	}()
	return func() leaseWatch {
		cancel()
		<-done
		l.holderAfter, l.transitionsAfter, _ = read(ctx)
		return l
	}, nil
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// floodTable is the cases' Markdown table.
func floodTable(rs []floodResult) string {
	var b strings.Builder
	b.WriteString("| case | other tenant's parent change: median | p99 | failed | flood requests (refused by the guard / other errors) | flood rate | materializer's Lease |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		rate := "–"
		if r.floodRequests > 0 {
			rate = fmt.Sprintf("%.0f/s", float64(r.floodRequests)/r.floodWall.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d of %d | %d (%d / %d) | %s | %s |\n", r.name, dur(r.other.median()), dur(r.other.p99()),
			r.otherFailed, len(r.other), r.floodRequests, r.floodDenied, r.floodOther, rate, r.lease)
	}
	return b.String()
}
