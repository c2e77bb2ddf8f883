// Command implicit-apiserver serves implicit views of RoleBindings, Roles,
// NetworkPolicies and other configured kinds as an aggregated API server.
// `implicit-apiserver check` is the chart's helm test (check.go).
//
// main.go is only the signal context and pkg/cmd/server's cobra command: the
// options and their validation are pkg/cmd/server's, the wiring
// pkg/apiserver's. It imports pkg/cmd/server and nothing else of this
// module; check.go talks to the cluster through client-go alone.
package main
