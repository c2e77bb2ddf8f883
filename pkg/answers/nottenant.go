package answers

import (
	"slices"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// notTenant says why the namespace of l is not a tenant ("" for a tenant):
// a global namespace, one the server keeps out, or one that opted out.
func notTenant(r watchmux.Reader, l merge.Lineage) string {
	switch ns := l.Namespace; {
	case l.Tenant || ns == nil:
		return ""
	case slices.Contains(r.GlobalNamespaces(), ns.Name):
		return v1alpha1.NotTenantGlobal
	case ns.Labels[v1alpha1.LabelInherit] == "false" && !r.Policy().Excluded[ns.Name]:
		return v1alpha1.NotTenantOptedOut
	}
	return v1alpha1.NotTenantExcluded
}
