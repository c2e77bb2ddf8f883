// Package server holds implicit-apiserver's command: Options (flags in
// named sets, Complete, Validate with aggregated errors) turn into an
// apiserver.Config, which is completed and run.
package server
