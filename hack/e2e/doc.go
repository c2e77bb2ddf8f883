// Command e2e is `make e2e`: a one-node cluster on this machine (etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler from
// internal/controlplane and hack/build-tools.sh, a kubelet on Debian's containerd
// and runc), the locally built image imported into containerd, `helm install`
// of charts/implicit-apiserver, and then the checks a cluster operator makes:
// the pods Ready, the APIService Available, the chart's helm test, a tenant reading a view through
// the aggregator, and an admission webhook answering from the pods.
//
// Nothing is pulled: the sandbox ("pause") image is hack/e2e/pause, packaged
// by hack/image. It needs root (containerd, kubelet, iptables) and stops
// everything it started on exit; --hold keeps the cluster up until Ctrl-C.
//
//	go run ./hack/e2e --bin-dir=$(hack/build-tools.sh etcd kube-apiserver \
//	    kube-controller-manager kube-scheduler kubelet helm) \
//	    --image=_output/image/implicit-apiserver.tar --image-tag=$(git describe) \
//	    --pause-image=_output/e2e/pause.tar
//
// It drives the built image and chart as an operator would, through
// internal/controlplane and kubectl, and must not import the server's own
// packages (pkg/...): what it checks is what a cluster sees.
package main
