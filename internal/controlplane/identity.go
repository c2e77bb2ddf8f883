package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The identity implicit-apiserver runs as in a cluster: the Deployment's
// ServiceAccount, bound to the RBAC artifacts/base (and the chart, which
// test/chart compares with it) ships.
const (
	IdentityNamespace      = "implicit-system"
	IdentityServiceAccount = "implicit-apiserver"
	// IdentityKubeconfig is the file, in the work directory, that
	// authenticates as the ServiceAccount.
	IdentityKubeconfig = "implicit-apiserver-sa.kubeconfig"
)

// identityKinds are the kinds of artifacts/base's objects that make up the
// server's identity and permissions. The rest (Deployment, Service,
// APIService, webhook configurations) a server on loopback gets from
// RegisterAPIService, RegisterParentUID and RegisterGuards.
var identityKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Role": true, "RoleBinding": true,
}

// identityTokenLifetime is how long the ServiceAccount's token is valid: a
// pod's kubelet renews it, nothing renews it here, so it outlasts any test
// run or `make run` session a developer keeps open.
const identityTokenLifetime = 7 * 24 * time.Hour

// ServerIdentity is an aggregated server's own identity on the control
// plane, as ApplyServerIdentity sets it up.
type ServerIdentity struct {
	// Kubeconfig authenticates as the ServiceAccount with a bound token,
	// as a pod's projected token does.
	Kubeconfig string
}

// User is the identity's user name, as kube-apiserver authenticates it.
func (id *ServerIdentity) User() string {
	return "system:serviceaccount:" + IdentityNamespace + ":" + IdentityServiceAccount
}

// Args are the flags that make implicit-apiserver use the identity where a
// pod uses its in-cluster configuration, and know its namespace as the
// Deployment's downward API tells it. Pass them in
// AggregatedServerOptions.Args.
func (id *ServerIdentity) Args() []string { return IdentityArgs(id.Kubeconfig) }

// IdentityArgs are ServerIdentity.Args for the identity's kubeconfig at
// path: <WorkDir>/IdentityKubeconfig for a control plane whose identity
// was set up by ApplyServerIdentity.
func IdentityArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--pod-namespace=" + IdentityNamespace,
	}
}

// ApplyServerIdentity gives implicit-apiserver the identity it has in a
// cluster: it applies the Namespace, ServiceAccount and RBAC objects of the
// kustomization in base (artifacts/base, rendered with kubectl kustomize)
// as they are, then the files in extra as they are (a configured kind's
// ClusterRole, as docs/configuration.md tells users to apply), and writes
// <WorkDir>/IdentityKubeconfig with a token of the ServiceAccount.
//
// One rule is adapted, never widened: the shipped ClusterRole lets the
// server keep its own webhook configuration (named implicit-apiserver)
// current; RegisterGuards names it GuardsConfiguration, so the same verbs
// are granted on that name by a ClusterRole of its own.
//
// The ServiceAccount's aggregated ClusterRole (configured kinds) is filled
// by kube-controller-manager: start it (Options.StartControllerManager)
// when extra holds such roles.
func (cp *ControlPlane) ApplyServerIdentity(ctx context.Context, base string, extra ...string) (*ServerIdentity, error) {
	rendered, _, err := cp.Kubectl(ctx, "kustomize", base)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", base, err)
	}
	keep, err := identityObjects(rendered)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", base, err)
	}
	for _, path := range extra {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		keep = append(keep, string(b))
	}
	if _, _, err := cp.KubectlWithInput(ctx, bytes.NewBufferString(strings.Join(keep, "\n---\n")), "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("applying the shipped RBAC: %w", err)
	}
	cp.logf("applied the identity of implicit-apiserver, ServiceAccount %s/%s, with the RBAC of %s%s", IdentityNamespace, IdentityServiceAccount, base, andFiles(extra))

	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return nil, err
	}
	expiry := int64(identityTokenLifetime.Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(IdentityNamespace).CreateToken(ctx, IdentityServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for %s/%s: %w", IdentityNamespace, IdentityServiceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["implicit-local"] = &clientcmdapi.Cluster{Server: cp.apiServerURL, CertificateAuthorityData: cp.pki.serverCA.certPEM}
	cfg.AuthInfos[IdentityServiceAccount] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["implicit-local"] = &clientcmdapi.Context{Cluster: "implicit-local", AuthInfo: IdentityServiceAccount}
	cfg.CurrentContext = "implicit-local"
	path := filepath.Join(cp.workDir, IdentityKubeconfig)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return nil, fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return &ServerIdentity{Kubeconfig: path}, nil
}

// identityObjects are the documents of the rendered stream that are
// identityKinds, with the ClusterRole and binding of localWebhookRole
// after the shipped ClusterRole they derive from.
func identityObjects(rendered string) ([]string, error) {
	var keep []string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, err
		}
		if !identityKinds[meta.Kind] {
			continue
		}
		keep = append(keep, doc)
		if meta.Kind == "ClusterRole" && meta.Metadata.Name == IdentityServiceAccount {
			local, err := localWebhookRole(doc)
			if err != nil {
				return nil, err
			}
			keep = append(keep, local...)
		}
	}
	return keep, nil
}

// localWebhookRole returns a ClusterRole and its binding to the server's
// ServiceAccount that repeat the shipped ClusterRole's rules on the
// webhook configuration it names (resourceNames implicit-apiserver) for
// GuardsConfiguration, which has another name so that artifacts/base can
// be applied with --dry-run=server beside it. The verbs are the shipped
// ones: a verb the artifacts lack is missing here too.
func localWebhookRole(shipped string) ([]string, error) {
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(shipped), &role); err != nil {
		return nil, err
	}
	local := rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "implicit-apiserver-local-webhook-configuration"},
	}
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "admissionregistration.k8s.io") && slices.Contains(r.ResourceNames, IdentityServiceAccount) {
			r.ResourceNames = []string{GuardsConfiguration}
			local.Rules = append(local.Rules, r)
		}
	}
	if len(local.Rules) == 0 {
		return nil, fmt.Errorf("the shipped ClusterRole %s has no rule on its webhook configuration", role.Name)
	}
	binding := rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: local.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: local.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: IdentityNamespace, Name: IdentityServiceAccount}},
	}
	var out []string
	for _, obj := range []any{local, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

// andFiles is " and a, b" for files, or "".
func andFiles(files []string) string {
	if len(files) == 0 {
		return ""
	}
	return " and " + strings.Join(files, ", ")
}
