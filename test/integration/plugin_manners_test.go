package integration

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// hungServer accepts connections and never answers: a server behind its
// APIService that hangs. It returns its URL.
func hungServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "https://" + l.Addr().String()
}

// TestPluginManners: kubectl implicit behaves as kubectl does where kubectl
// has a habit: a question of a hung server ends within a request timeout and
// says what to check; -v is klog's verbosity; a wrong argument count prints
// the usage; can-i takes -q and --subresource and names local RBAC once; a
// source that does not exist is NotFound; no server prints one error, not
// client-go's log lines.
func TestPluginManners(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)
	adm := pluginUser{t: t, name: "admin", path: path, kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	createNamespace(t, kube, "pm-team", nil, nil)

	t.Run("a hung server", func(t *testing.T) {
		url := hungServer(t)
		start := time.Now()
		r := adm.run(t.Context(), "why", "rolebinding", "x", "-n", "pm-team", "--server="+url, "--insecure-skip-tls-verify")
		took := time.Since(start)
		t.Logf("exit %d after %s\n%s", r.code, took.Round(time.Second), r.stderr)
		if r.code != 1 {
			t.Errorf("exit %d, want 1", r.code)
		}
		if !strings.Contains(r.stderr, "--request-timeout (default 10s)") || !strings.Contains(r.stderr, "kubectl get apiservice v1alpha1.implicit.dev") {
			t.Errorf("the error does not say what to check:\n%s", r.stderr)
		}
		// Discovery's two requests (/api, /apis), 10s each: not kubectl's discovery
		// timeout of 32s, nor a wait as long as the server holds on.
		if took > 30*time.Second {
			t.Errorf("a hung server held the question %s", took)
		}
	})

	t.Run("ServiceUnavailable", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"service unavailable","reason":"ServiceUnavailable","code":503}`))
		}))
		t.Cleanup(srv.Close)
		r := adm.run(t.Context(), "tree", "pm-team", "--server="+srv.URL)
		t.Logf("exit %d\n%s", r.code, r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "implicit.dev is unavailable") || !strings.Contains(r.stderr, "kubectl get apiservice v1alpha1.implicit.dev") {
			t.Errorf("exit %d; the error does not say what to check:\n%s", r.code, r.stderr)
		}
	})

	t.Run("no server: one error, no klog lines", func(t *testing.T) {
		r := adm.run(t.Context(), "why", "rolebinding", "x", "-n", "pm-team", "--server=https://127.0.0.1:1")
		t.Logf("exit %d\n%s", r.code, r.stderr)
		if r.code != 1 || regexp.MustCompile(`(?m)^[EIW]\d{4} `).MatchString(r.stderr) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("exit %d, want 1 with one error line:\n%s", r.code, r.stderr)
		}
	})

	t.Run("-v is klog's verbosity", func(t *testing.T) {
		adm := adm
		adm.t = t
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stderr, `"Response" verb="GET"`) || strings.Contains(r.stdout, "version") {
				return errorf("-v=6 logs no request, or prints the version:\n%s", r.stderr)
			}
			return nil
		}, "tree", "pm-team", "-v=6")
	})

	t.Run("a wrong argument count prints the usage", func(t *testing.T) {
		r := adm.run(t.Context(), "reach", "rolebinding")
		if r.code != 1 || !strings.Contains(r.stderr, "Usage:\n  kubectl implicit reach KIND NAME") || !strings.Contains(r.stderr, "See 'kubectl implicit reach -h'") {
			t.Errorf("exit %d:\n%s", r.code, r.stderr)
		}
	})

	t.Run("reach of a source that does not exist is NotFound", func(t *testing.T) {
		r := adm.run(t.Context(), "reach", "rb", "nosuch", "-n", globalNS)
		if r.code != 1 || !strings.Contains(r.stderr, `Error from server (NotFound): rolebindings.rbac.authorization.k8s.io "nosuch" not found`) {
			t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("can-i as kubectl auth can-i", func(t *testing.T) {
		r := adm.run(t.Context(), "can-i", "get", "pods", "-n", "pm-team", "-q")
		if r.code != 0 || r.stdout != "" {
			t.Errorf("-q: exit %d, output %q", r.code, r.stdout)
		}
		r = adm.run(t.Context(), "can-i", "get", "pods", "--subresource=log", "-n", "pm-team", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"subresource": "log"`) {
			t.Errorf("--subresource: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		createRoleBinding(t, kube, "pm-team", "pm-viewers", "view", "pm-viewers")
		config, err := cp.WriteUserKubeconfig("pm-viewer", "pm-viewers")
		if err != nil {
			t.Fatal(err)
		}
		viewer := pluginUser{t: t, name: "viewer", path: path, kubeconfig: config, home: t.TempDir()}
		t.Log("-o yaml keeps the inherited reason: pm-child inherits pm-team's binding")
		createNamespace(t, kube, "pm-child", map[string]string{"implicit.dev/parent": "pm-team"}, nil)
		viewer.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "allowed: true") || !strings.Contains(r.stdout, "implicit.dev") || !strings.Contains(r.stdout, "pm-viewers") {
				return errorf("-o yaml lacks the inherited reason")
			}
			return nil
		}, "can-i", "get", "pods", "-n", "pm-child", "-o", "yaml")
		viewer.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "yes\nlocal RBAC: allowed by RoleBinding \"pm-viewers/pm-team\"") {
				return errorf("not one local RBAC prefix")
			}
			return nil
		}, "can-i", "get", "pods", "-n", "pm-team")
	})

	t.Run("the views' short names collide with nothing", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"rolebindings": "irb", "roles": "irole", "networkpolicies": "inetpol"}
		var lists []*metav1.APIResourceList
		eventually(t, "discovery with the views' short names", func(context.Context) error {
			_, lists, err = dc.ServerGroupsAndResources()
			if err != nil {
				return err
			}
			for _, l := range lists {
				if l.GroupVersion != "implicit.dev/v1alpha1" {
					continue
				}
				for _, r := range l.APIResources {
					if w, ok := want[r.Name]; ok && !slices.Contains(r.ShortNames, w) {
						return errorf("%s.implicit.dev has short names %v, want %s", r.Name, r.ShortNames, w)
					}
				}
			}
			return nil
		})
		t.Log("no view's short name is another resource's (kubectl's own kinds, the CRDs installed), and no other short name is a view's")
		views, others := map[string]string{}, map[string]string{}
		for _, l := range lists {
			gv, _ := schema.ParseGroupVersion(l.GroupVersion)
			for _, r := range l.APIResources {
				for _, sn := range r.ShortNames {
					if gv.Group == "implicit.dev" {
						views[sn] = r.Name
					} else {
						others[sn] = r.Name + "." + gv.Group
					}
				}
			}
		}
		for sn, view := range views {
			if other, ok := others[sn]; ok {
				t.Errorf("the short name %s is %s.implicit.dev's and %s's", sn, view, other)
			}
		}
		adm := adm
		adm.t = t
		createRoleBinding(t, kube, "pm-team", "pm-short", "view", "pm-short")
		adm.expectKubectl(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "rolebinding.implicit.dev/pm-short") {
				return errorf("kubectl get irb does not list the view")
			}
			return nil
		}, "get", "irb", "-n", "pm-team", "-o", "name")
		adm.expectKubectl(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "GROUP:      networking.k8s.io") {
				return errorf("netpol is not NetworkPolicies' any more")
			}
			return nil
		}, "explain", "netpol")
	})
}
