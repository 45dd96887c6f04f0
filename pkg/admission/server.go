package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// URL paths served by the webhook.
const (
	// PathJuneau validates the juneau.loutres.me kinds.
	PathJuneau = "/validate-juneau"
	// PathPods validates Pods carrying juneau annotations.
	PathPods = "/validate-pods"
	// PathHealthz answers while the process runs.
	PathHealthz = "/healthz"
	// PathReadyz answers once the informer caches are synced.
	PathReadyz = "/readyz"
)

// Server limits and timeouts. The API server gives a webhook at most 30s (ours are
// registered with 2s, and 1s for Pods), so nothing legitimate needs longer.
const (
	// MaxRequestBytes bounds an AdmissionReview body: an object is at most ~1.5 MiB in
	// etcd, and a review of an UPDATE carries two of them.
	MaxRequestBytes    = 3 << 20
	readHeaderTimeout  = 10 * time.Second
	readWriteTimeout   = 30 * time.Second
	idleTimeout        = 90 * time.Second
	shutdownTimeout    = 10 * time.Second
	maxHeaderBytes     = 1 << 20
	defaultBindAddress = ":9443"
)

// ServerConfig says where and with which certificate the webhook listens.
type ServerConfig struct {
	// BindAddress is host:port; empty means ":9443".
	BindAddress string
	// CertFile and KeyFile hold the serving certificate (PEM); they are re-read when
	// they change.
	CertFile, KeyFile string
}

// Server serves the validation paths and the health endpoints over TLS.
type Server struct {
	cfg      ServerConfig
	handler  *Handler
	ready    func() bool
	listener net.Listener
}

// NewServer prepares a server for h; ready reports whether /readyz should succeed.
// Nothing listens until Run.
func NewServer(cfg ServerConfig, h *Handler, ready func() bool) *Server {
	if cfg.BindAddress == "" {
		cfg.BindAddress = defaultBindAddress
	}
	return &Server{cfg: cfg, handler: h, ready: ready}
}

// Listen opens the listening socket, so a caller can learn the bound address (with
// port 0) before Run. Run calls it when the caller did not.
func (s *Server) Listen() (net.Addr, error) {
	if s.listener == nil {
		l, err := net.Listen("tcp", s.cfg.BindAddress)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", s.cfg.BindAddress, err)
		}
		s.listener = l
	}
	return s.listener.Addr(), nil
}

// Mux is the server's request router: the validation paths and health endpoints.
func (s *Server) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(PathJuneau, s.handler.ForPath(PathJuneau))
	mux.Handle(PathPods, s.handler.ForPath(PathPods))
	mux.HandleFunc(PathHealthz, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc(PathReadyz, func(w http.ResponseWriter, _ *http.Request) {
		if s.ready != nil && !s.ready() {
			http.Error(w, "informer caches are not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// Run serves until ctx ends, then shuts down gracefully: in-flight reviews finish
// (bounded by shutdownTimeout) while no new connection is accepted.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	certs, err := NewCertificateReloader(logger, s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return err
	}
	addr, err := s.Listen()
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Mux(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readWriteTimeout,
		WriteTimeout:      readWriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		// HTTP/1.1 only: over HTTP/2 the API server sends every review on one connection
		// to one replica, and when that replica's Node dies every call times out until
		// the connection's health check gives up (about 20 s). Over HTTP/1.1 a call that
		// timed out closes its connection, and the next one dials any replica
		// (docs/operations.md#a-node-dies).
		Protocols: serverProtocols(),
		// Requests keep the logger but not the cancellation of ctx: a review under way
		// when shutdown starts is still answered.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// No keep-alive either: the API server picks a replica when it dials (the Service's
	// endpoints, resolved per connection), so a connection it keeps idle to a replica
	// whose Node then dies costs the next review sent on it the webhook's timeout, even
	// after the replica left the endpoints. Every review closes its connection, and
	// the next one dials a replica that is in the endpoints then. The price is a TLS
	// handshake per review (ECDSA P-256: well under a millisecond).
	srv.SetKeepAlivesEnabled(false)
	errc := make(chan error, 1)
	go func() {
		logger.Info("Serving admission webhook", "address", addr.String())
		errc <- srv.ServeTLS(s.listener, "", "")
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("webhook server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down the webhook server: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook server: %w", err)
	}
	return nil
}

// serverProtocols are the protocols the webhook serves: HTTP/1.1 alone.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}
