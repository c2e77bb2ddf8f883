// Package kindcontroller serves every configured kind: the one path by which
// a kind, built in or found on the host later, feeds the watch multiplexer
// and has its view (pkg/views) and storage (pkg/registry) served by the
// group (pkg/servedgroup). It finds the kinds that are not built in on the
// host cluster, polling until they exist (discovery, OpenAPI v3 through a
// schema cache, the CustomResourceDefinition's printer columns), and picks
// up a change of their schema or columns without a restart.
//
// It builds on pkg/sourcefeed, pkg/watchmux, pkg/views, pkg/registry and
// pkg/servedgroup, and must not import pkg/apiserver, pkg/admission or
// pkg/authz: the wiring tells the guards of each kind served
// (Config.OnServe).
package kindcontroller
