// Package outage measures, through kube-apiserver, what a cluster sees while
// implicit-apiserver is paused (SIGSTOP: the process holds its connections
// and answers nothing, as a hung or partitioned pod does) and after it is
// resumed (SIGCONT). docs/operations.md, "While implicit-apiserver is down",
// quotes the FIGURES lines this test prints.
//
// The package has no code outside its test; it talks to the real processes
// through kube-apiserver and internal/controlplane and imports none of the
// server's packages.
package outage
