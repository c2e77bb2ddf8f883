// Package controlplane starts a real, throw-away Kubernetes control plane on
// 127.0.0.1 for integration tests and for `make run` (hack/local-up).
//
// Start generates a PKI with crypto/x509 (a serving CA, a client CA with a
// system:masters admin, a front-proxy CA for the aggregation layer and a
// service-account key pair), writes an admin kubeconfig, and runs etcd and
// kube-apiserver, optionally kube-controller-manager, from a directory of
// binaries built by hack/build-tools.sh. StartAggregated runs an aggregated
// API server (implicit-apiserver) beside it, and RegisterAPIService puts that
// server behind the aggregation layer the way artifacts/ does in a cluster:
// a Namespace, a Service of type ExternalName pointing at localhost, and the
// APIService v1alpha1.implicit.dev. ApplyServerIdentity gives that server
// the identity it has in a cluster, the ServiceAccount
// implicit-system/implicit-apiserver with exactly the RBAC artifacts/base
// ships, so that it never runs with the admin's credentials.
//
// Everything lives in one work directory:
//
//	admin.kubeconfig      admin credentials (CN=admin, O=system:masters)
//	implicit-apiserver-sa.kubeconfig
//	                      the server's ServiceAccount token (ApplyServerIdentity)
//	kubectl-cache/        the discovery cache of Kubectl's runs
//	pki/                  CAs, serving and client certificates, service-account keys
//	etcd/                 etcd's data, wiped by every Start (none with an
//	                      external etcd)
//	logs/<process>.log    stdout and stderr of each process
//	<name>/certs/         self-signed serving certificates of kube-controller-manager
//	                      and of each aggregated server
//
// # Several clusters on one etcd
//
// Control planes can share one etcd, each cluster under its own key prefix
// (a hub and its member clusters, say): start the first as usual, then the
// others with Options.ExternalEtcdURL set to its EtcdURL and an
// Options.EtcdPrefix each (/member-1, /member-2, ...; the first keeps
// kube-apiserver's /registry).
// Each keeps its own PKI, work directory, admin kubeconfig and, if asked,
// kube-controller-manager; none sees another's objects. Stop the sharing
// control planes before the one that runs the etcd.
//
// StopKubeAPIServer and StartKubeAPIServer take a cluster's API away and
// bring it back on the same port with the same certificates, as in an
// outage: everything else keeps running, and clients (kubeconfigs,
// kube-controller-manager, aggregated servers) reconnect.
//
// # Processes
//
// Every process runs in its own process group, and on Linux is also killed
// when the process that started it dies (Pdeathsig). It stops when the
// context given to Start (or to StartAggregated) is cancelled, or when Stop is
// called: SIGTERM to the group first, SIGKILL to the group after
// Options.StopTimeout. A failure while starting or waiting reports the last
// lines of the process's log; LogTail gives tests the same on their own
// failures.
//
// kube-apiserver calls webhooks with a webhook client certificate of its own
// CA (webhookclient.go): in the authorization webhook's kubeconfig
// (PrepareAuthorizationWebhook) and in an --admission-control-config-file.
// WebhookServerArgs are the flags that make an implicit-apiserver require it.
//
// The package builds on the standard library (os/exec, crypto/x509), client-go
// and the kube-aggregator clientset. It reuses none of k8s.io/kubernetes's
// test frameworks: the product's module must not require k8s.io/kubernetes,
// and the binaries are the real thing, built from the Go module proxy.
//
// The exported types are concrete structs with unexported fields, in the
// manner of controller-runtime's envtest.Environment: a caller holds one
// control plane and needs its methods, not an interface to substitute.
//
// It imports of this module only internal/selfsign and
// pkg/admission/webhookconfig (the webhook paths of the admission
// configuration), and must not import the server's wiring (pkg/apiserver,
// pkg/cmd/server): the server runs as a process of its own.
package controlplane
