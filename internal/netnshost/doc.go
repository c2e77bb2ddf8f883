// Package netnshost gives tests that run several implicit-apiserver
// replicas a host of their own for each: a network namespace joined to the
// root namespace by a veth pair. test/replicas and test/robustness share it
// (the same names, addresses and lock), so they take turns on one machine
// instead of removing each other's namespaces.
//
// It builds on the standard library, client-go's clientcmd and the ip(8)
// command, and imports nothing of this module; only tests import it.
package netnshost
