package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// fieldsFree are the top-level fields a promotion does not copy.
var fieldsFree = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "status": true}

// promote writes the candidate's content into the stable source (creates
// it, for a staged creation), then deletes the candidate, its uid and
// resourceVersion as preconditions. The error of the second write is a
// *partialError: the first one stands, and the error says what the stable
// source now holds and what to do.
//
// No precondition spans two objects: a candidate deleted (an abort) or
// changed between the read and the stable source's write is found by the
// delete's preconditions, after that write. The promotion then fails, and
// for an abort prints the version the write replaced, to write back.
func (r *rollout) promote(ctx context.Context, w io.Writer, dryRun dryRun, output string) error {
	stable, candidates, err := r.load(ctx)
	if err != nil {
		return err
	}
	cand, err := r.candidate(candidates)
	if err != nil {
		return err
	}
	if _, err := merge.ParseCandidate(cand.GetName(), cand.GetAnnotations()); err != nil {
		return fmt.Errorf("candidate %s is malformed and reached no namespace, so it is not promoted: %w", r.ref(cand.GetName()), err)
	}
	obj, held, err := r.promoted(stable, cand)
	if err != nil {
		return err
	}
	if isTable(output) {
		output = "yaml"
	}
	did, would := "updated", "updated"
	if stable == nil {
		did, would = "created", "created"
	}
	for _, k := range held {
		v, ok := stable.GetAnnotations()[k]
		now := "absent"
		if ok {
			now = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(w, "The candidate's %s: %q is not promoted: the stable source's stays (%s); change it with kubectl annotate.\n",
			k, cand.GetAnnotations()[k], now)
	}
	if dryRun == dryRunClient {
		fmt.Fprintf(w, "%s would be %s in %s from candidate %s (dry run):\n", r.ref(r.name), would, r.namespace, cand.GetName())
		if err := printObject(w, output, obj.Object); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s (uid %s) would then be deleted in %s (dry run)\n", r.ref(cand.GetName()), cand.GetUID(), r.namespace)
		return nil
	}
	var written *unstructured.Unstructured
	if stable == nil {
		written, err = r.sources().Create(ctx, obj, metav1.CreateOptions{DryRun: dryRun.serverDryRun()})
	} else {
		written, err = r.sources().Update(ctx, obj, metav1.UpdateOptions{DryRun: dryRun.serverDryRun()})
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s %s in %s from candidate %s%s\n", r.ref(r.name), did, r.namespace, cand.GetName(), dryRun.suffix())
	if dryRun == dryRunServer {
		// What the server would store, as kubectl prints a dry run's
		// object: without managedFields.
		if err := printObject(w, output, written); err != nil {
			return err
		}
	}
	if err := r.deleteCandidate(ctx, cand, true, dryRun); err != nil {
		if dryRun == dryRunServer {
			return err // nothing was written: nothing stands halfway
		}
		return r.promotedButNotDeleted(w, output, stable, cand, err)
	}
	fmt.Fprintf(w, "%s deleted in %s%s\n", r.ref(cand.GetName()), r.namespace, dryRun.suffix())
	return nil
}

// promotedButNotDeleted is the error of a promotion whose stable source
// was written and whose candidate's delete failed with err: what the
// stable source now holds, and what to do. A candidate deleted meanwhile
// was most likely aborted: the stable source holds content that was
// withdrawn, so the version it replaced is printed to w, to write back.
func (r *rollout) promotedButNotDeleted(w io.Writer, output string, stable, cand *unstructured.Unstructured, err error) error {
	holds := fmt.Sprintf("the stable source %s in %s now holds the content of the candidate %s as read at resourceVersion %s",
		r.ref(r.name), r.namespace, cand.GetName(), cand.GetResourceVersion())
	deleteCand := fmt.Sprintf("kubectl delete %s %s -n %s", r.source.GroupResource(), cand.GetName(), r.namespace)
	var msg string
	switch {
	case apierrors.IsNotFound(err):
		msg = holds + ", but the candidate was deleted after that read (a rollout abort?): "
		if stable == nil {
			msg += fmt.Sprintf("if the abort should stand, delete the created source (kubectl delete %s %s -n %s)",
				r.source.GroupResource(), r.name, r.namespace)
		} else {
			fmt.Fprintf(w, "The version of %s the promotion replaced (resourceVersion %s), for kubectl replace -f:\n", r.ref(r.name), stable.GetResourceVersion())
			if perr := printObject(w, output, restorable(stable).Object); perr != nil {
				return perr
			}
			msg += "if the abort should stand, write back the version it replaced, printed above (kubectl replace -f FILE)"
		}
		msg += "; if the promotion should stand, nothing is left to do"
	case apierrors.IsConflict(err):
		msg = fmt.Sprintf("%s, but the candidate changed or was replaced after that read, and still exists: check it, then promote again to take its current version, or delete it (%s)", holds, deleteCand)
	default:
		msg = fmt.Sprintf("%s, and the candidate still exists: delete it (%s)", holds, deleteCand)
	}
	return &partialError{msg: msg, cause: err}
}

// restorable is obj as kubectl replace writes it back: without the
// metadata the server sets (a resourceVersion would only conflict).
func restorable(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(out.Object, "metadata", f)
	}
	return out
}

// promoted is the stable source as the promotion writes it: stable (nil
// for a staged creation: a new object named r.name) with the candidate's
// content, every top-level field but fieldsFree, and the candidate's labels
// and annotations, but for the candidate annotations, added to the stable
// source's: a promotion adds and changes labels and annotations, and
// removes none. The stable source's lock and merge annotations stay
// (DESIGN.md, "Staged rollout"): a candidate that doesn't repeat a lock
// must not unlock its source for every namespace at once, a state no stage
// showed; held lists the candidate's lock and merge annotations that differ
// from the stable source's and are not promoted. The candidate's name, uid
// and resourceVersion are never copied; the stable source's resourceVersion
// stays, the update's precondition. kubectl's last-applied-configuration
// stays the stable source's: the candidate's names the candidate.
func (r *rollout) promoted(stable, cand *unstructured.Unstructured) (out *unstructured.Unstructured, held []string, err error) {
	labels, annotations := map[string]string{}, map[string]string{}
	if stable != nil {
		if r.source.GroupResource() == (schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}) {
			before, _, _ := unstructured.NestedFieldNoCopy(stable.Object, "roleRef")
			after, _, _ := unstructured.NestedFieldNoCopy(cand.Object, "roleRef")
			if !apiequality.Semantic.DeepEqual(before, after) {
				return nil, nil, fmt.Errorf("candidate %s changes roleRef, which a RoleBinding can't change: stage a new binding under a new name instead (docs/design.md, \"Staging a change of an immutable field\")", r.ref(cand.GetName()))
			}
		}
		out = stable.DeepCopy()
		for k := range out.Object {
			if !fieldsFree[k] {
				delete(out.Object, k)
			}
		}
		maps.Copy(labels, stable.GetLabels())
		maps.Copy(annotations, stable.GetAnnotations())
	} else {
		out = &unstructured.Unstructured{Object: map[string]any{}}
		out.SetAPIVersion(cand.GetAPIVersion())
		out.SetKind(cand.GetKind())
		out.SetNamespace(r.namespace)
		out.SetName(r.name)
	}
	for k, v := range cand.DeepCopy().Object {
		if !fieldsFree[k] {
			out.Object[k] = v
		}
	}
	maps.Copy(labels, cand.GetLabels())
	for k, v := range cand.GetAnnotations() {
		switch k {
		case v1alpha1.AnnotationCandidateFor, v1alpha1.AnnotationCanarySelector, v1alpha1.AnnotationCanaryClusters, lastApplied:
			continue
		case v1alpha1.AnnotationLocked, v1alpha1.AnnotationMerge:
			if stable != nil {
				if sv, ok := stable.GetAnnotations()[k]; !ok || sv != v {
					held = append(held, k)
				}
				continue
			}
		}
		annotations[k] = v
	}
	sort.Strings(held)
	out.SetLabels(nilIfEmpty(labels)) // nil removes them
	out.SetAnnotations(nilIfEmpty(annotations))
	return out, held, nil
}

// lastApplied is kubectl apply's annotation.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// partialError is a promotion whose first write succeeded and whose second
// failed: msg says what stands and what to do, cause is the failure.
type partialError struct {
	msg   string
	cause error
}

func (e *partialError) Error() string { return e.msg + ": " + e.cause.Error() }
func (e *partialError) Unwrap() error { return e.cause }
