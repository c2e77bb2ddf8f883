package server

import (
	"os"
	"strings"

	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// serviceAccountNamespaceFile holds the namespace of a pod's service
// account, which is the pod's own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// podNamespaceEnv is set from the pod's metadata.namespace by the downward
// API (artifacts/base/deployment.yaml).
const podNamespaceEnv = "POD_NAMESPACE"

// ownNamespace returns the namespace the server runs in: $POD_NAMESPACE,
// else the service account's namespace file, else "" (not in a pod, as with
// make run).
func ownNamespace(getenv func(string) string, readFile func(string) ([]byte, error)) string {
	if ns := strings.TrimSpace(getenv(podNamespaceEnv)); ns != "" {
		return ns
	}
	if b, err := readFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// completePodNamespace fills in PodNamespace from the pod when no flag set it.
func (o *Options) completePodNamespace() {
	if o.PodNamespace == "" {
		o.PodNamespace = ownNamespace(os.Getenv, os.ReadFile)
	}
	if o.PodNamespace != "" {
		klog.InfoS("The server's own namespace is never a tenant", "namespace", o.PodNamespace)
	}
}

// policy is the tenant policy of the options. Never tenants: the global
// namespace, --exclude-namespaces, the kinds' own global namespaces, and
// the server's own namespace, whatever its labels.
func (o *Options) policy() merge.Policy {
	excluded := map[string]bool{}
	for _, ns := range o.ExcludeNamespaces {
		excluded[ns] = true
	}
	// A kind's own global namespace holds global sources: never a tenant.
	for _, ns := range o.config.globalNamespaces() {
		if ns != o.GlobalNamespace {
			excluded[ns] = true
		}
	}
	if o.PodNamespace != "" {
		excluded[o.PodNamespace] = true
	}
	return merge.Policy{GlobalNamespace: o.GlobalNamespace, Excluded: excluded, MaxDepth: o.MaxDepth}
}
