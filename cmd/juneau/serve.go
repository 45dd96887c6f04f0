package main

import (
	"context"
	"crypto/tls"
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
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/pkg/juneauclient"
	"github.com/loutres/juneau/pkg/metricsauth"
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
	juneau, err := juneauclient.NewForConfig(cfg)
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

// metricsOptions are the flags of a role's metrics endpoint.
type metricsOptions struct {
	addr   string
	secure bool
}

func (o *metricsOptions) addFlags(fs *pflag.FlagSet, def, serves string) {
	fs.StringVar(&o.addr, "metrics-bind-address", def, "address serving "+serves+"; empty disables")
	fs.BoolVar(&o.secure, "metrics-secure", true, "serve over HTTPS (a self-signed certificate), /metrics only to a bearer token whose user may get it (TokenReview, SubjectAccessReview; docs/operations.md#metrics-and-health); false serves plain HTTP to anyone")
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct{ srv *http.Server }

// startMetricsServer registers the process collectors on a new registry and serves it:
// /metrics behind the API server's authentication and authorization when secure,
// /healthz and /readyz to anyone (the kubelet's probes carry no token). An empty
// address serves nothing but still returns a registry. The port is opened with
// SO_REUSEPORT: two node agents of one Node (hostNetwork, during a rolling update with
// maxSurge) share it, each connection served by one of them.
func startMetricsServer(ctx context.Context, o metricsOptions, kube kubernetes.Interface, h *health) (*metricsServer, *prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.addr == "" {
		return &metricsServer{}, reg, nil
	}
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	var tlsConfig *tls.Config
	if o.secure {
		guard, err := metricsauth.New(kube)
		if err != nil {
			return nil, nil, err
		}
		metrics = guard.Wrap(metrics)
		host, _ := os.Hostname()
		if tlsConfig, err = metricsauth.SelfSignedTLS(host); err != nil {
			return nil, nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
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
	l, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().String()
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server failed")
		}
	}()
	klog.FromContext(ctx).Info("Serving metrics and health", "address", addr, "secure", o.secure)
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
