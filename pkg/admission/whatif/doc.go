// Package whatif owns the guards' what-if index: one concrete type, Index,
// that answers every question the admission guards ask of the watch
// multiplexer's mirror, as it is and as it would be with the changes they
// admitted a moment ago assumed (Assumed, Pending), each inside one Read,
// changing nothing. It builds on pkg/merge, pkg/watchmux and
// pkg/admission/webhookconfig (the MatchInputs it gives ConditionSync) and
// must not import pkg/admission: the guards declare the few questions each
// asks (admission.Mirror).
package whatif
