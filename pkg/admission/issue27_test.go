package admission_test

import (
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestFanoutQuietWhenDenied: no guard's warning comes with a request another
// guard denies (kube-apiserver prints the warnings of the webhooks that
// allowed): changing a locked global source without unlock is refused by
// the lock guard, and the fan-out guard says nothing of its reach; with
// unlock, it does.
func TestFanoutQuietWhenDenied(t *testing.T) {
	t.Parallel()
	req := request(admissionv1.Update, rolebindings, global, "admins",
		roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked, annotated("new", "yes")))
	for _, tc := range []struct {
		name    string
		answers map[authorizationv1.ResourceAttributes]answer
		want    []string
	}{
		{name: "the lock guard denies", want: nil},
		{name: "the lock guard allows", answers: allowAll(unlock(rolebindings, global, "admins")), want: []string{admission.Warning(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(&fakeIndex{reach: 4}), Authorizer: &fakeAuthorizer{answers: tc.answers}, Served: served, GlobalNamespaces: []string{global}})
			locks, _ := review(t, g, webhookconfig.PathLocks, req)
			resp, _ := review(t, g, webhookconfig.PathFanout, req)
			if locks == nil || resp == nil || !resp.Allowed {
				t.Fatalf("locks %+v, fanout %+v", locks, resp)
			}
			if locks.Allowed != (tc.answers != nil) {
				t.Fatalf("the lock guard allowed: %v", locks.Allowed)
			}
			if strings.Join(resp.Warnings, "|") != strings.Join(tc.want, "|") {
				t.Errorf("fan-out warnings %q, want %q", resp.Warnings, tc.want)
			}
		})
	}
}

// TestExclusionEntries: the parents guard refuses an exclusion entry added
// that names no served view (a singular, a short name, a group, a typo),
// saying which view it likely meant; warns of one that was there already
// (refusing it would block every other change of the namespace); and
// warns of an exclusion of an item the namespace inherits locked.
func TestExclusionEntries(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	exclude := func(v string) nsOpt {
		return func(n *corev1.Namespace) { n.Annotations[v1alpha1.AnnotationExclude] = v }
	}
	other := func(n *corev1.Namespace) { n.Labels["team"] = "c" }
	lockedIdx := func() *fakeIndex {
		return &fakeIndex{existing: map[string]bool{"org": true, "team-a": true}, inherited: map[string]merge.Result{
			"rolebindings team-a sre-edit": {Item: merge.Item{Namespace: global, Name: "sre-edit", Locked: true}, Scope: merge.ScopeGlobal},
			"rolebindings team-a open":     {Item: merge.Item{Namespace: global, Name: "open"}, Scope: merge.ScopeGlobal},
		}}
	}
	tests := []guardCase{
		{
			name:        "a singular is refused, naming the plural",
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude("rolebinding/sre-edit"))),
			wantMessage: []string{`exclusion "rolebinding/sre-edit": implicit.dev serves no view "rolebinding" (a view is named by its plural resource name: rolebindings/sre-edit)`},
		},
		{
			name:        "a short name is refused",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "", exclude("netpol/deny"))),
			wantMessage: []string{`implicit.dev serves no view "netpol" (a view is named by its plural resource name: networkpolicies/deny)`},
		},
		{
			name:        "a group suffix is refused",
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude("rolebindings.rbac.authorization.k8s.io/x"))),
			wantMessage: []string{"must be a plural resource name without a group"},
		},
		{
			name:        "an unknown view among valid entries is refused",
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude("rolebindings/open, pods/x"))),
			wantMessage: []string{`implicit.dev serves no view "pods"`},
		},
		{
			name:        "valid entries are allowed without a word",
			index:       lockedIdx(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude("rolebindings/open, networkpolicies/*"))),
			wantAllowed: true,
		},
		{
			name:         "an entry written before is only warned of when the annotation changes",
			index:        lockedIdx(),
			req:          request(update, nsGR, "", "team-a", ns("team-a", "", exclude("rolebinding/x")), ns("team-a", "", exclude("rolebinding/x, rolebindings/open"))),
			wantAllowed:  true,
			wantWarnings: []string{`implicit.dev: namespace team-a: exclusion "rolebinding/x": implicit.dev serves no view "rolebinding" (a view is named by its plural resource name: rolebindings/x), so it excludes nothing`},
		},
		{
			name:        "an unchanged annotation is not judged again",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "", exclude("rolebinding/x")), ns("team-a", "", exclude("rolebinding/x"), other)),
			wantAllowed: true,
		},
		{
			name:         "excluding a locked item warns",
			index:        lockedIdx(),
			req:          request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude("rolebindings/sre-edit"))),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: namespace team-a: the exclusion rolebindings/sre-edit does nothing while the global source implicit-global/sre-edit is locked: a locked item can't be excluded; its owners can unlock it"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathParents, tc)
		})
	}
}

