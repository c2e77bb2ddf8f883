package servedgroup_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// TestRevalidateOpenAPI serves the group's OpenAPI v3 document with
// kube-openapi's handler, as the generic server does, behind the filter: a
// client told the document's hash may keep it but must ask again, and when
// the document changed, the old hash is answered with the new document, not
// a redirect (which kube-apiserver's aggregator would not pass on).
func TestRevalidateOpenAPI(t *testing.T) {
	t.Parallel()
	const gv = "apis/implicit.dev/v1alpha1"
	docs := handler3.NewOpenAPIService()
	doc := func(title string) *spec3.OpenAPI {
		return &spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: title}}}
	}
	docs.UpdateGroupVersion(gv, doc("first"))
	m := mux.NewPathRecorderMux("test")
	if err := docs.RegisterOpenAPIV3VersionedService("/openapi/v3", m); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(servedgroup.RevalidateOpenAPI(m))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	getBody := func(path, etag string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", "application/json")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	get := func(path, etag string) *http.Response {
		t.Helper()
		resp, _ := getBody(path, etag)
		return resp
	}
	hashURL := func() string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/openapi/v3")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d handler3.OpenAPIV3Discovery
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		return d.Paths[gv].ServerRelativeURL
	}

	first := hashURL()
	resp := get(first, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", first, resp.StatusCode)
	}
	if cc, exp := resp.Header.Get("Cache-Control"), resp.Header.Get("Expires"); cc != "no-cache" || exp != "" {
		t.Fatalf("GET %s: Cache-Control %q, Expires %q; want no-cache and none", first, cc, exp)
	}
	etag := resp.Header.Get("Etag")
	if resp := get(first, etag); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET %s again with its ETag: %d, want 304", first, resp.StatusCode)
	}
	docs.UpdateGroupVersion(gv, doc("second"))
	second := hashURL()
	if second == first {
		t.Fatal("the document's hash did not change")
	}
	// The aggregator lists the old hash until its refetch, and its proxy
	// would not pass a redirect on: the old hash gets the new document.
	resp, body := getBody(first, etag)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" || !strings.Contains(body, `"second"`) {
		t.Fatalf("GET %s after the document changed: %d, Location %q, body %q; want 200 with the new document", first, resp.StatusCode, resp.Header.Get("Location"), body)
	}
	newETag := resp.Header.Get("Etag")
	if newETag == etag || resp.Header.Get("Cache-Control") == "public, immutable" {
		t.Fatalf("GET %s after the document changed: ETag %s (was %s), Cache-Control %q", first, newETag, etag, resp.Header.Get("Cache-Control"))
	}
	if resp := get(first, newETag); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET %s with the new document's ETag: %d, want 304", first, resp.StatusCode)
	}
	if resp, body := getBody(second, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"second"`) || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET %s: %d, Cache-Control %q, body %q", second, resp.StatusCode, resp.Header.Get("Cache-Control"), body)
	}
	if resp := get("/openapi/v3", ""); resp.Header.Get("Cache-Control") != "" {
		t.Fatalf("/openapi/v3: Cache-Control %q, want none (not a hash's answer)", resp.Header.Get("Cache-Control"))
	}
}
