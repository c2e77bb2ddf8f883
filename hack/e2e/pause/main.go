// Command pause is the sandbox ("pause") image's program for make e2e: no
// image can be pulled here, so hack/e2e builds this static binary and
// packages it with hack/image. It holds the pod's namespaces open and exits
// on SIGINT or SIGTERM, as the upstream pause container does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
