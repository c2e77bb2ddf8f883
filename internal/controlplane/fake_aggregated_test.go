package controlplane_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// fakeAggregatedFlag, as the first argument, makes the test binary act as a
// minimal aggregated API server instead of running tests (see TestMain):
// StartAggregated and RegisterAPIService can then be tested before, and
// independently of, implicit-apiserver.
const fakeAggregatedFlag = "--controlplane-fake-aggregated"

// whoamiPath answers, as JSON, who kube-apiserver's proxy says the user is
// and which client certificate the proxy presented.
const whoamiPath = "/apis/" + controlplane.APIGroup + "/" + controlplane.APIVersion + "/whoami"

// whoami is the answer at whoamiPath.
type whoami struct {
	User        string   `json:"user"`
	Groups      []string `json:"groups"`
	ProxyCN     string   `json:"proxyCN"`
	ProxyIssuer string   `json:"proxyIssuer"`
}

// runFakeAggregated serves, on --bind-address:--secure-port with a
// self-signed certificate, just enough for the aggregation layer: /readyz,
// discovery of implicit.dev/v1alpha1 and whoamiPath. It accepts and ignores
// the other flags StartAggregated passes, and exits on SIGTERM.
func runFakeAggregated() error {
	fs := flag.NewFlagSet("fake-aggregated", flag.ContinueOnError)
	fs.Bool(fakeAggregatedFlag[2:], true, "")
	port := fs.Int("secure-port", 0, "")
	bind := fs.String("bind-address", "", "")
	for _, name := range []string{"kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig", "cert-dir"} {
		fs.String(name, "", "")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	gv := controlplane.APIGroup + "/" + controlplane.APIVersion
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/apis", func(w http.ResponseWriter, _ *http.Request) {
		version := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: controlplane.APIVersion}
		writeJSON(w, &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{{Name: controlplane.APIGroup, Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version}},
		})
	})
	mux.HandleFunc("/apis/"+gv, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: []metav1.APIResource{},
		})
	})
	mux.HandleFunc(whoamiPath, func(w http.ResponseWriter, r *http.Request) {
		answer := whoami{User: r.Header.Get("X-Remote-User"), Groups: r.Header.Values("X-Remote-Group")}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			answer.ProxyCN = r.TLS.PeerCertificates[0].Subject.CommonName
			answer.ProxyIssuer = r.TLS.PeerCertificates[0].Issuer.CommonName
		}
		writeJSON(w, answer)
	})
	server := &http.Server{
		Addr:              net.JoinHostPort(*bind, strconv.Itoa(*port)),
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequestClientCert,
		},
	}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM)
		<-stop
		_ = server.Close()
	}()
	if err := server.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// selfSigned returns a self-signed serving certificate for 127.0.0.1 and
// localhost, as k8s.io/apiserver generates in --cert-dir.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fake-aggregated"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
