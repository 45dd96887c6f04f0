// Package webhookreplicas is the controller that takes replicas of juneau's admission
// webhook out of the API server's way when their Node dies. Such a replica stays Ready,
// and in the webhook Service's endpoints, until the Node is NotReady (50 s by default);
// meanwhile every call the API server sends it fails after the webhook's timeout, and
// with it the write being validated: a dead Node would slow every juneau write of the
// cluster. The controller asks each Ready replica's /healthz every Interval; a replica
// whose port does not even accept the connection (HealthzProbe) Failures rounds in a
// row while another one answers is deleted, which takes its endpoint out at once (a
// terminating Pod's endpoint is not ready) and has its Deployment start another
// (docs/operations.md#a-node-dies).
package webhookreplicas

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// ControllerName names the controller and its log lines.
const ControllerName = "webhook-replicas"

// Options say which Pods are the webhook's replicas and how they are probed.
type Options struct {
	// Namespace and Selector find the replicas.
	Namespace string
	Selector  labels.Selector
	// Port is the replicas' serving port (the container's, not the Service's).
	Port int
	// Interval between rounds, and each probe's timeout.
	Interval time.Duration
	// Failures in a row that get a replica deleted.
	Failures int
	// Probe asks the replica at address (host:port) whether it answers; HealthzProbe
	// when nil.
	Probe func(ctx context.Context, address string) error
}

// HealthzProbe is a Probe: GET https://<address>/healthz on a connection of its own
// (the webhook closes every connection after one answer). The replica is probed for
// reachability, as the kubelet's HTTPS probes do, so its certificate is not verified
// (nothing is sent that needs it), and it has answered once its port accepted the
// connection: the kernel of a live Node completes that at once, however busy the
// webhook is with other reviews, while a dead Node (or a replica whose process is
// gone) never does. A replica flooded with reviews may take longer than the probe's
// timeout to finish the handshake and answer, and is not deleted for it. The probe
// still completes the request when it can, since the webhook logs a handshake cut short.
func HealthzProbe() func(ctx context.Context, address string) error {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // reachability only, see above
		DisableKeepAlives: true,
	}}
	return func(ctx context.Context, address string) error {
		var connected atomic.Bool
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			ConnectDone: func(_, _ string, err error) {
				if err == nil {
					connected.Store(true)
				}
			},
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+address+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			if connected.Load() {
				return nil
			}
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil
	}
}

// Controller probes the replicas. It keeps no queue: each round looks at every replica.
type Controller struct {
	kube     kubernetes.Interface
	pods     corelisters.PodLister
	synced   cache.InformerSynced
	recorder record.EventRecorder
	opts     Options
	misses   map[types.UID]int
}

// NewController builds the controller on the shared Pod informer; it starts nothing.
func NewController(kube kubernetes.Interface, pods coreinformers.PodInformer, recorder record.EventRecorder, opts Options) *Controller {
	if opts.Probe == nil {
		opts.Probe = HealthzProbe()
	}
	return &Controller{kube: kube, pods: pods.Lister(), synced: pods.Informer().HasSynced, recorder: recorder, opts: opts,
		misses: map[types.UID]int{}}
}

// Run probes until ctx ends. workers is ignored: one round at a time.
func (c *Controller) Run(ctx context.Context, _ int) {
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	logger.Info("Probing webhook replicas", "namespace", c.opts.Namespace, "selector", c.opts.Selector.String(),
		"port", c.opts.Port, "interval", c.opts.Interval, "failures", c.opts.Failures)
	// A round starts every Interval, however long the last one took: a dead replica's
	// probe takes the whole Interval to time out, and sliding rounds would then ask
	// every 2 Intervals, taking twice as long to give up on it.
	wait.NonSlidingUntilWithContext(ctx, c.Round, c.opts.Interval)
}

// Round probes every replica once, in parallel, and deletes those Decide gives up on.
func (c *Controller) Round(ctx context.Context) {
	logger := klog.FromContext(ctx)
	all, err := c.pods.Pods(c.opts.Namespace).List(c.opts.Selector)
	if err != nil {
		logger.Error(err, "Listing webhook replicas")
		return
	}
	var replicas []*corev1.Pod
	for _, p := range all {
		if Probed(p) {
			replicas = append(replicas, p)
		}
	}
	reached := make(map[types.UID]bool, len(replicas))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range replicas {
		wg.Go(func() {
			probeCtx, cancel := context.WithTimeout(ctx, c.opts.Interval)
			defer cancel()
			err := c.opts.Probe(probeCtx, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(c.opts.Port)))
			mu.Lock()
			reached[p.UID] = err == nil
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	var dead []*corev1.Pod
	c.misses, dead = Decide(c.misses, replicas, reached, c.opts.Failures)
	for _, p := range dead {
		c.delete(ctx, p)
	}
}

// delete deletes one replica, that very Pod (a replacement of the same name is not
// touched), and tells why.
func (c *Controller) delete(ctx context.Context, p *corev1.Pod) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(p), "node", p.Spec.NodeName)
	missed := time.Duration(c.opts.Failures) * c.opts.Interval
	uid := p.UID
	err := c.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logger.Error(err, "Deleting an unreachable webhook replica")
		return
	}
	delete(c.misses, uid)
	logger.Info("Deleted an unreachable webhook replica", "address", p.Status.PodIP, "unreachableFor", missed)
	status.Eventf(c.recorder, p, v1alpha1.EventWebhookReplicaUnreachable,
		"webhook replica at %s on Node %q did not answer the controller for %s while another replica did: deleted, so that the API server stops calling it",
		p.Status.PodIP, p.Spec.NodeName, missed)
}
