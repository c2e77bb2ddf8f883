package webhookconfig

// Test-only names: the conditions the tests of package webhookconfig_test
// check, unexported in the package itself.
var (
	DeletionCondition = deletionCondition
	FanoutCondition   = fanoutCondition
	ShadowCondition   = shadowCondition
)
