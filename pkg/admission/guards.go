package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Authorizer asks the host cluster whether user may do attrs.
type Authorizer interface {
	Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error)
}

// LockedSources is what every source guard asks of a source as the mirror
// holds it: whether it is locked (a request that carries no annotations of
// its own, a scale subresource, is judged by it).
type LockedSources interface {
	SourceLocked(resource, namespace, name string) (bool, error)
}

// UnlockVerb is the custom RBAC verb that allows changing a locked source.
const UnlockVerb = "unlock"

// Guards decide admission requests.
type Guards struct {
	mirror Mirror
	authz  Authorizer
	// hub answers access questions on the sources of hub cluster
	// hubCluster (nil: no hub).
	hub        Authorizer
	hubCluster string
	// fleet, on a hub, is the members' share of a global source's change
	// (fanout.go); nil: this cluster only.
	fleet FleetIndex
	// served maps a source group/resource to its view resource name; mu
	// guards it, as kinds are served at run time (Serve).
	mu     sync.RWMutex
	served map[schema.GroupResource]string
	// globals are the namespaces of global sources: the policy's, and those
	// of kinds configured with their own.
	globals map[string]bool

	// namespaces looks parents up for their uid (parent.go); trusted are
	// the users whose parent-uid annotations are taken as they are.
	namespaces NamespaceGetter
	trusted    map[string]bool

	// hierarchy serializes the parent guard's decisions and holds the
	// changes it admitted that the index may not show yet (hierarchy.go).
	hierarchy assumptions
	// recent holds the locks and candidates the source guards admitted
	// that the mirror may not show yet (recent.go).
	recent *recent
	// shared is the record the replicas' decisions take turns on
	// (shared.go); nil: this replica decides with its own memory alone.
	shared *sharedTurns
	// mirrorWait is how long a namespace deletion waits for the mirror to
	// show the namespace it deletes (namespace_deletions.go).
	mirrorWait time.Duration

	// identity is the server's own user, the writer of materialized
	// copies; materialized the view resources delivered as copies
	// (materialized.go). mu guards both.
	identity     string
	materialized map[string]bool

	// clock tells when an exception's end is (exception_specs.go).
	clock clock.PassiveClock
}

func (g *Guards) isGlobal(namespace string) bool {
	return g.globals[namespace]
}

// Serve guards the sources of gr from now on: the kind controller serves
// kinds at run time.
func (g *Guards) Serve(gr schema.GroupResource) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.served[gr] = gr.Resource
}

// decision is a guard's answer: allowed or a denial, and warnings.
type decision struct {
	allowed  bool
	code     int32
	message  string
	warnings []string
	// patch is a JSON patch of the object, from a mutating guard.
	patch []byte
	// unavailable: the guard can't decide yet (answer 503: the webhook's
	// failure policy applies).
	unavailable error
}

func allow(warnings ...string) decision { return decision{allowed: true, warnings: warnings} }

func deny(format string, args ...any) decision {
	return decision{code: http.StatusForbidden, message: fmt.Sprintf(format, args...)}
}

func unavailable(err error) decision { return decision{unavailable: err} }

// source is the object of a request, decoded as far as the guards need.
type source struct {
	gr        schema.GroupResource
	resource  string // the view's resource
	namespace string
	name      string
	// subresource is the request's: for status the objects are the
	// source's, for scale they are autoscaling Scales.
	subresource string
	old, obj    *unstructured.Unstructured // nil when absent
}

// source decodes req's source object; false when req is not of a served
// resource or is of a subresource other than those in subresources.
func (g *Guards) source(req *admissionv1.AdmissionRequest, subresources ...string) (source, bool, error) {
	gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	g.mu.RLock()
	resource, ok := g.served[gr]
	g.mu.RUnlock()
	if !ok || (req.SubResource != "" && !slices.Contains(subresources, req.SubResource)) {
		return source{}, false, nil
	}
	s := source{gr: gr, resource: resource, namespace: req.Namespace, name: req.Name, subresource: req.SubResource}
	var err error
	if s.old, err = decode(req.OldObject); err != nil {
		return s, true, fmt.Errorf("decoding the old object: %w", err)
	}
	if s.obj, err = decode(req.Object); err != nil {
		return s, true, fmt.Errorf("decoding the object: %w", err)
	}
	// A deletecollection admits each item with an empty request name.
	switch {
	case s.name != "":
	case s.obj != nil:
		s.name = s.obj.GetName()
	case s.old != nil:
		s.name = s.old.GetName()
	}
	return s, true, nil
}

func decode(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw.Raw, &u.Object); err != nil {
		return nil, err
	}
	return u, nil
}

func locked(u *unstructured.Unstructured) bool {
	return u != nil && merge.IsLocked(u.GetAnnotations())
}

func (s source) String() string {
	return fmt.Sprintf("%s %q in namespace %q", s.gr, s.name, s.namespace)
}

// locked reports whether the request's source was or will be locked. A
// subresource request is judged by the source as the index has it too: a
// Scale carries none of the source's annotations, and a status update may
// drop them from what it sends.
func (g *Guards) locked(s source) (wasLocked, isLocked bool, err error) {
	if s.subresource == webhookconfig.SubresourceScale {
		wasLocked, err = g.mirror.Sources.SourceLocked(s.resource, s.namespace, s.name)
		return wasLocked, wasLocked, err
	}
	wasLocked, isLocked = locked(s.old), locked(s.obj)
	if s.subresource != "" && !wasLocked {
		wasLocked, err = g.mirror.Sources.SourceLocked(s.resource, s.namespace, s.name)
	}
	return wasLocked, isLocked, err
}
