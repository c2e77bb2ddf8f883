// Package server holds implicit-apiserver's command: Options (flags in
// named sets, Complete, Validate with aggregated errors) turn into an
// apiserver.Config, which is completed and run.
//
// It is the only importer of pkg/apiserver, and nothing but cmd/implicit-
// apiserver (and the tests that build its flags) may import it.
package server
