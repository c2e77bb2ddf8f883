// Package renamedmetric keeps a renamed metric's old name for one release:
// each pair is registered under both names and written through both, and
// the old one's HELP says it is deprecated and what replaced it, as
// component-base marks a metric past its DeprecatedVersion. (component-base's
// DeprecatedVersion itself compares with component-base's own version, not
// implicit-apiserver's, so it can't say when our names go.)
//
// It builds on k8s.io/component-base/metrics and must not import anything of
// this module: the packages that own metrics (pkg/watchmux) import it.
package renamedmetric
