package views_test

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// guardrails is a configured kind, served from unstructured objects.
const guardrails = "guardrails"

var guardrailKind = schema.GroupVersionKind{Group: "policy.example.com", Version: "v1", Kind: "Guardrail"}

// spliceScheme knows the built-in kinds and the view group's versions of
// them, as the server's codecs do.
func spliceScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = rbacv1.AddToScheme(s)
	_ = networkingv1.AddToScheme(s)
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// encoders are the encodings a watch is served with: each view item alone,
// and inside a watch event frame, as k8s.io/apiserver's watch encoder
// writes it (the item encoded, then the WatchEvent around its bytes).
func encoders(t testing.TB) map[string]func(runtime.Object, io.Writer) error {
	s := spliceScheme()
	codecs := serializer.NewCodecFactory(s)
	j := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{})
	pretty := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Pretty: true})
	yaml := json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true})
	pb := protobuf.NewSerializer(s, s)
	plain := map[string]runtime.Encoder{"json": j, "json-pretty": pretty, "yaml": yaml, "protobuf": pb}
	out := map[string]func(runtime.Object, io.Writer) error{}
	for name, enc := range plain {
		enc := enc
		item := func(obj runtime.Object, w io.Writer) error {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if name == "protobuf" {
					return runtime.NewNotRegisteredErrForKind("protobuf", u.GroupVersionKind())
				}
				return unstructured.UnstructuredJSONScheme.Encode(u, w)
			}
			return codecs.EncoderForVersion(enc, obj.GetObjectKind().GroupVersionKind().GroupVersion()).Encode(obj, w)
		}
		out[name] = item
		out[name+" watch frame"] = func(obj runtime.Object, w io.Writer) error {
			var inner bytes.Buffer
			if err := item(obj, &inner); err != nil {
				return err
			}
			return enc.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: inner.Bytes()}}, w)
		}
	}
	return out
}

// dnsLabel turns s into a namespace name.
func dnsLabel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 63 {
		out = strings.Trim(out[:63], "-")
	}
	if out == "" {
		return "a"
	}
	return out
}

// spliceSources returns a source object of each view kind made of the
// fuzzer's values.
func spliceSources(name, label, subject string, port int32) map[string]runtime.Object {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: global, UID: types.UID("uid-" + name), ResourceVersion: "42",
			Labels:      map[string]string{"team": label},
			Annotations: map[string]string{v1alpha1.AnnotationLocked: "true", "note": subject},
		}
	}
	return map[string]runtime.Object{
		rolebindings.Resource: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: subject},
				{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: global},
			},
		},
		roles.Resource: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(),
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", subject}}},
		},
		networkpolicies.Resource: &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: meta(),
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					Ports: []networkingv1.NetworkPolicyPort{{Port: &intstr.IntOrString{IntVal: port}}},
				}},
			},
		},
		guardrails: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": guardrailKind.GroupVersion().String(), "kind": guardrailKind.Kind,
			"metadata": map[string]any{
				"name": name, "namespace": global, "uid": "uid-" + name, "resourceVersion": "42",
				"labels": map[string]any{"team": label},
			},
			"spec": map[string]any{"subject": subject, "port": int64(port)},
		}},
	}
}

// FuzzSplice checks that a batch member's view item, encoded from its
// template's encoding with its namespace, uid and resourceVersion spliced
// in, has exactly the bytes of the item built and encoded whole, for every
// view kind and every encoding, whether that encoding splices (JSON, YAML)
// or not (protobuf, which falls back to encoding the item whole).
//
//	go test -run '^$' -fuzz FuzzSplice -fuzztime 60s ./pkg/views/
func FuzzSplice(f *testing.F) {
	f.Add("team-a", "g1", "blue", "org:viewers", int32(80), uint64(7), "team-b", uint64(8))
	f.Add("a", "x", "", "", int32(0), uint64(1<<40+1), "a-very-long-namespace-name-of-sixty-three-characters-0123456789", uint64(99999999999))
	f.Add("Team_A!", "n.1", "<&>\"", "\u00e9\\", int32(-1), uint64(0), "ns", uint64(10))
	encs := encoders(f)
	f.Fuzz(func(t *testing.T, ns1, name, label, subject string, port int32, rv1 uint64, ns2 string, rv2 uint64) {
		if name == "" || strings.ContainsAny(name, "/%") {
			name = "item"
		}
		objs := views.NewObjects(newObject(), 0)
		objs.Add(guardrails, func() runtime.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(guardrailKind)
			return u
		})
		// calls counts the spliced items' encodings by resource and
		// encoding: a JSON encoding splices, so its two members cost the
		// first member's own encoding and the template's two (one per set
		// of placeholders), and nothing more.
		calls := map[string]int{}
		for resource, src := range spliceSources(name, label, subject, port) {
			r := merge.Result{Item: merge.Item{Namespace: global, Name: name, Locked: true, Object: src}, Scope: merge.ScopeGlobal}
			// Two members of one batch share the template.
			for _, m := range []struct {
				ns string
				rv uint64
			}{{dnsLabel(ns1), rv1}, {dnsLabel(ns2), rv2}} {
				spliced, err := objs.BatchItem(resource, m.ns, r, strconv.FormatUint(m.rv, 10))
				if err != nil {
					t.Fatal(err)
				}
				whole, err := objs.Item(resource, m.ns, r, strconv.FormatUint(m.rv, 10))
				if err != nil {
					t.Fatal(err)
				}
				for encName, enc := range encs {
					id := runtime.Identifier(encName)
					var got, want bytes.Buffer
					counted := func(obj runtime.Object, w io.Writer) error {
						calls[resource+" "+encName]++
						return enc(obj, w)
					}
					errGot := spliced.(runtime.CacheableObject).CacheEncode(id, counted, &got)
					errWant := whole.(runtime.CacheableObject).CacheEncode(id, enc, &want)
					if (errGot == nil) != (errWant == nil) {
						t.Fatalf("%s in %s, %s: errors differ: spliced %v, whole %v", resource, m.ns, encName, errGot, errWant)
					}
					if !bytes.Equal(got.Bytes(), want.Bytes()) {
						t.Fatalf("%s in %s at %d, %s: spliced bytes differ\n got %q\nwant %q", resource, m.ns, m.rv, encName, got.Bytes(), want.Bytes())
					}
				}
			}
			for _, encName := range []string{"json", "json-pretty", "json watch frame"} {
				if n := calls[resource+" "+encName]; n != 3 {
					t.Errorf("%s, %s: the members' items took %d encodings, want 3 (the first member's and the template's 2): the encoding did not splice", resource, encName, n)
				}
			}
		}
	})
}

