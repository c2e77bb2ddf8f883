// Package review forwards to pkg/webhook, where the review plumbing of the
// webhooks moved (issue 41). It is kept only so that pkg/admission, being
// restructured apart, builds unchanged; new code imports pkg/webhook, and
// this package goes once pkg/admission does.
//
// It imports pkg/webhook only, and nothing outside pkg/admission may import
// it.
package review
