package servedgroup

import (
	"net/http"
	"strings"
)

// RevalidateOpenAPI keeps kubectl explain current when the served group
// changes (docs/operations.md, "kubectl explain after the served group
// changes").
//
// kubectl reads the group's OpenAPI v3 document at the URL, with its hash,
// that kube-apiserver's aggregator lists in /openapi/v3; the aggregator
// refetches that list from this server about once a minute, so for up to
// a minute after a change it names the old hash. kube-openapi's handler
// answers an old hash with a 301 to the new one, and the aggregator's
// proxy refuses to pass a redirect on ("the backend attempted to redirect
// this request, which is not permitted"; kube-apiserver's
// --aggregator-reject-forwarding-redirect): kubectl explain failed until
// the refetch. So an old hash is answered here with the current document
// instead, and nothing at a hash is marked immutable for a year
// (kube-openapi's "Cache-Control: public, immutable" and Expires): kubectl
// keeps the document but asks again, and the same document is answered
// 304 Not Modified (its ETag).
func RevalidateOpenAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/openapi/v3/") || r.URL.Query().Get("hash") == "" {
			h.ServeHTTP(w, r)
			return
		}
		rw := &revalidating{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		if !rw.redirected {
			return
		}
		// The hash is not the document's: the current document, as
		// asked for without a hash (no caching headers of its own).
		hdr := w.Header()
		for _, k := range []string{"Location", "Content-Type", "Etag", "Expires", "Vary"} {
			hdr.Del(k)
		}
		current := r.Clone(r.Context())
		q := current.URL.Query()
		q.Del("hash")
		current.URL.RawQuery = q.Encode()
		current.RequestURI = current.URL.RequestURI()
		h.ServeHTTP(w, current)
	})
}

// revalidating replaces an immutable answer's caching headers before they
// are written, and holds back a redirect.
type revalidating struct {
	http.ResponseWriter
	wrote, redirected bool
}

func (w *revalidating) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if code >= 300 && code < 400 && code != http.StatusNotModified {
		w.redirected = true
		return
	}
	hdr := w.Header()
	if strings.Contains(hdr.Get("Cache-Control"), "immutable") {
		hdr.Set("Cache-Control", "no-cache")
		hdr.Del("Expires")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *revalidating) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.redirected {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *revalidating) Unwrap() http.ResponseWriter { return w.ResponseWriter }
