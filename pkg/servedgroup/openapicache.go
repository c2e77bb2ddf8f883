package servedgroup

import (
	"net/http"
	"strings"
)

// RevalidateOpenAPI makes kubectl ask again for the served group's OpenAPI
// v3 document instead of keeping it for a year.
//
// kube-openapi's handler answers /openapi/v3/<group version>?hash=<h> with
// "Cache-Control: public, immutable" and an Expires a year ahead, and
// redirects a hash that is no longer the document's to the current one.
// kubectl keeps such an answer in its HTTP cache (~/.kube/cache/http). But
// kubectl learns the hash from kube-apiserver's aggregator, which refetches
// this server's /openapi/v3 about once a minute: after the served group
// changes, a kubectl that explained it before reads the old hash from the
// aggregator and its cached document with it, for up to that minute
// (docs/operations.md, "kubectl explain after the served group changes").
// With "Cache-Control: no-cache" instead, kubectl keeps the document but
// asks again each time: the same hash is answered 304 Not Modified (the
// ETag), an old one with the redirect to the new document.
func RevalidateOpenAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/openapi/v3/") && r.URL.Query().Get("hash") != "" {
			w = &revalidating{ResponseWriter: w}
		}
		h.ServeHTTP(w, r)
	})
}

// revalidating replaces an immutable answer's caching headers before they
// are written.
type revalidating struct {
	http.ResponseWriter
	wrote bool
}

func (w *revalidating) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		hdr := w.Header()
		if strings.Contains(hdr.Get("Cache-Control"), "immutable") {
			hdr.Set("Cache-Control", "no-cache")
			hdr.Del("Expires")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *revalidating) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *revalidating) Unwrap() http.ResponseWriter { return w.ResponseWriter }
