package merge

import "github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"

// The labels and annotations of DESIGN.md are said once, in
// pkg/apis/implicit/v1alpha1 (names.go), where their meaning is documented.
// The names below are aliases of those, kept so that this package's code and
// pkg/admission read them unchanged; new code imports v1alpha1 for them.
const (
	Prefix                          = v1alpha1.Prefix
	LabelParent                     = v1alpha1.LabelParent
	AnnotationParentUID             = v1alpha1.AnnotationParentUID
	LabelInherit                    = v1alpha1.LabelInherit
	AnnotationExclude               = v1alpha1.AnnotationExclude
	AnnotationLocked                = v1alpha1.AnnotationLocked
	AnnotationMerge                 = v1alpha1.AnnotationMerge
	AnnotationCandidateFor          = v1alpha1.AnnotationCandidateFor
	AnnotationCanarySelector        = v1alpha1.AnnotationCanarySelector
	LabelStage                      = v1alpha1.LabelStage
	LabelMaterialized               = v1alpha1.LabelMaterialized
	LabelScope                      = v1alpha1.LabelScope
	LabelSourceNamespace            = v1alpha1.LabelSourceNamespace
	AnnotationSourceUID             = v1alpha1.AnnotationSourceUID
	AnnotationSourceResourceVersion = v1alpha1.AnnotationSourceResourceVersion
	AnnotationSourceCluster         = v1alpha1.AnnotationSourceCluster
	AnnotationSourceStaleSince      = v1alpha1.AnnotationSourceStaleSince
	AnnotationOverlays              = v1alpha1.AnnotationOverlays
	AnnotationConflict              = v1alpha1.AnnotationConflict
	AnnotationCandidate             = v1alpha1.AnnotationCandidate
)

// ProvenanceLabels is an alias of v1alpha1.ProvenanceLabels.
var ProvenanceLabels = v1alpha1.ProvenanceLabels

// ProvenanceAnnotations is an alias of v1alpha1.ProvenanceAnnotations.
var ProvenanceAnnotations = v1alpha1.ProvenanceAnnotations

// IsMaterialized reports whether labels mark a materialized copy; it forwards
// to v1alpha1.IsMaterialized.
func IsMaterialized(labels map[string]string) bool { return v1alpha1.IsMaterialized(labels) }
