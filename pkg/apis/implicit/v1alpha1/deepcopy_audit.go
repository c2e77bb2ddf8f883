package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies of the audit's kinds: what deepcopy-gen would write.

// DeepCopyInto copies in into out.
func (in *CandidateAudit) DeepCopyInto(out *CandidateAudit) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy.
func (in *CandidateAudit) DeepCopy() *CandidateAudit {
	if in == nil {
		return nil
	}
	out := new(CandidateAudit)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *CandidateAudit) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *CandidateAuditStatus) DeepCopyInto(out *CandidateAuditStatus) {
	*out = *in
	in.ReplicaStartTime.DeepCopyInto(&out.ReplicaStartTime)
	if in.Candidates != nil {
		out.Candidates = make([]CandidateAuditRecord, len(in.Candidates))
		for i := range in.Candidates {
			in.Candidates[i].DeepCopyInto(&out.Candidates[i])
		}
	}
}

// DeepCopyInto copies in into out.
func (in *CandidateAuditRecord) DeepCopyInto(out *CandidateAuditRecord) {
	*out = *in
	if in.Since != nil {
		out.Since = in.Since.DeepCopy()
	}
	out.Keys = slices.Clone(in.Keys)
	if in.Samples != nil {
		out.Samples = make([]AuditSample, len(in.Samples))
		for i := range in.Samples {
			in.Samples[i].DeepCopyInto(&out.Samples[i])
		}
	}
}

// DeepCopyInto copies in into out.
func (in *AuditSample) DeepCopyInto(out *AuditSample) {
	*out = *in
	in.Time.DeepCopyInto(&out.Time)
	out.Groups = slices.Clone(in.Groups)
}
