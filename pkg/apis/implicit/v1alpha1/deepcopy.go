package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies: what deepcopy-gen would write for these types.

// DeepCopyInto copies in into out.
func (in *Hierarchy) DeepCopyInto(out *Hierarchy) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *Hierarchy) DeepCopy() *Hierarchy {
	if in == nil {
		return nil
	}
	out := new(Hierarchy)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Hierarchy) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *HierarchyStatus) DeepCopyInto(out *HierarchyStatus) {
	*out = *in
	out.Ancestors = slices.Clone(in.Ancestors)
	out.Children = slices.Clone(in.Children)
	if in.Problems != nil {
		out.Problems = make([]HierarchyProblem, len(in.Problems))
		for i := range in.Problems {
			in.Problems[i].DeepCopyInto(&out.Problems[i])
		}
	}
}

// DeepCopyInto copies in into out.
func (in *HierarchyProblem) DeepCopyInto(out *HierarchyProblem) {
	*out = *in
	out.Cycle = slices.Clone(in.Cycle)
}

// DeepCopyInto copies in into out.
func (in *HierarchyList) DeepCopyInto(out *HierarchyList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Hierarchy, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *HierarchyList) DeepCopy() *HierarchyList {
	if in == nil {
		return nil
	}
	out := new(HierarchyList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *HierarchyList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *Explanation) DeepCopyInto(out *Explanation) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *Explanation) DeepCopy() *Explanation {
	if in == nil {
		return nil
	}
	out := new(Explanation)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Explanation) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *ExplanationStatus) DeepCopyInto(out *ExplanationStatus) {
	*out = *in
	if in.Winner != nil {
		w := *in.Winner
		out.Winner = &w
	}
	out.Overlays = slices.Clone(in.Overlays)
	out.Conflicts = slices.Clone(in.Conflicts)
	if in.Scopes != nil {
		out.Scopes = make([]ScopeExplanation, len(in.Scopes))
		for i := range in.Scopes {
			in.Scopes[i].DeepCopyInto(&out.Scopes[i])
		}
	}
}

// DeepCopyInto copies in into out.
func (in *ScopeExplanation) DeepCopyInto(out *ScopeExplanation) {
	*out = *in
	if in.Item != nil {
		it := *in.Item
		out.Item = &it
	}
	if in.Exclusions != nil {
		out.Exclusions = make([]ExclusionEffect, len(in.Exclusions))
		for i, e := range in.Exclusions {
			out.Exclusions[i] = e
			if e.Item != nil {
				it := *e.Item
				out.Exclusions[i].Item = &it
			}
		}
	}
}

// DeepCopyInto copies in into out.
func (in *Preview) DeepCopyInto(out *Preview) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	if in.Spec.Object != nil {
		out.Spec.Object = in.Spec.Object.DeepCopy()
	}
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *Preview) DeepCopy() *Preview {
	if in == nil {
		return nil
	}
	out := new(Preview)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Preview) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *PreviewStatus) DeepCopyInto(out *PreviewStatus) {
	*out = *in
	if in.Changed != nil {
		out.Changed = make([]NamespaceChange, len(in.Changed))
		for i := range in.Changed {
			in.Changed[i].DeepCopyInto(&out.Changed[i])
		}
	}
	out.Unchanged = slices.Clone(in.Unchanged)
}

// DeepCopyInto copies in into out.
func (in *NamespaceChange) DeepCopyInto(out *NamespaceChange) {
	*out = *in
	out.Before = in.Before.DeepCopy()
	out.After = in.After.DeepCopy()
}

// DeepCopy returns a deep copy.
func (in *ItemSummary) DeepCopy() *ItemSummary {
	if in == nil {
		return nil
	}
	out := *in
	out.Overlays = slices.Clone(in.Overlays)
	if in.Content != nil {
		out.Content = in.Content.DeepCopy()
	}
	return &out
}

// DeepCopyInto copies in into out.
func (in *RulesReview) DeepCopyInto(out *RulesReview) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Groups = slices.Clone(in.Spec.Groups)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *RulesReview) DeepCopy() *RulesReview {
	if in == nil {
		return nil
	}
	out := new(RulesReview)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *RulesReview) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *RulesReviewStatus) DeepCopyInto(out *RulesReviewStatus) {
	*out = *in
	out.Groups = slices.Clone(in.Groups)
	if in.Rules != nil {
		out.Rules = make([]InheritedRule, len(in.Rules))
		for i := range in.Rules {
			in.Rules[i].DeepCopyInto(&out.Rules[i])
		}
	}
}

// DeepCopyInto copies in into out.
func (in *InheritedRule) DeepCopyInto(out *InheritedRule) {
	*out = *in
	out.Verbs = slices.Clone(in.Verbs)
	out.APIGroups = slices.Clone(in.APIGroups)
	out.Resources = slices.Clone(in.Resources)
	out.ResourceNames = slices.Clone(in.ResourceNames)
}
