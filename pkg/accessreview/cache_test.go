package accessreview

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCache: an allow is reused for the same user asking
// the same question within the TTL, and for nothing else: another user,
// uid, group list, extra or attribute asks the host again, as does the same
// question once the TTL is past. Errors are not cached, and the cache keeps
// at most CacheSize answers.
func TestCache(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	with := func(f func(*authenticationv1.UserInfo)) authenticationv1.UserInfo {
		u := alice
		u.Groups = append([]string(nil), alice.Groups...)
		u.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range alice.Extra {
			u.Extra[k] = v
		}
		f(&u)
		return u
	}
	tests := []struct {
		name     string
		allowed  bool
		hostErr  error
		second   authenticationv1.UserInfo
		attrs    authorizationv1.ResourceAttributes
		step     time.Duration
		wantHost int
	}{
		{name: "an allow is reused", allowed: true, second: alice, attrs: unlock("rb"), wantHost: 1},
		{name: "a denial is asked again: a grant counts at once", second: alice, attrs: unlock("rb"), wantHost: 2},
		{name: "until the TTL", allowed: true, second: alice, attrs: unlock("rb"), step: ttl - time.Millisecond, wantHost: 1},
		{name: "not past it", allowed: true, second: alice, attrs: unlock("rb"), step: ttl, wantHost: 2},
		{name: "another user", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.Username = "mallory" }), attrs: unlock("rb"), wantHost: 2},
		{name: "another uid", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.UID = "uid-b" }), attrs: unlock("rb"), wantHost: 2},
		{name: "fewer groups", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.Groups = u.Groups[:1] }), attrs: unlock("rb"), wantHost: 2},
		{name: "another group", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.Groups[0] = "system:masters" }), attrs: unlock("rb"), wantHost: 2},
		{name: "another extra value", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.Extra["scopes"] = []string{"a"} }), attrs: unlock("rb"), wantHost: 2},
		{name: "no extra", allowed: true, second: with(func(u *authenticationv1.UserInfo) { u.Extra = nil }), attrs: unlock("rb"), wantHost: 2},
		{name: "another name", allowed: true, second: alice, attrs: unlock("rb2"), wantHost: 2},
		{name: "another verb", allowed: true, second: alice, attrs: func() authorizationv1.ResourceAttributes { a := unlock("rb"); a.Verb = "update"; return a }(), wantHost: 2},
		{name: "every name", allowed: true, second: alice, attrs: unlock(""), wantHost: 2},
		{name: "an error is not cached", hostErr: errors.New("boom"), second: alice, attrs: unlock("rb"), wantHost: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			host := &fakeHost{allowed: tc.allowed, err: tc.hostErr}
			r := New(host, Options{Clock: clk, CacheTTL: ttl})
			ctx := context.Background()
			got, _, err := r.Allowed(ctx, alice, unlock("rb"))
			if (err != nil) != (tc.hostErr != nil) || got != tc.allowed {
				t.Fatalf("first answer %v, %v; want %v", got, err, tc.allowed)
			}
			clk.Step(tc.step)
			got, reason, err := r.Allowed(ctx, tc.second, tc.attrs)
			if (err != nil) != (tc.hostErr != nil) || got != tc.allowed {
				t.Errorf("second answer %v, %v; want %v", got, err, tc.allowed)
			}
			if err == nil && reason != "because" {
				t.Errorf("second reason %q, want the host's", reason)
			}
			if n := host.count(); n != tc.wantHost {
				t.Errorf("the host was asked %d times, want %d", n, tc.wantHost)
			}
		})
	}
}

// TestCacheBounded: a full cache drops its oldest answer, not the others.
func TestCacheBounded(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	host := &fakeHost{allowed: true}
	r := New(host, Options{Clock: clk, CacheSize: 3})
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, _, err := r.Allowed(ctx, alice, unlock(name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.cache.len(); n != 3 {
		t.Errorf("the cache holds %d answers, want 3", n)
	}
	for _, name := range []string{"b", "c", "d"} {
		if _, _, err := r.Allowed(ctx, alice, unlock(name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := host.count(); n != 4 {
		t.Errorf("after asking b, c and d again the host was asked %d times, want 4 (all cached)", n)
	}
	if _, _, err := r.Allowed(ctx, alice, unlock("a")); err != nil {
		t.Fatal(err)
	}
	if n := host.count(); n != 5 {
		t.Errorf("after asking a again the host was asked %d times, want 5 (a was dropped)", n)
	}
}
