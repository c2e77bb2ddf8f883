package admission

import (
	"context"
	"runtime"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// TestTenantTurns: while a tenant's decision holds its turn, the tenant's
// next one waits (here until its context ends), whichever of the tenant's
// users asks, and another tenant's does not; once released, the turn
// passes on, and an unused turn is dropped.
func TestTenantTurns(t *testing.T) {
	t.Parallel()
	alice := authenticationv1.UserInfo{Username: "alice"}
	sa := func(name string) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{Username: "system:serviceaccount:mine:" + name}
	}
	tests := []struct {
		name         string
		holder, next authenticationv1.UserInfo
	}{
		{name: "one user", holder: alice, next: alice},
		{name: "two ServiceAccounts of one namespace", holder: sa("a"), next: sa("b")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns := newTenantTurns()
			release, ok := turns.take(context.Background(), tc.holder)
			if !ok {
				t.Fatal("the first decision did not get its turn")
			}
			// Another tenant is not held up (this would block forever).
			other, ok := turns.take(context.Background(), authenticationv1.UserInfo{Username: "bob"})
			if !ok {
				t.Fatal("bob did not get his turn")
			}
			other()
			waiting, cancel := context.WithCancel(context.Background())
			got := make(chan bool)
			go func() {
				r, ok := turns.take(waiting, tc.next)
				if ok {
					r()
				}
				got <- ok
			}()
			// Once the second decision waits for its turn (or, wrongly, has
			// had one), it gives up.
			tenant := "serviceaccounts:mine"
			if tc.holder.Username == "alice" {
				tenant = "user:alice"
			}
			for waiting := false; !waiting; {
				select {
				case ok := <-got:
					t.Fatalf("the tenant's second decision returned (turn %v) while the first held the turn", ok)
				default:
				}
				turns.mu.Lock()
				waiting = turns.slots[tenant].users == 2
				turns.mu.Unlock()
				runtime.Gosched()
			}
			cancel()
			if <-got {
				t.Error("the tenant's second decision got a turn while the first held it")
			}
			release()
			if r, ok := turns.take(context.Background(), tc.next); !ok {
				t.Error("no turn after the first decision released it")
			} else {
				r()
			}
			turns.mu.Lock()
			defer turns.mu.Unlock()
			if len(turns.slots) != 0 {
				t.Errorf("%d turns kept after every decision ended, want none", len(turns.slots))
			}
		})
	}
}
