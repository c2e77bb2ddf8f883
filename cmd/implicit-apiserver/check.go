package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// checkUsage is the help of `implicit-apiserver check`.
const checkUsage = `implicit-apiserver check: what the chart's helm test runs, from the product
image itself (it has no shell and no kubectl). Through kube-apiserver, with the
pod's ServiceAccount (or --kubeconfig), it waits until the APIService is
Available, then lists a view in one namespace; it exits 0 when both succeed,
1 otherwise, printing what it saw.
`

// runCheck is `implicit-apiserver check [flags]`.
func runCheck(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprint(stdout, checkUsage); fs.PrintDefaults() }
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster; empty: in-cluster (the pod's ServiceAccount)")
	apiService := fs.String("apiservice", "v1alpha1.implicit.dev", "the APIService that must be Available")
	namespace := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "the namespace whose view of --resource is listed")
	resource := fs.String("resource", "rolebindings", "the view listed, a resource of implicit.dev/v1alpha1")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the APIService and the view")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *namespace == "" {
		fmt.Fprintln(stdout, "check: --namespace (or POD_NAMESPACE) is required")
		return 2
	}
	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		fmt.Fprintf(stdout, "check: %v\n", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stdout, "check: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rc := client.RESTClient()

	var last string
	available := func() bool {
		raw, err := rc.Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", *apiService).DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		var svc apiregistrationv1.APIService
		if err := json.Unmarshal(raw, &svc); err != nil {
			last = err.Error()
			return false
		}
		for _, c := range svc.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("Available=%s (%s: %s)", c.Status, c.Reason, c.Message)
				return c.Status == apiregistrationv1.ConditionTrue
			}
		}
		last = "no Available condition yet"
		return false
	}
	if !poll(ctx, available) {
		fmt.Fprintf(stdout, "FAIL: APIService %s not Available within %s: %s\n", *apiService, *timeout, last)
		return 1
	}
	fmt.Fprintf(stdout, "ok: APIService %s %s\n", *apiService, last)

	var items int
	view := func() bool {
		raw, err := rc.Get().AbsPath("/apis/implicit.dev/v1alpha1/namespaces", *namespace, *resource).DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			last = err.Error()
			return false
		}
		items = len(list.Items)
		return true
	}
	if !poll(ctx, view) {
		fmt.Fprintf(stdout, "FAIL: the view %s.implicit.dev in %s did not answer within %s: %s\n", *resource, *namespace, *timeout, last)
		return 1
	}
	fmt.Fprintf(stdout, "ok: the view %s.implicit.dev in namespace %s answered (%d items)\n", *resource, *namespace, items)
	return 0
}

// poll calls f every second until it returns true or ctx ends.
func poll(ctx context.Context, f func() bool) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if f() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
