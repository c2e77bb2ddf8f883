package admission

// Test-only names: the constants and messages the tests of package
// admission_test check, unexported in the package itself.

const (
	PathCandidates         = pathCandidates
	PathFanout             = pathFanout
	PathLocks              = pathLocks
	PathMaterialized       = pathMaterialized
	PathNamespaceDeletions = pathNamespaceDeletions
	PathOwnCopy            = pathOwnCopy
	PathParentUID          = pathParentUID
	PathParents            = pathParents
	PathShadows            = pathShadows
	PathStages             = pathStages
	StageVerb              = stageVerb
)

var (
	GuardedSubresources     = guardedSubresources
	CandidateDeletedWarning = candidateDeletedWarning
	CandidateWarning        = candidateWarning
	DeletionCondition       = deletionCondition
	FanoutCondition         = fanoutCondition
	MaterializedWarning     = materializedWarning
	ShadowCondition         = shadowCondition
	Warning                 = warning
)
