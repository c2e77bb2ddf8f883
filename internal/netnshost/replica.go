package netnshost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// RewriteServer writes to out the kubeconfig in, with every cluster's
// server set to server: a replica in a host reaches kube-apiserver at the
// host's root-side address.
func RewriteServer(in, out, server string) error {
	cfg, err := clientcmd.LoadFromFile(in)
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.WriteToFile(*cfg, out)
}

// WaitReady polls url (a replica's /readyz) every 250 ms until it answers
// 200, up to timeout; the error carries the last answer.
func WaitReady(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := errors.New("not polled yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w", url, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
