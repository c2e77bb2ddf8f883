package webhookconfig

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

const (
	syncTestName   = "implicit-apiserver"
	syncTestGlobal = "implicit-global"
)

var syncTestServed = []schema.GroupResource{
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
	{Group: "rbac.authorization.k8s.io", Resource: "roles"},
}

// fakeGuarded is a Guarded source whose state the test sets.
type fakeGuarded struct {
	mu      sync.Mutex
	g       MatchInputs
	synced  bool
	changed chan struct{}
}

func newFakeGuarded(g MatchInputs, synced bool) *fakeGuarded {
	return &fakeGuarded{g: g, synced: synced, changed: make(chan struct{}, 1)}
}

// Guarded implements Guarded.
func (f *fakeGuarded) Guarded() (MatchInputs, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.g, f.synced
}

// Changed implements Guarded.
func (f *fakeGuarded) Changed() <-chan struct{} { return f.changed }

// set changes the source and signals it, as the mux does.
func (f *fakeGuarded) set(g MatchInputs) {
	f.mu.Lock()
	f.g, f.synced = g, true
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func testConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return Configuration(syncTestName, syncTestServed, func(path string) admissionregistrationv1.WebhookClientConfig {
		url := "https://127.0.0.1:8443" + path
		return admissionregistrationv1.WebhookClientConfig{URL: &url}
	})
}

// withSynced returns cfg with the synced conditions set to shadow and fanout.
func withSynced(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, shadow, fanout string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	cfg = cfg.DeepCopy()
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		for j := range w.MatchConditions {
			if w.MatchConditions[j].Name != syncedCondition {
				continue
			}
			switch w.Name {
			case WebhookShadows:
				w.MatchConditions[j].Expression = shadow
			case WebhookFanout:
				w.MatchConditions[j].Expression = fanout
			case WebhookNamespaceDeletions:
				// Every namespace: the index of these tests excludes none.
				w.MatchConditions[j].Expression = "true"
			}
		}
	}
	return cfg
}

// verbs lists the verbs of the client's actions on webhook configurations.
func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "validatingwebhookconfigurations" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func TestConditionSyncSync(t *testing.T) {
	t.Parallel()
	sources := MatchInputs{
		LockedNames: map[string][]string{"rolebindings": {"admins"}, "roles": {"reader"}},
		Inherited:   []string{syncTestGlobal, "org"},
	}
	shadow, fanout := shadowCondition(sources, syncTestGlobal), fanoutCondition(sources)
	if shadow == "false" || fanout == "false" {
		t.Fatalf("test sources make conditions %q and %q; want some", shadow, fanout)
	}
	conflictOnce := func(client *fake.Clientset) {
		var mu sync.Mutex
		conflicted := false
		client.PrependReactor("update", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if conflicted {
				return false, nil, nil
			}
			conflicted = true
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, syncTestName, errors.New("stale"))
		})
	}
	noFanoutCondition := func() *admissionregistrationv1.ValidatingWebhookConfiguration {
		cfg := withSynced(testConfiguration(), shadow, fanout)
		for i := range cfg.Webhooks {
			if cfg.Webhooks[i].Name == WebhookFanout {
				cfg.Webhooks[i].MatchConditions = nil
			}
		}
		return cfg
	}

	tests := []struct {
		name    string
		initial *admissionregistrationv1.ValidatingWebhookConfiguration // nil: none
		synced  bool
		reactor func(*fake.Clientset)
		// want is the configuration after sync; nil: as initial.
		want      *admissionregistrationv1.ValidatingWebhookConfiguration
		wantVerbs []string
		wantErr   bool
	}{
		{
			name:      "updates both conditions when they differ",
			initial:   testConfiguration(),
			synced:    true,
			want:      withSynced(testConfiguration(), shadow, fanout),
			wantVerbs: []string{"get", "update"},
		},
		{
			name:      "updates one condition that differs",
			initial:   withSynced(testConfiguration(), shadow, "false"),
			synced:    true,
			want:      withSynced(testConfiguration(), shadow, fanout),
			wantVerbs: []string{"get", "update"},
		},
		{
			name:      "adds a missing condition",
			initial:   noFanoutCondition(),
			synced:    true,
			want:      withSynced(testConfiguration(), shadow, fanout),
			wantVerbs: []string{"get", "update"},
		},
		{
			name:      "does nothing when equal",
			initial:   withSynced(testConfiguration(), shadow, fanout),
			synced:    true,
			wantVerbs: []string{"get"},
		},
		{
			name:      "no configuration is no error",
			synced:    true,
			wantVerbs: []string{"get"},
		},
		{
			name:    "does nothing before the sources sync",
			initial: testConfiguration(),
		},
		{
			name:      "retries on conflict",
			initial:   testConfiguration(),
			synced:    true,
			reactor:   conflictOnce,
			want:      withSynced(testConfiguration(), shadow, fanout),
			wantVerbs: []string{"get", "update", "get", "update"},
		},
		{
			name:    "returns other errors",
			initial: testConfiguration(),
			synced:  true,
			reactor: func(client *fake.Clientset) {
				client.PrependReactor("get", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("boom")
				})
			},
			wantVerbs: []string{"get"},
			wantErr:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var objs []runtime.Object
			if tc.initial != nil {
				objs = append(objs, tc.initial.DeepCopy())
			}
			client := fake.NewClientset(objs...)
			if tc.reactor != nil {
				tc.reactor(client)
			}
			client.ClearActions()
			s := &ConditionSync{
				Client:          client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
				Name:            syncTestName,
				GlobalNamespace: syncTestGlobal,
				Source:          newFakeGuarded(sources, tc.synced),
			}
			err := s.sync(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v, want error %v", err, tc.wantErr)
			}
			if got := verbs(client); !reflect.DeepEqual(got, tc.wantVerbs) {
				t.Errorf("actions %q, want %q", got, tc.wantVerbs)
			}
			if tc.initial == nil {
				return
			}
			want := tc.want
			if want == nil {
				want = tc.initial
			}
			got, err := stored(client)
			if err != nil {
				t.Fatalf("reading the configuration back: %v", err)
			}
			if !reflect.DeepEqual(got.Webhooks, want.Webhooks) {
				t.Errorf("webhooks after sync\n%+v\nwant\n%+v", got.Webhooks, want.Webhooks)
			}
		})
	}
}

