package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Exceptions answers which exceptions namespaces declare: *answers.Answers.
type Exceptions interface {
	// Exceptions returns those declared on namespace and its ancestors,
	// every namespace's for "".
	Exceptions(namespace string) ([]v1alpha1.Exception, error)
}

// ExceptionStorage serves exceptions.implicit.dev, read-only: the entries
// of the namespaces' implicit.dev/exceptions annotations with their state.
// A list in a namespace holds its own exceptions and its ancestors' (what
// it inherits, each in the namespace that declares it); a list of all
// namespaces holds every one. Who may list is RBAC's to say (aggregated
// into view, as hierarchies): a namespace's lineage is what its views name.
type ExceptionStorage struct {
	src Exceptions
	now func() time.Time // the table's time left; time.Now
}

var (
	_ rest.Storage              = &ExceptionStorage{}
	_ rest.Getter               = &ExceptionStorage{}
	_ rest.Lister               = &ExceptionStorage{}
	_ rest.Scoper               = &ExceptionStorage{}
	_ rest.KindProvider         = &ExceptionStorage{}
	_ rest.SingularNameProvider = &ExceptionStorage{}
	_ rest.TableConvertor       = &ExceptionStorage{}
)

// NewExceptionStorage returns the storage of exceptions, read from src.
func NewExceptionStorage(src Exceptions) *ExceptionStorage {
	return &ExceptionStorage{src: src, now: time.Now}
}

// New implements rest.Storage.
func (s *ExceptionStorage) New() runtime.Object { return &v1alpha1.Exception{} }

// Destroy implements rest.Storage.
func (s *ExceptionStorage) Destroy() {}

// NewList implements rest.Lister.
func (s *ExceptionStorage) NewList() runtime.Object { return &v1alpha1.ExceptionList{} }

// NamespaceScoped implements rest.Scoper.
func (s *ExceptionStorage) NamespaceScoped() bool { return true }

// Kind implements rest.KindProvider.
func (s *ExceptionStorage) Kind() string { return "Exception" }

// GetSingularName implements rest.SingularNameProvider.
func (s *ExceptionStorage) GetSingularName() string { return "exception" }

// Get implements rest.Getter: the exception of that name the namespace
// itself declares.
func (s *ExceptionStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	all, err := s.src.Exceptions(ns)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Namespace == ns && all[i].Name == name {
			return &all[i], nil
		}
	}
	return nil, apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourceExceptions).GroupResource(), name)
}

// List implements rest.Lister: the namespace's exceptions and its
// ancestors', or every namespace's without one; field selectors on
// metadata.name and metadata.namespace.
func (s *ExceptionStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	all, err := s.src.Exceptions(ns)
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.ExceptionList{}
	for _, e := range all {
		if opts != nil && opts.FieldSelector != nil && !opts.FieldSelector.Matches(fields.Set{"metadata.name": e.Name, "metadata.namespace": e.Namespace}) {
			continue
		}
		out.Items = append(out.Items, e)
	}
	return out, nil
}

// ConvertToTable implements rest.TableConvertor: NAMESPACE (kubectl adds
// it with -A; the declaring namespace is a column of its own here, since a
// namespace's list holds its ancestors' too), NAME, EXCLUDES, STATE,
// REASON, REQUESTER, APPROVER, ENDS.
func (s *ExceptionStorage) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if to, ok := opts.(*metav1.TableOptions); !ok || !to.NoHeaders {
		table.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Declared In", Type: "string", Description: "The namespace that declares the exception (the list of a namespace holds its ancestors' too)."},
			{Name: "Name", Type: "string", Format: "name", Description: "The exception's name."},
			{Name: "Excludes", Type: "string", Description: "The inherited items it excepts."},
			{Name: "State", Type: "string", Description: "Requested, Active or Expired."},
			{Name: "Reason", Type: "string", Description: "Why, as its requester wrote it."},
			{Name: "Requester", Type: "string", Description: "Who wrote this version."},
			{Name: "Approver", Type: "string", Description: "Who approved this version, if anyone."},
			{Name: "Ends", Type: "string", Description: "Time left until its end; - without one."},
			{Name: "Needs Approval", Type: "string", Priority: 1, Description: "Items whose sources require an approval this version lacks."},
			{Name: "Digest", Type: "string", Priority: 1, Description: "This version's digest, which an approval names."},
		}
	}
	var items []v1alpha1.Exception
	switch o := obj.(type) {
	case *v1alpha1.Exception:
		items = []v1alpha1.Exception{*o}
	case *v1alpha1.ExceptionList:
		items = o.Items
	default:
		return nil, fmt.Errorf("table of exceptions: unexpected %T", obj)
	}
	now := s.now()
	for i := range items {
		e := &items[i]
		approver := ""
		if e.Status.Approval != nil {
			approver = e.Status.Approval.By
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells: []any{e.Namespace, e.Name, strings.Join(e.Spec.Exclude, ","), e.Status.State, truncate(e.Spec.Reason, 60),
				e.Spec.RequestedBy, orNone(approver), e.TimeLeft(now), orNone(strings.Join(e.Status.NeedsApproval, ",")), e.Status.Digest},
			Object: runtime.RawExtension{Object: e},
		})
	}
	return table, nil
}
