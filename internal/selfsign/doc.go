// Package selfsign makes the self-signed serving certificates of
// implicit-apiserver (pkg/cmd/server, without --tls-cert-file) and of the
// test control plane (internal/controlplane): a CA and a serving
// certificate it signed, both with ECDSA P-256 keys, built on crypto/x509.
//
// It imports the standard library only and nothing of this module, so that
// the server and the tests share it without importing each other.
package selfsign
