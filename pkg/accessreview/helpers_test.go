package accessreview

import (
	"context"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// fakeHost answers every question with allowed (and err), counting them by
// user; block, when set, holds every answer until it is closed.
type fakeHost struct {
	allowed bool
	err     error

	mu    sync.Mutex
	asked []string // usernames, in order
}

func (f *fakeHost) Allowed(_ context.Context, user authenticationv1.UserInfo, _ authorizationv1.ResourceAttributes) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, user.Username)
	return f.allowed, "because", f.err
}

func (f *fakeHost) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

var (
	alice = authenticationv1.UserInfo{Username: "alice", UID: "uid-a", Groups: []string{"tenants", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}}}
	bob = authenticationv1.UserInfo{Username: "bob", Groups: []string{"system:authenticated"}}
)

func sa(namespace, name string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
}

func unlock(name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: "unlock", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: "implicit-global", Name: name}
}