// tableEncoder encodes as k8s.io/apiserver's watch encoder does for a
// watch with Accept: application/json;as=Table (handlers/response.go,
// watchEmbeddedEncoder): column definitions on its first call only, then
// no headers, its identifier following. One per watcher.
type tableEncoder struct {
	item  func(runtime.Object, io.Writer) error
	calls int
}

func (e *tableEncoder) identifier() runtime.Identifier {
	if e.calls == 0 {
		return `{"name":"watch-embedded","target":"Table"}`
	}
	return `{"name":"watch-embedded","target":"Table","noHeaders":true}`
}

func (e *tableEncoder) encode(obj runtime.Object, w io.Writer) error {
	var item bytes.Buffer
	if err := e.item(obj, &item); err != nil {
		return err
	}
	headers := e.calls == 0
	e.calls++
	var out bytes.Buffer
	out.WriteString(`{"kind":"Table","apiVersion":"meta.k8s.io/v1",`)
	if headers {
		out.WriteString(`"columnDefinitions":[{"name":"Name","type":"string"}],`)
	}
	out.WriteString(`"rows":[{"cells":[],"object":`)
	out.Write(item.Bytes())
	out.WriteString(`}]}`)
	_, err := w.Write(out.Bytes())
	return err
}

// TestSpliceStatefulEncoder watches a batch's members in table format,
// as kubectl get -w does: each watcher's first event carries the column
// definitions and its later ones don't, whether its member's item made
// the template's cut, came after it, or was spliced; every event's bytes
// are its item's, encoded whole by a watcher's encoder in the same state
// (issue 24: the first event lacked them, the cut's two encodings having
// used up the encoder's headers).
func TestSpliceStatefulEncoder(t *testing.T) {
	t.Parallel()
	item := encoders(t)["json"]
	src := spliceSources("org-viewers", "blue", "org:viewers", 80)[rolebindings.Resource]
	r := merge.Result{Item: merge.Item{Namespace: global, Name: "org-viewers", Locked: true, Object: src}, Scope: merge.ScopeGlobal}
	objs := views.NewObjects(newObject(), 0)
	namespaces := []string{"team-a", "team-b", "team-c"}
	// Two watchers of every namespace (-A), one after the other: the
	// second meets the cuts the first made.
	for w := range 2 {
		enc := &tableEncoder{item: item}
		for i, ns := range namespaces {
			member, err := objs.BatchItem(rolebindings.Resource, ns, r, strconv.Itoa(10+i))
			if err != nil {
				t.Fatal(err)
			}
			whole, err := objs.Item(rolebindings.Resource, ns, r, strconv.Itoa(10+i))
			if err != nil {
				t.Fatal(err)
			}
			ref := &tableEncoder{item: item, calls: enc.calls}
			var want bytes.Buffer
			if err := whole.(runtime.CacheableObject).CacheEncode(ref.identifier(), ref.encode, &want); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := member.(runtime.CacheableObject).CacheEncode(enc.identifier(), enc.encode, &got); err != nil {
				t.Fatal(err)
			}
			headers := strings.Contains(got.String(), "columnDefinitions")
			if first := i == 0; headers != first {
				t.Errorf("watcher %d, event %d (%s): column definitions %v, want %v\n%s", w, i, ns, headers, first, got.String())
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("watcher %d, event %d (%s): bytes differ\n got %s\nwant %s", w, i, ns, got.Bytes(), want.Bytes())
			}
		}
		// The second watcher's later events are spliced from the cut
		// the first one's made without headers: its encoder ran once.
		if w == 1 && enc.calls != 1 {
			t.Errorf("the second watcher's encoder ran %d times, want once (its first event): its later events did not splice", enc.calls)
		}
	}
}
