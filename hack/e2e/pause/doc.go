// Command pause is the sandbox ("pause") image's program for make e2e: no
// image can be pulled here, so hack/e2e builds this static binary and
// packages it with hack/image. It holds the pod's namespaces open and exits
// on SIGINT or SIGTERM, as the upstream pause container does.
//
// It imports the standard library only, so that it builds as a small static
// binary, and nothing of this module.
package main
