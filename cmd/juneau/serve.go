package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// registerer is where components register their metrics.
type registerer = prometheus.Registerer

// restConfig loads --kubeconfig, or the in-cluster configuration when it is empty.
func (o *commonOptions) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	cfg.UserAgent = "juneau/" + version
	// No gzip: the API server would compress every watch event the informers receive,
	// which costs the API server and this process CPU and saves nothing on a cluster's
	// network (kube-controller-manager and kube-scheduler turn it off for the same
	// reason; docs/performance.md, "Row 1").
	cfg.DisableCompression = true
	return cfg, nil
}

// clients builds the Kubernetes and juneau clients every role uses from --kubeconfig.
func (o *commonOptions) clients() (kubernetes.Interface, versioned.Interface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	juneau, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return kube, juneau, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func metav1ObjectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// health answers /healthz while the process runs and /readyz once setReady was called.
type health struct{ ready atomic.Bool }

func newHealth() *health { return &health{} }

func (h *health) setReady() { h.ready.Store(true) }

func (h *health) healthz(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	if !h.ready.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct{ srv *http.Server }

// startMetricsServer registers the process collectors on a new registry and serves it.
// An empty address serves nothing but still returns a registry. The port is opened
// with SO_REUSEPORT: two node agents of one Node (hostNetwork, during a rolling update
// with maxSurge) share it, each connection served by one of them.
func startMetricsServer(ctx context.Context, addr string, h *health) (*metricsServer, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if addr == "" {
		return &metricsServer{}, reg, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/readyz", h.readyz)
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server failed")
		}
	}()
	klog.FromContext(ctx).Info("Serving metrics and health", "address", l.Addr().String())
	return &metricsServer{srv: srv}, reg, nil
}

func (m *metricsServer) shutdown() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}
