package sourcefeed

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestProgressCapsWatchTimeouts: with SetProgress, a watch from a version
// ends within the interval and a half (kube-apiserver's watch cache sends
// a bookmark before it ends, and the reflector watches again from it); a
// shorter timeout of the caller and a watch-list's timeout are kept.
func TestProgressCapsWatchTimeouts(t *testing.T) {
	tr := New("test", &cache.ListWatch{})
	ten := int64(600)
	if got := tr.timeoutSeconds(metav1.ListOptions{TimeoutSeconds: &ten}); got != &ten {
		t.Errorf("without SetProgress: timeoutSeconds %v, want the reflector's", *got)
	}
	tr.SetProgress(10 * time.Second)
	for range 50 {
		got := tr.timeoutSeconds(metav1.ListOptions{ResourceVersion: "5", TimeoutSeconds: &ten})
		if got == nil || *got < 10 || *got > 15 {
			t.Fatalf("a watch from a version: timeoutSeconds %v, want 10 to 15", got)
		}
	}
	if got := tr.timeoutSeconds(metav1.ListOptions{}); got == nil || *got < 10 || *got > 15 {
		t.Errorf("a watch without a timeout: timeoutSeconds %v, want 10 to 15", got)
	}
	five := int64(5)
	if got := tr.timeoutSeconds(metav1.ListOptions{TimeoutSeconds: &five}); *got != 5 {
		t.Errorf("a shorter timeout: %d, want it kept", *got)
	}
	yes := true
	if got := tr.timeoutSeconds(metav1.ListOptions{SendInitialEvents: &yes, TimeoutSeconds: &ten}); *got != ten {
		t.Errorf("a watch-list: %d, want the reflector's", *got)
	}
	tr.SetProgress(time.Second)
	if got := tr.timeoutSeconds(metav1.ListOptions{}); *got < 3 {
		t.Errorf("a 1s interval: timeoutSeconds %d, want at least 3 (the cache bookmarks 2s before the end)", *got)
	}
}
