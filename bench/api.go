package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/test/framework"
)

// Client-side rate limits of the controller and of the benchmark's own writers: high
// enough that neither is throttled, so the API server and the code are what is measured.
const (
	apiQPS   = 5000
	apiBurst = 10000
)

// startControlPlane starts a fresh etcd + kube-apiserver, stopped when the benchmark ends.
func startControlPlane(ctx context.Context, e *env) *framework.ControlPlane {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := framework.Start(cctx)
	if err != nil {
		e.Fatalf("control plane: %v", err)
	}
	e.Cleanup(cp.Stop)
	e.Logf("control plane up in %s", time.Since(start).Round(100*time.Millisecond))
	return cp
}

// fastConfig is cp's client configuration without client-side throttling worth the name.
func fastConfig(cp *framework.ControlPlane) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = apiQPS, apiBurst
	return cfg
}

// fastClient is a juneau client on cp without client-side throttling worth the name.
func fastClient(cp *framework.ControlPlane) juneauclient.Interface {
	return juneauclient.NewForConfigOrDie(fastConfig(cp))
}

// fastKube is a Kubernetes client on cp without client-side throttling worth the name.
func fastKube(cp *framework.ControlPlane) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(fastConfig(cp))
}

// controllerProcess is a running `juneau controller`.
type controllerProcess struct {
	*framework.Component
	pid int
}

var metricsAddress = regexp.MustCompile(`"Serving metrics and health".* address="([^"]+)"`)

// startController runs `juneau controller` against cp and waits until its caches are
// synced (/readyz).
func startController(e *env, cp *framework.ControlPlane, extra ...string) *controllerProcess {
	args := append([]string{"controller", "--kubeconfig=" + cp.Kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false", fmt.Sprintf("--kube-api-qps=%d", apiQPS), fmt.Sprintf("--kube-api-burst=%d", apiBurst),
		fmt.Sprintf("--workers=%d", e.cfg.workers)}, extra...)
	c := framework.StartCommand(e, "controller", e.cfg.juneau, args...)
	var addr string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			if done, err := c.Exited(); done {
				return false, fmt.Errorf("controller exited: %v", err)
			}
			if addr == "" {
				m := metricsAddress.FindStringSubmatch(c.Log())
				if m == nil {
					return false, nil
				}
				addr = m[1]
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
	if err != nil {
		e.Fatalf("controller not ready: %v\n%s", err, c.LogTail(20))
	}
	pid, err := childProcess("controller", "--kubeconfig="+cp.Kubeconfig)
	if err != nil {
		e.Fatal(err)
	}
	return &controllerProcess{Component: c, pid: pid}
}

func ensureNamespace(e *env, cp *framework.ControlPlane, name string) {
	_, err := cp.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.Fatal(err)
	}
}

// createNetwork creates an arp AddressPool over addresses and an ExternalNetwork of the
// same name using it.
func createNetwork(e *env, cp *framework.ControlPlane, name string, addresses ...string) {
	ctx := context.Background()
	j := cp.Juneau.JuneauV1alpha1()
	if _, err := j.AddressPools().Create(ctx, &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.AddressPoolSpec{AdvertiseMode: v1alpha1.AdvertiseARP, Addresses: addresses},
	}, metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
	if _, err := j.ExternalNetworks().Create(ctx, &v1alpha1.ExternalNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{name}},
	}, metav1.CreateOptions{}); err != nil {
		e.Fatal(err)
	}
}

// firstSeen records when each object of a watch is first seen in a wanted state, the
// way a client would notice.
type firstSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
	want int
	done chan struct{}
}

// watchFirstSeen lists and watches through lw until want objects were seen with wanted
// true, or ctx ends. A watch the server closes is resumed from the last resource version.
func watchFirstSeen(ctx context.Context, e *env, lw cache.ListerWatcherWithContext, wanted func(runtime.Object) bool, want int) *firstSeen {
	w := &firstSeen{seen: map[string]time.Time{}, want: want, done: make(chan struct{})}
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		e.Fatal(err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		e.Fatal(err)
	}
	rv := lm.GetResourceVersion()
	wctx, cancel := context.WithCancel(ctx)
	e.Cleanup(cancel)
	go func() {
		defer close(w.done)
		for wctx.Err() == nil {
			wi, err := lw.WatchWithContext(wctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				return
			}
			for ev := range wi.ResultChan() {
				m, err := meta.Accessor(ev.Object)
				if err != nil {
					continue
				}
				rv = m.GetResourceVersion()
				if (ev.Type == watch.Added || ev.Type == watch.Modified) && wanted(ev.Object) && w.observe(m.GetName()) {
					wi.Stop()
					return
				}
			}
		}
	}()
	return w
}

// observe records name if it is seen for the first time; true once want were seen.
func (w *firstSeen) observe(name string) bool {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[name]; !ok {
		w.seen[name] = now
	}
	return len(w.seen) >= w.want
}

// wait blocks until every object was seen or the deadline passed, and returns when each
// object seen so far was first seen in the wanted state.
func (w *firstSeen) wait(deadline time.Time) map[string]time.Time {
	select {
	case <-w.done:
	case <-time.After(time.Until(deadline)):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// watchAvailable watches the ElasticIPs of namespace ns until want were seen Available
// (phase Available with an address).
func watchAvailable(ctx context.Context, e *env, c juneauclient.Interface, ns string, want int) *firstSeen {
	eips := c.JuneauV1alpha1().ElasticIPs(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return eips.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return eips.Watch(ctx, o)
		},
	}
	return watchFirstSeen(ctx, e, lw, func(o runtime.Object) bool {
		eip, ok := o.(*v1alpha1.ElasticIP)
		return ok && eip.Status.Phase == v1alpha1.ElasticIPAvailable && eip.Status.Address != ""
	}, want)
}

// usage reads the controller's RSS and CPU time.
func (c *controllerProcess) usage(e *env) procUsage {
	u, err := readUsage(c.pid)
	if err != nil {
		e.Fatalf("controller usage: %v", err)
	}
	return u
}
