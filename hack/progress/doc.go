// Command progress runs a long command (a first build) and says on stderr
// what it is doing and why before it starts, every --every while it runs,
// and when it ends, so that a first `make run` is never silent for
// minutes. The command's own output and exit code pass through.
//
//	go run ./hack/progress --what="building kube-apiserver v1.37.1" --why="make run's control plane" \
//		--expect="about 8 minutes on 2 cores" -- go build -o ... k8s.io/kubernetes/cmd/kube-apiserver
//
// It imports the standard library only, and nothing of this module, so that
// it runs before anything else is built.
package main
