package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// maxBodyBytes bounds request bodies; a Plumbing message is a few hundred bytes.
	maxBodyBytes = 64 << 10
	// shutdownTimeout bounds how long Run waits for requests in flight on return.
	shutdownTimeout = 5 * time.Second
	// SocketMode lets only root (the container runtime, hence the plugin) connect; the
	// server checks each peer's credentials as well (see peer.go).
	SocketMode fs.FileMode = 0o600
)

// Server answers the CNI plugin on a unix socket.
type Server struct {
	source   Source
	observer Observer
}

// Option configures a Server.
type Option func(*Server)

// WithObserver makes the server pass the plugin's plumbing reports to o.
func WithObserver(o Observer) Option { return func(s *Server) { s.observer = o } }

// New returns a server backed by source. It starts nothing.
func New(source Source, opts ...Option) *Server {
	s := &Server{source: source}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Run listens on socketPath and serves until ctx ends; then it stops accepting, lets
// requests in flight finish and removes the socket.
func (s *Server) Run(ctx context.Context, socketPath string) error {
	l, err := Listen(socketPath)
	if err != nil {
		return err
	}
	return s.Serve(ctx, l)
}

// Serve serves on l until ctx ends. Only root peers are answered (see peer.go), so l
// must be a unix socket listener. The socket file is removed on return.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	logger := klog.FromContext(ctx).WithName("cniserver")
	srv := &http.Server{
		Handler:           onlyRoot(s.Handler()),
		ConnContext:       withPeer,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return klog.NewContext(context.WithoutCancel(ctx), logger) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	logger.Info("Serving the CNI plugin", "address", l.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("serve CNI socket %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down CNI socket %s: %w", l.Addr(), err)
	}
	return nil
}

// Listen creates the socket's directory, removes a stale socket left by a previous
// agent, listens and sets the socket's mode to SocketMode. It refuses to replace a
// socket another process still serves, or a path that is not a socket.
func Listen(socketPath string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socketPath), 0o750); err != nil {
		return nil, fmt.Errorf("create directory of CNI socket %s: %w", socketPath, err)
	}
	if err := removeStale(socketPath); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("listen on CNI socket %s: %w", socketPath, err)
	}
	// The listener removes the file when closed (net.UnixListener unlinks by default).
	if err := os.Chmod(socketPath, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("set mode of CNI socket %s: %w", socketPath, err)
	}
	return l, nil
}

func removeStale(socketPath string) error {
	fi, err := os.Lstat(socketPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect CNI socket %s: %w", socketPath, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("CNI socket path %s exists and is not a socket", socketPath)
	}
	if c, err := net.DialTimeout("unix", socketPath, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("CNI socket %s is served by another process", socketPath)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale CNI socket %s: %w", socketPath, err)
	}
	return nil
}

// Handler is the HTTP handler of the protocol, without the check of the peer that
// Serve adds.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathInterfaces, s.interfaces)
	mux.HandleFunc("POST "+PathPlumbed, s.plumbing(true))
	mux.HandleFunc("POST "+PathUnplumbed, s.plumbing(false))
	return mux
}

func (s *Server) interfaces(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns, pod, uid := q.Get("namespace"), q.Get("pod"), types.UID(q.Get("uid"))
	if ns == "" || pod == "" {
		writeError(w, http.StatusBadRequest, "query parameters namespace and pod are required")
		return
	}
	nics, err := s.source.DirectInterfaces(ns, pod, uid)
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrPodUnknown):
			status = http.StatusNotFound
		case errors.Is(err, ErrNotReady):
			status = http.StatusServiceUnavailable
		}
		klog.FromContext(r.Context()).V(2).Info("Cannot answer the CNI plugin",
			"pod", klog.KRef(ns, pod), "uid", uid, "err", err)
		writeError(w, status, err.Error())
		return
	}
	if nics == nil {
		nics = []Interface{}
	}
	writeJSON(w, http.StatusOK, InterfacesResponse{Interfaces: nics})
}

func (s *Server) plumbing(plumbed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var p Plumbing
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("decode plumbing report: %v", err))
			return
		}
		if p.Namespace == "" || p.Pod == "" {
			writeError(w, http.StatusBadRequest, "namespace and pod are required")
			return
		}
		logger := klog.FromContext(r.Context())
		logger.V(2).Info("CNI plugin report", "plumbed", plumbed, "pod", klog.KRef(p.Namespace, p.Pod),
			"containerID", p.ContainerID, "interfaces", len(p.Interfaces))
		if s.observer != nil {
			var err error
			if plumbed {
				err = s.observer.Plumbed(r.Context(), p)
			} else {
				err = s.observer.Unplumbed(r.Context(), p)
			}
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}
