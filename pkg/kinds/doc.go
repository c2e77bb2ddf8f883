// Package kinds owns the served kinds: one KindConfig describes each (its
// source, merge strategy, global namespace, delivery, and whether it is a
// built-in kind served from its Go type or one served from unstructured
// objects), and DefaultKinds lists the built-in ones. It finds the kinds
// that are not built in on the host cluster, polling until they exist
// (discovery, OpenAPI v3 through a schema cache, the
// CustomResourceDefinition's printer columns). Its Controller is the one
// path by which every kind, built in or found later, feeds the watch
// multiplexer and has its view served by a Group (pkg/servedgroup); the
// view's REST storage is pkg/registry's.
package kinds
