package merge

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smd "sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// overlayCacheSize bounds the results an Overlayer remembers: one per
// overlaid name per viewing namespace that was read recently.
const overlayCacheSize = 8192

// overlayVersion is the one version every layer is at: layers of a merge are
// objects of one kind and version, so no conversion ever happens.
const overlayVersion fieldpath.APIVersion = "overlay"

// NewOverlayer returns the Overlayer of one kind, built on
// sigs.k8s.io/structured-merge-diff. models are OpenAPI v3 schemas by
// component name, as in a Kubernetes /openapi/v3/apis/<group>/<version>
// document's components.schemas (references "#/components/schemas/<name>");
// model is the kind's name among them, e.g. "io.k8s.api.rbac.v1.RoleBinding"
// or "com.example.policy.v1.Guardrail" for a CRD.
//
// The schemas are converted with kube-openapi's schemaconv.ToSchemaFromOpenAPI
// (x-kubernetes-list-type, -list-map-keys, -map-type and
// -preserve-unknown-fields become structured-merge-diff's list and map
// relationships, as kube-apiserver does for server-side apply), and the kind
// is looked up by model name, never by an object's group-version-kind: typed
// objects from client-go informers have an empty TypeMeta.
func NewOverlayer(models map[string]*spec.Schema, model string) (Overlayer, error) {
	if _, ok := models[model]; !ok {
		return nil, fmt.Errorf("overlay: no OpenAPI schema for model %q among %d models", model, len(models))
	}
	s, err := schemaconv.ToSchemaFromOpenAPI(models, false)
	if err != nil {
		return nil, fmt.Errorf("overlay: converting the OpenAPI schemas for %q: %w", model, err)
	}
	return NewOverlayerForType(typed.ParseableType{Schema: s, TypeRef: schema.TypeRef{NamedType: &model}})
}

// NewOverlayerForType returns the Overlayer of the kind t: a type of a
// structured-merge-diff schema, such as typed.Parser.Type(name) or the
// schema and type reference of a typed.TypedValue that a
// managedfields.TypeConverter produced.
func NewOverlayerForType(t typed.ParseableType) (Overlayer, error) {
	if t.Schema == nil || !t.IsValid() {
		name := "<inlined>"
		if t.TypeRef.NamedType != nil {
			name = *t.TypeRef.NamedType
		}
		return nil, fmt.Errorf("overlay: type %q is not in the schema", name)
	}
	cache, err := lru.New[string, *overlayResult](overlayCacheSize)
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	updater := (&smd.UpdaterBuilder{Converter: sameVersion{}, ReturnInputOnNoop: true}).BuildUpdater()
	return &overlayer{typ: t, updater: updater, cache: cache}, nil
}

// overlayer merges overlays with structured-merge-diff. Each layer is one
// field manager applying its object (server-side apply's semantics):
//
//   - typed.ParseableType.FromUnstructured validates a layer against the
//     schema; a layer that does not validate is never applied.
//   - merge.Updater.Apply with force=false merges an overlay onto the
//     object so far (list-map lists by key, sets by value, atomic lists and
//     scalars replaced, granular maps field by field) and reports, as
//     merge.Conflicts, each field the overlay would change that a manager
//     other than itself owns. The managers are the locked layers met so far,
//     each owning the fields it set (its TypedValue.ToFieldSet()); unlocked
//     layers own nothing, so they never block.
//   - typed.TypedValue.RemoveItems drops the blocked fields from the
//     overlay, which is applied again: the locked values stay, the overlay's
//     other fields, new ones included, still merge.
//
// Apply rather than a hand-made TypedValue.Compare against the owners' field
// sets, so ownership, conflicts and their paths are exactly server-side
// apply's, including the ownership a locked overlay takes over.
//
// Results are remembered in an LRU keyed by the identity (address) of the
// input objects and their lock flags: sources are immutable informer objects,
// replaced by a new object on every change, so a repeated read of an
// unchanged merge is a map lookup. Each cache entry holds its input objects,
// so no address in a live key can be reused by another object.
//
// An overlayer is safe for concurrent use: its schema is read-only, the
// Updater is stateless, and the LRU locks internally.
type overlayer struct {
	typ     typed.ParseableType
	updater *smd.Updater
	cache   *lru.Cache[string, *overlayResult]
}

