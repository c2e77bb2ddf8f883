package merge

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// toUnstructured reads an object as JSON-like content, without changing it.
func toUnstructured(obj any) (map[string]interface{}, error) {
	switch o := obj.(type) {
	case nil:
		return nil, errors.New("no object")
	case *unstructured.Unstructured:
		if o == nil {
			return nil, errors.New("no object")
		}
		if o.Object == nil {
			return map[string]interface{}{}, nil
		}
		return o.Object, nil
	case map[string]interface{}:
		return o, nil
	case runtime.Unstructured:
		return o.UnstructuredContent(), nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("unsupported object of type %T", obj)
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// fromUnstructured returns content as an object of base's Go type.
func fromUnstructured(base any, content map[string]interface{}) (any, error) {
	switch base.(type) {
	case *unstructured.Unstructured:
		return &unstructured.Unstructured{Object: content}, nil
	case map[string]interface{}:
		return content, nil
	}
	t := reflect.TypeOf(base)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("unsupported object of type %T", base)
	}
	out := reflect.New(t.Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, fmt.Errorf("converting the merged object to %T: %w", base, err)
	}
	return out, nil
}

// layerContent is what of a layer merges: everything but apiVersion, kind
// and metadata other than labels and annotations. In an overlay, labels and
// annotations under the implicit.dev/ prefix are directives, and kubectl's
// last-applied-configuration is bookkeeping of the overlay object itself:
// both are left out (the latter would otherwise conflict with a locked
// base's own).
// Nothing of obj is changed.
func layerContent(obj map[string]interface{}, overlay bool) map[string]interface{} {
	out := make(map[string]interface{}, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			meta, ok := v.(map[string]interface{})
			if !ok {
				out[k] = v // not an object: validation reports it
				continue
			}
			kept := map[string]interface{}{}
			for _, f := range []string{"labels", "annotations"} {
				fv, ok := meta[f]
				if !ok || fv == nil {
					continue
				}
				if m, isMap := fv.(map[string]interface{}); isMap && overlay {
					fv = withoutDirectives(m)
				}
				if m, isMap := fv.(map[string]interface{}); isMap && len(m) == 0 {
					continue
				}
				kept[f] = fv
			}
			if len(kept) > 0 {
				out[k] = kept
			}
		default:
			out[k] = v
		}
	}
	return out
}

// lastApplied is the annotation client-side kubectl apply keeps.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func withoutDirectives(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, v1alpha1.Prefix) && k != lastApplied {
			out[k] = v
		}
	}
	return out
}

// restoreIdentity gives merged base's apiVersion, kind and metadata, with
// the merged labels and annotations.
func restoreIdentity(merged, base map[string]interface{}) {
	delete(merged, "apiVersion")
	delete(merged, "kind")
	for _, k := range []string{"apiVersion", "kind"} {
		if v, ok := base[k]; ok {
			merged[k] = deepCopyJSON(v)
		}
	}
	mergedMeta, _ := merged["metadata"].(map[string]interface{})
	baseMeta, ok := base["metadata"].(map[string]interface{})
	if !ok {
		if mergedMeta == nil {
			delete(merged, "metadata")
		}
		return
	}
	meta := deepCopyJSON(baseMeta).(map[string]interface{})
	for _, f := range []string{"labels", "annotations"} {
		delete(meta, f)
		if v, ok := mergedMeta[f]; ok {
			meta[f] = v
		}
	}
	merged["metadata"] = meta
}

// deepCopyJSON copies maps and slices of JSON-like content; other values
// are kept as they are (scalars), so it never panics on an unusual type.
func deepCopyJSON(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, e := range t {
			out[k] = deepCopyJSON(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = deepCopyJSON(e)
		}
		return out
	default:
		return v
	}
}

// overlayKey identifies a merge by its input objects' addresses, lock
// flags and names. Only merges whose objects are all pointers are cached.
func overlayKey(base Item, overlays []Item) (inputs []any, key string, ok bool) {
	inputs = make([]any, 0, len(overlays)+1)
	var b strings.Builder
	for i, it := range append([]Item{base}, overlays...) {
		v := reflect.ValueOf(it.Object)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, "", false
		}
		inputs = append(inputs, it.Object)
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(strconv.FormatUint(uint64(v.Pointer()), 16))
		b.WriteByte(' ')
		b.WriteString(strconv.FormatBool(it.Locked))
		b.WriteByte(' ')
		b.WriteString(it.Namespace)
		b.WriteByte('/')
		b.WriteString(it.Name)
	}
	return inputs, b.String(), true
}

// sameInputs reports whether a cached entry was made from these very objects.
func sameInputs(cached, inputs []any) bool {
	if len(cached) != len(inputs) {
		return false
	}
	for i := range cached {
		if cached[i] != inputs[i] { // pointers only: comparable
			return false
		}
	}
	return true
}
