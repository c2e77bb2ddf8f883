package main

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// everyStage selects every namespace without an implicit.dev/stage label,
// which is every tenant of the bench: a candidate with it reaches them all.
const everyStage = "!" + v1alpha1.LabelStage

// promotionRounds measures a staged change of global-0 (issue 19) on the
// open view fleet f, -promotion-runs times: a candidate whose selector
// reaches every tenant (timed until the last view watcher sees the
// candidate's version), then its promotion, the two writes of a real one
// (the candidate's content into global-0, then the candidate deleted),
// timed from the first write until the last view watcher has the promoted
// version. Compare with the plain global edits of the same fleet (Implicit).
func (b *bench) promotionRounds(ctx context.Context, f *fleet, gr *gResult) error {
	name := globalName(0)
	candidate := name + ".next"
	rbs := b.kube.RbacV1().RoleBindings(globalNS)
	defer func() {
		// Nothing staged outlives the measurement, whatever failed.
		if err := rbs.Delete(context.Background(), candidate, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			fmt.Printf("  (deleting the candidate %s: %v)\n", candidate, err)
		}
	}()
	for i := range b.o.promotionRuns {
		stable, err := rbs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		staged := fmt.Sprintf("staged-%d", i+1)
		c := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: candidate, Namespace: globalNS,
				Labels:      map[string]string{labelBench: staged},
				Annotations: map[string]string{v1alpha1.AnnotationCandidateFor: name, v1alpha1.AnnotationCanarySelector: everyStage}},
			RoleRef: stable.RoleRef, Subjects: stable.Subjects,
		}
		r := newRound(name, staged, len(b.tenants), len(b.tenants), b.o.viewAll)
		start, err := measureAll(ctx, roundTimeout, func(ctx context.Context) error {
			_, err := rbs.Create(ctx, c, metav1.CreateOptions{})
			return err
		}, armed{f, r})
		if err != nil {
			return fmt.Errorf("candidate %d: %w", i+1, err)
		}
		gr.Staged = append(gr.Staged, since(start, r.lastAt.Load()))
		time.Sleep(100 * time.Millisecond)

		promoted := fmt.Sprintf("promoted-%d", i+1)
		r = newRound(name, promoted, len(b.tenants), len(b.tenants), b.o.viewAll)
		start, err = measureAll(ctx, roundTimeout, func(ctx context.Context) error {
			if _, err := rbs.Patch(ctx, name, types.MergePatchType, labelPatch(promoted), metav1.PatchOptions{}); err != nil {
				return err
			}
			return rbs.Delete(ctx, candidate, metav1.DeleteOptions{})
		}, armed{f, r})
		if err != nil {
			return fmt.Errorf("promotion %d: %w", i+1, err)
		}
		gr.Promotion = append(gr.Promotion, since(start, r.lastAt.Load()))
		fmt.Printf("  staged change %d: the candidate reached the last of %d view watchers in %s; its promotion (2 writes) in %s\n",
			i+1, len(b.tenants), dur(gr.Staged[i]), dur(gr.Promotion[i]))
		time.Sleep(100 * time.Millisecond)
	}
	if len(gr.Promotion) > 0 {
		fmt.Printf("  promotion of a staged change, last of %d view watchers: %s; the plain global edit: %s\n", len(b.tenants), gr.Promotion, gr.Implicit)
	}
	return nil
}

// promotionMarkdown writes the staged-rollout table.
func (r *results) promotionMarkdown(p func(string, ...any), mp func(samples) string) {
	measured := false
	for _, n := range r.Ns {
		for _, g := range n.G {
			measured = measured || len(g.Promotion) > 0
		}
	}
	if !measured {
		return
	}
	p("### Staged rollout: promotion of a candidate (issue 19)")
	p("")
	p("| N | G | candidate reaches every namespace, median | p99 | promotion (2 writes), median | p99 | plain global edit, median | p99 | promotion / plain edit | rounds |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for _, g := range n.G {
			if len(g.Promotion) == 0 {
				continue
			}
			p("| %d | %d | %s | %s | %s | %s | %d |", n.N, g.G, mp(g.Staged), mp(g.Promotion), mp(g.Implicit),
				ratio(g.Promotion.median(), g.Implicit.median()), len(g.Promotion))
		}
	}
	p("")
	p("A candidate of global-0 (annotations implicit.dev/candidate-for: global-0, implicit.dev/canary-selector: %s, which every bench tenant matches) is created, timed until the last namespace view watcher has global-0 in the candidate's version; then promoted as a release manager would: global-0 takes the candidate's content (a label edit here), then the candidate is deleted, timed from the first write until the last view watcher has the promoted version (a MODIFIED). The plain global edit is the same fleet's propagation rounds above.", everyStage)
	p("")
}
