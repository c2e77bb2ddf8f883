// Package kinds describes the served kinds: one Kind holds a kind's source,
// merge strategy, global namespace and delivery, and how its view presents
// items. It lists the built-in kinds and validates a configured one. It is a
// leaf: finding kinds on the host and serving them is pkg/kindcontroller's.
//
// It imports pkg/merge and pkg/apis/implicit/v1alpha1 only, and must not
// import anything that serves (pkg/watchmux, pkg/views, pkg/registry,
// pkg/kindcontroller).
package kinds
