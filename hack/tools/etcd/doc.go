// Command etcd is etcd's own main, built from the Go module proxy for the
// local control plane used by make run and the integration tests.
//
// It is etcd's code only: it must not import anything of this module.
package main
