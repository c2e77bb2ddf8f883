package servedgroup

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// readVerbs are the only verbs a view serves.
var readVerbs = sets.New("get", "list", "watch")

// readOnly answers every write to a view with 405 MethodNotSupported naming
// the source to edit. It runs after authentication and authorization, so a
// caller who may not write learns nothing more than a 403. Discovery keeps
// listing only get, list and watch, since the storage implements no writes.
func readOnly(next http.Handler, views func(resource string) (Storage, bool), codecs serializer.CodecFactory) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || info.APIGroup != GroupName || info.Subresource != "" || readVerbs.Has(info.Verb) {
			next.ServeHTTP(w, req)
			return
		}
		view, ok := views(info.Resource)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		err := view.RejectWrite(req.Context(), info.Verb, info.Namespace, info.Name)
		responsewriters.ErrorNegotiated(err, codecs, SchemeGroupVersion, w, req)
	})
}
