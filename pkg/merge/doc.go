// Package merge holds implicit-apiserver's merge semantics, free of I/O: which
// namespaces are tenants, how a namespace's ancestors are resolved from the
// implicit.dev/parent label (nearest first, cycles and missing parents
// reported, never followed), and how the items of the global scope, the
// ancestors and the namespace itself combine into one view: precedence,
// exclusions and locks.
//
// It knows nothing of HTTP, informers or concrete Kubernetes kinds: callers
// pass namespaces and source items in, and get back which source wins each
// name, at which scope, and which lower-scope attempts a lock blocked.
// The Overlay strategy plugs in at Strategy; only Replace is implemented here.
package merge
