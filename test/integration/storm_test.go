package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

const (
	// stormOpens is the watches TestWatchStormKeepsAPIServiceAvailable
	// opens at once (test/bench -edges opens 10,000), stormPerConnection
	// of them on each HTTP/2 connection to kube-apiserver.
	stormOpens         = 2000
	stormPerConnection = 100
)

// TestWatchStormKeepsAPIServiceAvailable opens 2,000 watches of the views
// at once through kube-apiserver, as a reconnect storm does, while the
// APIService's Available condition and kube-apiserver's discovery of the
// group are polled every 200 ms. Every watch opens (a 429 is sent again
// after its Retry-After, as client-go does) and the APIService stays
// Available throughout; discovery failures through kube-apiserver are
// logged.
func TestWatchStormKeepsAPIServiceAvailable(t *testing.T) {
	ctx := t.Context()
	_, dyn := admin(t)
	l, err := dyn.Resource(viewRoleBindings).Namespace("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv := l.GetResourceVersion()

	pollCtx, stopPolls := context.WithCancel(ctx)
	var polls, unavailable, discoveryFailures int
	var pollErrors []string
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		client := stormClient(t)
		for {
			polls++
			if err := availableAndDiscovered(pollCtx, client); err != nil && pollCtx.Err() == nil {
				if strings.HasPrefix(err.Error(), "APIService") {
					unavailable++
				} else {
					discoveryFailures++
				}
				if len(pollErrors) < 10 {
					pollErrors = append(pollErrors, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
			}
			select {
			case <-pollCtx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	start := time.Now()
	var retries atomic.Int64
	var mu sync.Mutex
	var failures []string
	var opened, done sync.WaitGroup
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer func() { stopWatches(); done.Wait() }()
	var client *stormHTTPClient
	for i := range stormOpens {
		if i%stormPerConnection == 0 {
			client = stormClient(t)
		}
		c := client
		opened.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {rv}, "timeoutSeconds": {"600"}}
			path := "/apis/implicit.dev/v1alpha1/rolebindings?" + q.Encode()
			if i%2 == 1 {
				path = "/apis/implicit.dev/v1alpha1/namespaces/default/rolebindings?" + q.Encode()
			}
			resp, err := c.get(watchCtx, path)
			// 429 (APF) and 503 (the aggregator's proxy losing a stream to
			// the server mid-storm) are retried, as a client's reflector
			// retries them; any other failure counts.
			for tries := 0; err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && tries < 60; tries++ {
				retries.Add(1)
				resp.Body.Close()
				after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(after, 1)) * time.Second)
				resp, err = c.get(watchCtx, path)
			}
			if err == nil && resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				resp.Body.Close()
				err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
			}
			opened.Done()
			if err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body) // until the test ends it
		}()
	}
	opened.Wait()
	took := time.Since(start)
	time.Sleep(time.Second) // on purpose: polls after the storm
	stopPolls()
	<-polled
	t.Logf("FIGURES watch storm: opens=%d failed=%d retried_429=%d took=%s polls=%d not_available=%d discovery_failures=%d",
		stormOpens, len(failures), retries.Load(), took.Round(100*time.Millisecond), polls, unavailable, discoveryFailures)
	if len(failures) > 0 {
		t.Errorf("%d of %d watches did not open: %v", len(failures), stormOpens, failures[:min(5, len(failures))])
	}
	if unavailable > 0 {
		t.Errorf("during the storm the APIService was not Available in %d of %d polls: %v", unavailable, polls, pollErrors)
	}
	if discoveryFailures > 0 {
		// Measured, not asserted: kube-apiserver's proxy answers 503 when
		// it cannot reach the server in time (docs/benchmarks.md, "Scale
		// edges"), which a storm can cause while the APIService stays
		// Available.
		t.Logf("discovery through kube-apiserver failed in %d of %d polls: %v", discoveryFailures, polls, pollErrors)
	}
}

// stormHTTPClient is one HTTP/2 connection to kube-apiserver, as admin.
type stormHTTPClient struct {
	host string
	http *http.Client
}

func stormClient(t *testing.T) *stormHTTPClient {
	t.Helper()
	cfg := cp.AdminConfig()
	d := &net.Dialer{Timeout: 10 * time.Second}
	cfg.Dial = d.DialContext // a connection of its own
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &stormHTTPClient{host: strings.TrimSuffix(cfg.Host, "/"), http: hc}
	// Connected before the storm: the storm is the opens, not handshakes.
	resp, err := c.get(t.Context(), "/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

func (c *stormHTTPClient) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return c.http.Do(req)
}

// availableAndDiscovered checks the APIService's Available condition,
// then that kube-apiserver's /apis lists implicit.dev and that
// /apis/implicit.dev/v1alpha1 answers.
func availableAndDiscovered(ctx context.Context, c *stormHTTPClient) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	read := func(path string) ([]byte, error) {
		resp, err := c.get(ctx, path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			msg, _, _ := strings.Cut(string(body), "\n")
			err = fmt.Errorf("%s: %.200s", resp.Status, msg)
		}
		return body, err
	}
	body, err := read("/apis/apiregistration.k8s.io/v1/apiservices/" + controlplane.APIServiceName)
	if err != nil {
		return fmt.Errorf("APIService: %w", err)
	}
	var svc struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &svc); err != nil {
		return fmt.Errorf("APIService: %w", err)
	}
	for _, cond := range svc.Status.Conditions {
		if cond.Type == "Available" && cond.Status != "True" {
			return fmt.Errorf("APIService Available=%s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	if body, err := read("/apis"); err != nil || !strings.Contains(string(body), `"implicit.dev"`) {
		return fmt.Errorf("/apis without implicit.dev (%v)", err)
	}
	if _, err := read("/apis/implicit.dev/v1alpha1"); err != nil {
		return fmt.Errorf("/apis/implicit.dev/v1alpha1: %w", err)
	}
	return nil
}
