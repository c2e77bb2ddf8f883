// Package accessreview asks the host cluster the guards' access questions
// (SubjectAccessReviews) so that no tenant can starve the others: a short
// decision cache, a cap on the questions one admission review may ask, and
// a fair queue in front of a client of their own. It builds on any
// Authorizer (pkg/admission's SARAuthorizer) and on client-go's clock;
// docs/design.md ("Guards") and docs/benchmarks.md say why and how much.
//
// It imports nothing of this module (the Authorizer it wraps is declared
// here), so that the guards and pkg/watchmux's fair turns of past states can
// use it; it must not import pkg/admission.
package accessreview
