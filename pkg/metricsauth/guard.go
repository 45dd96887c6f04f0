// Package metricsauth guards an HTTP endpoint the way Kubernetes components guard
// their /metrics: a client presents a bearer token, the API server says who it is
// (TokenReview) and whether that user may `get` the path (SubjectAccessReview, a
// non-resource URL in RBAC), and the answers are cached for a while. It also makes
// the self-signed certificate the endpoint is served with (docs/operations.md#metrics-and-health).
package metricsauth

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// Cache lifetimes of the API server's answers: a scraper asks every few seconds with
// the same token, so each answer saves many reviews; a denial is kept shorter, so a
// RoleBinding just created takes effect soon.
const (
	tokenCacheTTL = 2 * time.Minute
	allowCacheTTL = 5 * time.Minute
	denyCacheTTL  = 30 * time.Second
	reviewTimeout = 10 * time.Second
)

// Guard lets a request through when its bearer token is valid and its user may get
// the requested path.
type Guard struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// New builds a Guard that asks the API server through kube.
func New(kube kubernetes.Interface) (*Guard, error) {
	// The retry policy of the API server's own delegating options.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 tokenCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("token review authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("subject access review authorizer: %w", err)
	}
	return &Guard{authn: authn, authz: authz}, nil
}

// Wrap returns next behind the guard: 401 without a valid token, 403 for a user who
// may not get the path, next otherwise.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context()).WithValues("path", r.URL.Path, "remote", r.RemoteAddr)
		res, ok, err := g.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			logger.V(4).Info("Metrics request not authenticated", "err", err)
			http.Error(w, "Unauthorized: a bearer token the API server accepts is required", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		attrs := authorizer.AttributesRecord{User: res.User, Verb: verb, Path: r.URL.Path}
		decision, reason, err := g.authz.Authorize(r.Context(), attrs)
		if err != nil {
			logger.Error(err, "Metrics request not authorized: the SubjectAccessReview failed", "user", res.User.GetName())
			http.Error(w, "authorization failed; retry", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			logger.V(4).Info("Metrics request forbidden", "user", res.User.GetName(), "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), verb, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SelfSignedTLS is a server configuration with a certificate made now, for host and
// localhost. Scrapers do not verify it (there is no CA to verify it with); the token
// is what authenticates, and TLS keeps it and the metrics private on the wire.
func SelfSignedTLS(host string) (*tls.Config, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		host = "localhost"
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate for %s: %w", host, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
