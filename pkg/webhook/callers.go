package webhook

import (
	"crypto/x509"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// Callers says who may call the webhook endpoints (/authorize and the
// admission guards): kube-apiserver, presenting a client certificate that
// CA verifies for client authentication and, when Names is not empty, whose
// common name is one of Names.
//
// The endpoints are kept out of the generic API server's own
// authentication (SkipAuthentication) and authorization (always-allowed
// paths): kube-apiserver's webhook client certificate need not be one its
// client CA signed, and a request that it can't verify would be refused
// before reaching the check here. Require verifies the TLS peer chain
// itself, so the serving TLS configuration must request client certificates
// advertising CA (see the apiserver's wiring).
type Callers struct {
	// CA verifies the callers' certificates; nil refuses every caller.
	CA dynamiccertificates.CAContentProvider
	// Names, when set, are the common names allowed.
	Names []string
}

// Require wraps h: a request without a verified client certificate is
// refused, 401 without any, 403 with one CA does not verify or whose common
// name is not allowed.
func (c Callers) Require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			klog.V(4).InfoS("Webhook caller refused: no client certificate", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "implicit.dev: this webhook answers kube-apiserver only: present its webhook client certificate", http.StatusUnauthorized)
			return
		}
		if err := c.verify(r.TLS.PeerCertificates); err != nil {
			klog.V(4).InfoS("Webhook caller refused", "path", r.URL.Path, "remote", r.RemoteAddr, "subject", r.TLS.PeerCertificates[0].Subject.String(), "err", err)
			http.Error(w, "implicit.dev: this webhook answers kube-apiserver only: "+err.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// verify checks a peer chain, leaf first.
func (c Callers) verify(chain []*x509.Certificate) error {
	if c.CA == nil {
		return errNoCA
	}
	opts, ok := c.CA.VerifyOptions()
	if !ok {
		return errNoCA
	}
	if len(chain) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, ic := range chain[1:] {
			opts.Intermediates.AddCert(ic)
		}
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return errUnverified
	}
	if len(c.Names) > 0 && !slices.Contains(c.Names, chain[0].Subject.CommonName) {
		return errName
	}
	return nil
}

type callerError string

func (e callerError) Error() string { return string(e) }

const (
	errNoCA       callerError = "no webhook client CA is configured (--webhook-client-ca-file)"
	errUnverified callerError = "the client certificate is not signed by the webhook client CA for client authentication"
	errName       callerError = "the client certificate's common name is not in --webhook-client-names"
)

// SkipAuthentication returns an authenticator that leaves requests for
// paths to the webhook endpoints' own check (Callers.Require): it answers
// them as the anonymous user without asking next, and asks next for every
// other path. The paths must be always allowed by the authorizer.
func SkipAuthentication(next authenticator.Request, paths []string) authenticator.Request {
	return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if slices.Contains(paths, r.URL.Path) {
			return &authenticator.Response{User: &user.DefaultInfo{
				Name: user.Anonymous, Groups: []string{user.AllUnauthenticated},
			}}, true, nil
		}
		return next.AuthenticateRequest(r)
	})
}

// Serving is what the webhook endpoints' authentication changes in the
// generic server's configuration, before its handler chain is built.
type Serving struct {
	// Authenticator is the generic authentication's (the field of
	// k8s.io/apiserver's AuthenticationInfo).
	Authenticator *authenticator.Request
	// ApplyClientCert makes the serving TLS configuration advertise ca for
	// client certificates (AuthenticationInfo.ApplyClientCert).
	ApplyClientCert func(ca dynamiccertificates.CAContentProvider) error
}

// Prepare sets up the webhook endpoints' own authentication: the generic
// authentication skips authorizePath and admissionPaths (a webhook client
// certificate need not be one it knows, and one it can't verify would be
// refused), and the serving TLS configuration requests client certificates
// advertising c.CA too (a client only sends a certificate signed by an
// advertised CA). It returns what wraps each admission webhook: Require,
// or nothing when anonymous; authorizePath always requires a certificate.
func (c Callers) Prepare(s Serving, authorizePath string, admissionPaths []string, anonymous bool) (func(http.Handler) http.Handler, error) {
	paths := append([]string{authorizePath}, admissionPaths...)
	if *s.Authenticator != nil {
		*s.Authenticator = SkipAuthentication(*s.Authenticator, paths)
	}
	if c.CA != nil {
		if err := s.ApplyClientCert(c.CA); err != nil {
			return nil, err
		}
	} else {
		klog.Warningf("No --webhook-client-ca-file: the webhook endpoints %v refuse every caller that needs a client certificate", paths)
	}
	if anonymous {
		klog.Warningf("--anonymous-webhooks: the admission webhooks %v answer callers without a client certificate; "+
			"only a network policy keeps anyone else from them (%s still requires one)", admissionPaths, authorizePath)
		return func(h http.Handler) http.Handler { return h }, nil
	}
	return c.Require, nil
}
