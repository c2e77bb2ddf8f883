// Command kubectl-implicit is the kubectl plugin of implicit-apiserver:
// `kubectl implicit tree|why|reach|diff|rollout`, answered by the server's
// hierarchies, explanations and previews (implicit.dev/v1alpha1) and its
// views; rollout also follows, promotes and aborts a source's candidate. Put it on PATH, or install it with krew (hack/krew).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