// TestNamespaceDeletionWarns: deleting a namespace others inherit from,
// once allowed, warns with the count and names of the namespaces that lose
// inherited items: a middle parent's children and theirs lose what it and
// the namespaces above it passed down; a namespace nobody inherits from
// says nothing; a refused deletion warns of nothing.
func TestNamespaceDeletionWarns(t *testing.T) {
	t.Parallel()
	nsList := []*corev1.Namespace{
		ns(global, ""), ns("top", ""), ns("org", "top", parentUID(nsUID("top"))),
		ns("team-a", "org", recorded), ns("team-a-1", "team-a", recorded), ns("team-b", "org", recorded), ns("solo", ""),
	}
	sources := []*rbacv1.RoleBinding{roleBinding(global, "g"), roleBinding("top", "t"), roleBinding("org", "o-lock", isLocked)}
	for _, tc := range []struct {
		name      string
		namespace string
		answers   map[authorizationv1.ResourceAttributes]answer
		allowed   bool
		want      []string
	}{
		{name: "a middle parent", namespace: "org", answers: allowAll(unlockAll(rolebindings, "org")), allowed: true,
			want: []string{"implicit.dev: deleting namespace org takes inherited items from 3 namespaces: team-a, team-a-1, team-b"}},
		{name: "a top parent", namespace: "top", allowed: true,
			want: []string{"implicit.dev: deleting namespace top takes inherited items from 4 namespaces: org, team-a, team-a-1, team-b"}},
		{name: "refused: no warning", namespace: "org", allowed: false},
		{name: "a leaf", namespace: "team-b", allowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, nsList, sources...)
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: tc.answers}, Served: served, GlobalNamespaces: []string{global}})
			resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, request(admissionv1.Delete, nsGR, "", tc.namespace, ns(tc.namespace, ""), nil))
			if resp == nil || resp.Allowed != tc.allowed {
				t.Fatalf("answered %+v, want allowed %v", resp, tc.allowed)
			}
			if strings.Join(resp.Warnings, "|") != strings.Join(tc.want, "|") {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.want)
			}
		})
	}
}

// TestExclusionEntriesBounded: a list of thousands of names is judged with
// a bounded number of mirror reads, and a refusal names ten problems and
// counts the rest.
func TestExclusionEntriesBounded(t *testing.T) {
	t.Parallel()
	entries := make([]string, 0, 2000)
	bad := make([]string, 0, 30)
	for i := range 2000 {
		entries = append(entries, fmt.Sprintf("rolebindings/x%04d", i))
	}
	for i := range 30 {
		bad = append(bad, fmt.Sprintf("pods/p%02d", i))
	}
	exclude := func(v string) nsOpt {
		return func(n *corev1.Namespace) { n.Annotations[v1alpha1.AnnotationExclude] = v }
	}
	idx := &fakeIndex{existing: map[string]bool{"team-a": true}}
	g := admission.NewGuards(admission.Config{Mirror: mirrorOf(idx), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(hostNamespaces...)})
	resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude(strings.Join(entries, ",")))))
	if resp == nil || !resp.Allowed {
		t.Fatalf("2000 valid entries: %+v", resp)
	}
	idx.mu.Lock()
	reads := len(idx.inheritedCalls)
	idx.mu.Unlock()
	if reads > 64 {
		t.Errorf("2000 entries made %d mirror reads, want at most 64", reads)
	}
	resp, _ = review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", exclude(strings.Join(bad, ",")))))
	if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "; and 20 more:") || strings.Contains(resp.Result.Message, "pods/p10") {
		t.Errorf("30 bad entries: %+v, want a refusal naming 10 and counting 20 more", resp)
	}
}