var _ Overlayer = &overlayer{}

// overlayResult is a remembered Overlay result with the inputs it was made from.
type overlayResult struct {
	inputs    []any
	merged    any
	conflicts []string
}

// Overlay implements Overlayer. The merged object and the conflicts are
// shared with other callers of the same merge (they are cached): treat them
// as read-only, and copy before changing them. merged shares nothing with
// the input objects.
//
// The merged object has base's Go type (*unstructured.Unstructured,
// map[string]interface{}, or the typed struct of base, such as
// *rbacv1.RoleBinding), base's apiVersion, kind and metadata, except labels
// and annotations, which merge with the overlays' like any other field.
// Overlay labels and annotations under the implicit.dev/ prefix are
// directives to the server, never merged. Everything else of an overlay
// merges onto base.
//
// Overlays are whole stored objects, not apply configurations: every field
// they carry merges, including the ones the API server requires or defaults
// (a RoleBinding's roleRef, a NetworkPolicy's podSelector and policyTypes),
// and an atomic one replaces base's whole (under a lock: is blocked). A
// typed overlay (Go struct) also carries the zero value of each field whose
// JSON tag has no omitempty.
func (o *overlayer) Overlay(base Item, overlays []Item) (any, []string) {
	inputs, key, cacheable := overlayKey(base, overlays)
	if cacheable {
		if r, ok := o.cache.Get(key); ok && sameInputs(r.inputs, inputs) {
			return r.merged, r.conflicts
		}
	}
	merged, conflicts := o.overlay(base, overlays)
	conflicts = slices.Clip(conflicts) // an append by a caller copies
	if cacheable {
		o.cache.Add(key, &overlayResult{inputs: inputs, merged: merged, conflicts: conflicts})
	}
	return merged, conflicts
}

func (o *overlayer) overlay(base Item, overlays []Item) (merged any, conflicts []string) {
	defer func() {
		// Overlay runs on reads: a bug on some odd input must not take the
		// server down. The base is served as it is, and the failure named.
		if r := recover(); r != nil {
			merged = base.Object
			conflicts = append(conflicts, fmt.Sprintf("overlays onto %s not applied: internal error: %v", itemRef(base), r))
		}
	}()

	baseMap, err := toUnstructured(base.Object)
	if err != nil {
		return base.Object, []string{fmt.Sprintf("overlays onto %s not applied: %v", itemRef(base), err)}
	}
	live, err := o.typ.FromUnstructured(layerContent(baseMap, false))
	if err != nil {
		return base.Object, []string{fmt.Sprintf("overlays onto %s not applied: it does not match the schema: %s", itemRef(base), shortError(err))}
	}

	// owners names the layers by manager name: "0" is base, "i" overlay i-1.
	owners := make([]Item, 0, len(overlays)+1)
	owners = append(owners, base)
	managers := fieldpath.ManagedFields{}
	if base.Locked {
		set, err := live.ToFieldSet()
		if err != nil {
			return base.Object, []string{fmt.Sprintf("overlays onto %s not applied: %v", itemRef(base), err)}
		}
		managers["0"] = fieldpath.NewVersionedSet(set, overlayVersion, true)
	}
	for i, ov := range overlays {
		owners = append(owners, ov)
		manager := strconv.Itoa(i + 1)
		m, err := toUnstructured(ov.Object)
		if err != nil {
			conflicts = append(conflicts, fmt.Sprintf("overlay by %s ignored: %v", itemRef(ov), err))
			continue
		}
		config, err := o.typ.FromUnstructured(layerContent(m, true))
		if err != nil {
			conflicts = append(conflicts, fmt.Sprintf("overlay by %s ignored: does not match the schema: %s", itemRef(ov), shortError(err)))
			continue
		}
		next, nextManagers, blocked, err := o.apply(live, config, managers, manager, ov.Locked)
		if err != nil {
			conflicts = append(conflicts, fmt.Sprintf("overlay by %s ignored: %s", itemRef(ov), shortError(err)))
			continue
		}
		conflicts = append(conflicts, describeBlocked(ov, blocked, owners)...)
		live, managers = next, nextManagers
	}

	out, ok := live.AsValue().Unstructured().(map[string]interface{})
	if !ok {
		return base.Object, append(conflicts, fmt.Sprintf("overlays onto %s not applied: the merged object is not an object", itemRef(base)))
	}
	out = deepCopyJSON(out).(map[string]interface{})
	restoreIdentity(out, baseMap)
	merged, err = fromUnstructured(base.Object, out)
	if err != nil {
		return base.Object, append(conflicts, fmt.Sprintf("overlays onto %s not applied: %v", itemRef(base), err))
	}
	return merged, conflicts
}

