package servedgroup

import (
	"sync"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// HostSchemas holds the OpenAPI schemas of the source kinds, as the host
// cluster publishes them, keyed by model name (io.k8s.api.rbac.v1.RoleBinding).
// A view has its source's schema, so kubectl explain and clients see the same
// fields under implicit.dev.
type HostSchemas map[string]*spec.Schema

// schemaStore holds the host's schemas of every served kind, for the
// group's OpenAPI documents, and the view kind of each source model.
type schemaStore struct {
	mu      sync.Mutex
	static  HostSchemas
	byKind  map[string]HostSchemas
	models  map[string]string // source model -> view kind, for dynamic kinds
	byModel map[string]string // resource -> model
}

func newSchemaStore(static HostSchemas) *schemaStore {
	return &schemaStore{static: static, byKind: map[string]HostSchemas{}, models: map[string]string{}, byModel: map[string]string{}}
}

func (s *schemaStore) set(resource string, models HostSchemas, model, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byModel[resource]; ok {
		delete(s.models, old)
		delete(s.models, old+"List")
	}
	s.byKind[resource] = models
	s.byModel[resource] = model
	s.models[model] = kind
	s.models[model+"List"] = kind + "List"
}

// snapshot returns every schema and the dynamic models' view kinds.
func (s *schemaStore) snapshot() (HostSchemas, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := HostSchemas{}
	for n, sc := range s.static {
		all[n] = sc
	}
	for _, models := range s.byKind {
		for n, sc := range models {
			if _, ok := all[n]; !ok {
				all[n] = sc
			}
		}
	}
	kinds := make(map[string]string, len(s.models))
	for m, k := range s.models {
		kinds[m] = k
	}
	return all, kinds
}

// viewNamer names OpenAPI definitions: the dynamic kinds' source models
// carry their view's group-version-kind; everything else is named by base.
func viewNamer(base DefinitionNamer, kinds map[string]string) DefinitionNamer {
	return func(name string) (string, spec.Extensions) {
		if kind, ok := kinds[name]; ok {
			return name, spec.Extensions{"x-kubernetes-group-version-kind": []any{
				map[string]any{"group": SchemeGroupVersion.Group, "version": SchemeGroupVersion.Version, "kind": kind},
			}}
		}
		return base(name)
	}
}
