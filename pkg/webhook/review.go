package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Type is the type of a review a webhook is sent, such as
// admission.k8s.io/v1 AdmissionReview.
type Type struct {
	APIVersion string
	Kind       string
	// MaxBytes bounds a request body.
	MaxBytes int64
}

// Decode reads the review of r's body into obj. On failure (not a POST, a
// body that cannot be read or is over MaxBytes, not JSON of the review) it
// has answered the request with the error and returns false.
func (t Type) Decode(w http.ResponseWriter, r *http.Request, obj any) bool {
	if r.Method != http.MethodPost {
		http.Error(w, fmt.Sprintf("POST an %s %s", t.APIVersion, t.Kind), http.StatusMethodNotAllowed)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, t.MaxBytes+1))
	if err != nil || int64(len(body)) > t.MaxBytes {
		http.Error(w, fmt.Sprintf("reading the %s failed or it is too large", t.Kind), http.StatusBadRequest)
		return false
	}
	if err := json.Unmarshal(body, obj); err != nil {
		http.Error(w, fmt.Sprintf("not an %s %s: %v", t.APIVersion, t.Kind, err), http.StatusBadRequest)
		return false
	}
	return true
}

// Write answers with obj as JSON, with the review's apiVersion and kind
// when obj has no apiVersion (as the request it answers may not have had).
// Under MeasureAdmission or MeasureAuthorize it records the decision obj
// carries (DecisionOf) once written: where the webhook's answer is made,
// not decoded again from the bytes.
func (t Type) Write(w http.ResponseWriter, obj runtime.Object) error {
	if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok && tm.APIVersion == "" {
		tm.APIVersion, tm.Kind = t.APIVersion, t.Kind
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		return err
	}
	if rec := recorderOf(w); rec != nil {
		rec.decision = DecisionOf(obj)
	}
	return nil
}
