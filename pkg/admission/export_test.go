package admission

// Test-only names: the constants and messages the tests of package
// admission_test check, unexported in the package itself.

const StageVerb = stageVerb

var (
	CandidateDeletedWarning = candidateDeletedWarning
	CandidateWarning        = candidateWarning
	MaterializedWarning     = materializedWarning
	Warning                 = warning
)
