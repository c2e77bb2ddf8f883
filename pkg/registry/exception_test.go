package registry_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestExceptionEnds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	for _, tt := range []struct {
		name  string
		state string
		ends  *metav1.Time
		want  string
	}{
		{"no end", v1alpha1.ExceptionActive, nil, "-"},
		{"a week less an hour", v1alpha1.ExceptionActive, at(7*24*time.Hour - time.Hour), "6d23h"},
		{"past its end, not marked", v1alpha1.ExceptionActive, at(-time.Second), "ending"},
		{"marked", v1alpha1.ExceptionExpired, at(-time.Hour), "expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &v1alpha1.Exception{Spec: v1alpha1.ExceptionSpec{ExpiresAt: tt.ends}, Status: v1alpha1.ExceptionStatus{State: tt.state}}
			if got := registry.Ends(e, now); got != tt.want {
				t.Errorf("Ends = %q, want %q", got, tt.want)
			}
		})
	}
}
