package registry_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// fakeAuthorizer allows the attributes it lists, as "verb group/resource namespace/name",
// and records what it was asked.
type fakeAuthorizer struct {
	allow map[string]bool
	asked []string
}

func (a *fakeAuthorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	key := fmt.Sprintf("%s %s %s/%s %s/%s", attrs.GetUser().GetName(), attrs.GetVerb(), attrs.GetAPIGroup(), attrs.GetResource(),
		attrs.GetNamespace(), attrs.GetName())
	a.asked = append(a.asked, key)
	if a.allow[key] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

// asUser is a request context of user in namespace.
func asUser(name, namespace string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: name})
}

// fakeQuestions answers from fixed data.
type fakeQuestions struct {
	hierarchies map[string]v1alpha1.HierarchyStatus
	served      map[string]bool
	sources     map[string]bool // "resource/namespace/name"
	// previewed records the last preview's arguments.
	previewed *previewCall
	// preview is the preview's answer, if set.
	preview *v1alpha1.PreviewStatus
}

type previewCall struct {
	resource, namespace, name string
	obj                       runtime.Object
}

func (f *fakeQuestions) Hierarchy(ns string) (v1alpha1.HierarchyStatus, bool, error) {
	h, ok := f.hierarchies[ns]
	return h, ok, nil
}

func (f *fakeQuestions) Hierarchies() (map[string]v1alpha1.HierarchyStatus, error) {
	return f.hierarchies, nil
}

func (f *fakeQuestions) Serves(resource string) bool { return f.served[resource] }

func (f *fakeQuestions) Explain(resource, namespace, name string) (v1alpha1.ExplanationStatus, error) {
	return v1alpha1.ExplanationStatus{Summary: resource + "/" + name + " in " + namespace}, nil
}

func (f *fakeQuestions) SourceExists(resource, namespace, name string) (bool, error) {
	return f.sources[resource+"/"+namespace+"/"+name], nil
}

func (f *fakeQuestions) Preview(resource, namespace, name string, obj runtime.Object) (v1alpha1.PreviewStatus, error) {
	f.previewed = &previewCall{resource, namespace, name, obj}
	if f.preview != nil {
		return *f.preview, nil
	}
	return v1alpha1.PreviewStatus{Name: name, Reached: 1}, nil
}

func (f *fakeQuestions) EmptyObject(string) runtime.Object { return &rbacv1.RoleBinding{} }

func (f *fakeQuestions) PreviewNamespace(resource string, ns *corev1.Namespace) (v1alpha1.PreviewStatus, error) {
	f.previewed = &previewCall{resource: resource, namespace: ns.Name, name: ns.Name, obj: ns}
	if f.preview != nil {
		return *f.preview, nil
	}
	return v1alpha1.PreviewStatus{Name: ns.Name, Operation: v1alpha1.OperationUpdate}, nil
}
