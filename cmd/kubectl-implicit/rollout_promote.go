package main

import (
	"context"
	"fmt"
	"io"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// fieldsFree are the top-level fields a promotion does not copy.
var fieldsFree = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "status": true}

// promote writes the candidate's content into the stable source (creates
// it, for a staged creation), then deletes the candidate. The error of the
// second write is a *partialError: the first one stands.
func (r *rollout) promote(ctx context.Context, w io.Writer, dryRun bool, output string) error {
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
	obj, err := r.promoted(stable, cand)
	if err != nil {
		return err
	}
	did, would := "updated", "updated"
	if stable == nil {
		did, would = "created", "created"
	}
	if dryRun {
		fmt.Fprintf(w, "%s would be %s in %s from candidate %s (dry run):\n", r.ref(r.name), would, r.namespace, cand.GetName())
		if output == "" {
			output = "yaml"
		}
		if err := printObject(w, output, obj.Object); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s (uid %s) would then be deleted in %s (dry run)\n", r.ref(cand.GetName()), cand.GetUID(), r.namespace)
		return nil
	}
	if stable == nil {
		_, err = r.sources().Create(ctx, obj, metav1.CreateOptions{})
	} else {
		_, err = r.sources().Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s %s in %s from candidate %s\n", r.ref(r.name), did, r.namespace, cand.GetName())
	switch err := r.deleteCandidate(ctx, cand, true); {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(w, "%s was already deleted\n", r.ref(cand.GetName()))
	case err != nil:
		hint := "delete it"
		if apierrors.IsConflict(err) {
			hint = "it changed after it was read, so the version promoted may not be its latest: check it, then promote again or delete it"
		}
		return &partialError{
			msg: fmt.Sprintf("the stable source %s in %s is promoted, but the candidate %s still exists: %s (kubectl delete %s %s -n %s)",
				r.ref(r.name), r.namespace, cand.GetName(), hint, r.source.GroupResource(), cand.GetName(), r.namespace),
			cause: err,
		}
	default:
		fmt.Fprintf(w, "%s deleted in %s\n", r.ref(cand.GetName()), r.namespace)
	}
	return nil
}

// promoted is the stable source as the promotion writes it: stable (nil
// for a staged creation: a new object named r.name) with the candidate's
// content, every top-level field but fieldsFree, and the candidate's labels
// and annotations without the candidate annotations. The candidate's name,
// uid and resourceVersion are never copied; the stable source's
// resourceVersion stays, the update's precondition. kubectl's
// last-applied-configuration stays the stable source's: the candidate's
// names the candidate.
func (r *rollout) promoted(stable, cand *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var out *unstructured.Unstructured
	if stable != nil {
		if r.source.GroupResource() == (schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}) {
			before, _, _ := unstructured.NestedFieldNoCopy(stable.Object, "roleRef")
			after, _, _ := unstructured.NestedFieldNoCopy(cand.Object, "roleRef")
			if !apiequality.Semantic.DeepEqual(before, after) {
				return nil, fmt.Errorf("candidate %s changes roleRef, which a RoleBinding can't change: stage a new binding under a new name instead (docs/design.md, \"Staging a change of an immutable field\")", r.ref(cand.GetName()))
			}
		}
		out = stable.DeepCopy()
		for k := range out.Object {
			if !fieldsFree[k] {
				delete(out.Object, k)
			}
		}
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
	out.SetLabels(cand.GetLabels()) // nil removes them
	annotations := cand.GetAnnotations()
	delete(annotations, merge.AnnotationCandidateFor)
	delete(annotations, merge.AnnotationCanarySelector)
	delete(annotations, lastApplied)
	if v, ok := stableAnnotation(stable, lastApplied); ok {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[lastApplied] = v
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	out.SetAnnotations(annotations)
	return out, nil
}

// lastApplied is kubectl apply's annotation.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func stableAnnotation(stable *unstructured.Unstructured, key string) (string, bool) {
	if stable == nil {
		return "", false
	}
	v, ok := stable.GetAnnotations()[key]
	return v, ok
}

// partialError is a promotion whose first write succeeded and whose second
// failed: msg says what stands and what to do, cause is the failure.
type partialError struct {
	msg   string
	cause error
}

func (e *partialError) Error() string { return e.msg + ": " + e.cause.Error() }
func (e *partialError) Unwrap() error { return e.cause }