// stored reads the configuration from the fake's tracker, past reactors.
func stored(client *fake.Clientset) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	obj, err := client.Tracker().Get(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, "", syncTestName)
	if err != nil {
		return nil, err
	}
	return obj.(*admissionregistrationv1.ValidatingWebhookConfiguration), nil
}

// waitForConditions polls until the configuration's synced conditions are
// shadow and fanout.
func waitForConditions(t *testing.T, client *fake.Clientset, shadow, fanout string) {
	t.Helper()
	want := []string{shadow, fanout}
	testwait.Within(t, 5*time.Millisecond, 20*time.Second, fmt.Sprintf("the conditions %q", want), func(context.Context) error {
		cfg, err := stored(client)
		if err != nil {
			t.Fatalf("reading the configuration: %v", err)
		}
		var got []string
		for _, w := range cfg.Webhooks {
			if w.Name == WebhookShadows || w.Name == WebhookFanout {
				got = append(got, w.MatchConditions[0].Expression)
			}
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("conditions %q", got)
		}
		return nil
	})
}

func TestConditionSyncRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		reactor func(*fake.Clientset)
	}{
		{name: "follows the sources"},
		{name: "retries after an error without a new change", reactor: func(client *fake.Clientset) {
			var mu sync.Mutex
			failed := false
			client.PrependReactor("get", "validatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
				mu.Lock()
				defer mu.Unlock()
				if failed {
					return false, nil, nil
				}
				failed = true
				return true, nil, errors.New("boom")
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset(testConfiguration())
			if tc.reactor != nil {
				tc.reactor(client)
			}
			src := newFakeGuarded(MatchInputs{}, false)
			s := &ConditionSync{
				Client:          client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
				Name:            syncTestName,
				GlobalNamespace: syncTestGlobal,
				Source:          src,
				MinInterval:     time.Millisecond,
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx)
			}()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Errorf("Run still running 20s after its context was cancelled")
				}
			})

			first := MatchInputs{LockedNames: map[string][]string{"rolebindings": {"admins"}}, Inherited: []string{syncTestGlobal}}
			src.set(first)
			waitForConditions(t, client, shadowCondition(first, syncTestGlobal), fanoutCondition(first))

			second := MatchInputs{Inherited: []string{syncTestGlobal, "org"}}
			src.set(second)
			waitForConditions(t, client, "false", fanoutCondition(second))
		})
	}
}

func TestConditionSyncRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// change signals a change first, and waits for its sync.
		change bool
	}{
		{name: "while waiting for a change"},
		{name: "while waiting out the interval", change: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset(testConfiguration())
			src := newFakeGuarded(MatchInputs{}, false)
			s := &ConditionSync{
				Client: client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
				Name:   syncTestName,
				Source: src,
				// Longer than any test: Run must not wait it out once cancelled.
				MinInterval: time.Hour,
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx)
			}()
			if tc.change {
				g := MatchInputs{Inherited: []string{syncTestGlobal}}
				src.set(g)
				waitForConditions(t, client, "false", fanoutCondition(g))
			}
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run still running 20s after its context was cancelled")
			}
			if !tc.change {
				if got := verbs(client); len(got) != 0 {
					t.Errorf("Run without a change made %q, want nothing", got)
				}
			}
		})
	}
}

// waitForWaiters waits until Run waits on n timers of the fake clock.
func waitForWaiters(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	testwait.Within(t, testwait.Interval, 20*time.Second, fmt.Sprintf("%d waiters on the clock", n), func(context.Context) error {
		if got := clk.Waiters(); got != n {
			return fmt.Errorf("the clock has %d waiters", got)
		}
		return nil
	})
}

// conditions are the shadows and fanout webhooks' synced conditions stored.
func conditions(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	cfg, err := stored(client)
	if err != nil {
		t.Fatalf("reading the configuration: %v", err)
	}
	var got []string
	for _, w := range cfg.Webhooks {
		if w.Name == WebhookShadows || w.Name == WebhookFanout {
			got = append(got, w.MatchConditions[0].Expression)
		}
	}
	return got
}

func TestConditionSyncRunClock(t *testing.T) {
	t.Parallel()
	const interval, resync = time.Minute, time.Hour
	tests := []struct {
		name string
		// after the first sync, while Run waits out the interval; it
		// returns the conditions Run writes once the clock moves by step.
		change func(t *testing.T, src *fakeGuarded, client *fake.Clientset) []string
		step   time.Duration
		// idle lets the interval pass first, so that Run waits for a
		// change or the resync.
		idle bool
	}{
		{
			name: "writes a change made within the interval once it has passed",
			change: func(t *testing.T, src *fakeGuarded, _ *fake.Clientset) []string {
				g := MatchInputs{Inherited: []string{syncTestGlobal, "org"}}
				src.set(g)
				return []string{"false", fanoutCondition(g)}
			},
			step: interval,
		},
		{
			name: "restores a replaced configuration at the resync",
			change: func(t *testing.T, _ *fakeGuarded, client *fake.Clientset) []string {
				want := conditions(t, client)
				if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(context.Background(), testConfiguration(), metav1.UpdateOptions{}); err != nil {
					t.Fatalf("replacing the configuration: %v", err)
				}
				return want
			},
			step: resync,
			idle: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := testingclock.NewFakeClock(time.Now())
			client := fake.NewClientset(testConfiguration())
			src := newFakeGuarded(MatchInputs{}, false)
			s := &ConditionSync{
				Client:          client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
				Name:            syncTestName,
				GlobalNamespace: syncTestGlobal,
				Source:          src,
				MinInterval:     interval,
				Resync:          resync,
				Clock:           clk,
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx)
			}()
			t.Cleanup(func() {
				cancel()
				<-done
			})

			// Run waits for a change or the resync; the change is written
			// at once, then Run waits out the interval.
			waitForWaiters(t, clk, 1)
			first := MatchInputs{LockedNames: map[string][]string{"rolebindings": {"admins"}}, Inherited: []string{syncTestGlobal}}
			src.set(first)
			waitForConditions(t, client, shadowCondition(first, syncTestGlobal), fanoutCondition(first))
			waitForWaiters(t, clk, 2)
			if tc.idle {
				// The interval's timer fires and goes; Run waits on a new
				// resync timer beside the one of its first wait.
				clk.Step(interval)
				waitForWaiters(t, clk, 2)
			}

			want := tc.change(t, src, client)
			before := conditions(t, client)
			clk.Step(tc.step - time.Nanosecond)
			if got := conditions(t, client); !reflect.DeepEqual(got, before) {
				t.Fatalf("conditions %q before %v had passed, want %q", got, tc.step, before)
			}
			clk.Step(time.Nanosecond)
			waitForConditions(t, client, want[0], want[1])
		})
	}
}
