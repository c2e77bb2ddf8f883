// Command etcd is etcd's own main, built from the Go module proxy for the
// local control plane used by make run and the integration tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