// apply applies config onto live as manager, without force. On conflicts
// with the locked managers it drops the blocked fields from config and
// applies again; blocked maps each dropped path to the managers owning it.
// With owner, manager keeps the fields it applied in the returned managers.
func (o *overlayer) apply(live, config *typed.TypedValue, managers fieldpath.ManagedFields, manager string, owner bool) (*typed.TypedValue, fieldpath.ManagedFields, map[string][]string, error) {
	if len(managers) == 0 {
		// Nothing is locked yet, so nothing can conflict: Apply would merge,
		// then compare only to find no owner. Merge and own directly.
		out, err := live.Merge(config)
		if err != nil || !owner {
			return out, managers, nil, err
		}
		set, err := config.ToFieldSet()
		if err != nil {
			return nil, nil, nil, err
		}
		return out, fieldpath.ManagedFields{manager: fieldpath.NewVersionedSet(set, overlayVersion, true)}, nil, nil
	}
	var blocked map[string][]string
	// Dropping the conflicting fields leaves none to conflict: the second
	// attempt succeeds. The bound is a guard, not an expectation.
	for range 4 {
		out, nextManagers, err := o.updater.Apply(live, config, overlayVersion, managers.Copy(), manager, false)
		if err == nil {
			if out == nil {
				out = live
			}
			if !owner {
				delete(nextManagers, manager)
			}
			return out, nextManagers, blocked, nil
		}
		var cs smd.Conflicts
		if !errors.As(err, &cs) || len(cs) == 0 {
			return nil, nil, nil, err
		}
		if blocked == nil {
			blocked = map[string][]string{}
		}
		drop := fieldpath.NewSet()
		for _, c := range cs {
			drop.Insert(c.Path)
			p := c.Path.String()
			blocked[p] = append(blocked[p], c.Manager)
		}
		config = config.RemoveItems(drop)
	}
	return nil, nil, nil, errors.New("conflicts remain after removing the blocked fields")
}

// describeBlocked renders the fields a lock blocked in an overlay, one
// string per locked owner, top down; a field owned by several locked layers
// is attributed to the topmost.
func describeBlocked(ov Item, blocked map[string][]string, owners []Item) []string {
	if len(blocked) == 0 {
		return nil
	}
	byOwner := map[int][]string{}
	for p, ms := range blocked {
		top := -1
		for _, m := range ms {
			if i, err := strconv.Atoi(m); err == nil && i < len(owners) && (top < 0 || i < top) {
				top = i
			}
		}
		byOwner[top] = append(byOwner[top], p)
	}
	idx := make([]int, 0, len(byOwner))
	for i := range byOwner {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		paths := byOwner[i]
		sort.Strings(paths)
		owner := "another layer"
		if i >= 0 {
			owner = "locked " + itemRef(owners[i])
		}
		out = append(out, fmt.Sprintf("overlay by %s blocked at %s: set by %s", itemRef(ov), strings.Join(paths, ", "), owner))
	}
	return out
}

func itemRef(it Item) string { return it.Namespace + "/" + it.Name }

// shortError keeps a validation error readable in an annotation.
func shortError(err error) string {
	const max = 200
	s := err.Error()
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// sameVersion is the merge.Converter of layers that are all at one version.
type sameVersion struct{}

func (sameVersion) Convert(v *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return v, nil
}

func (sameVersion) IsMissingVersionError(error) bool { return false }
