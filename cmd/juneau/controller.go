package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/controllers/elasticip"
	"github.com/loutres/juneau/pkg/controllers/manager"
	"github.com/loutres/juneau/pkg/controllers/podeip"
	"github.com/loutres/juneau/pkg/controllers/webhookreplicas"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauscheme "github.com/loutres/juneau/pkg/generated/clientset/versioned/scheme"
)

type controllerOptions struct {
	common         *commonOptions
	workers        int
	metrics        metricsOptions
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	// heartbeatNamespace holds the node agents' heartbeat Leases: the agents' own
	// namespace, not the controller's.
	heartbeatNamespace string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	orphanGrace        time.Duration
	resync             time.Duration
	// statefulKinds are workload kinds ("group/Kind") whose Pods keep their automatic
	// ElasticIP when re-created under the same name, besides apps/StatefulSet.
	statefulKinds []string
	// webhook* find and probe the webhook's replicas (pkg/controllers/webhookreplicas).
	webhookNamespace, webhookSelector string
	webhookPort, webhookProbeFailures int
	webhookProbeInterval              time.Duration
}

func newControllerCommand(common *commonOptions) *cobra.Command {
	o := &controllerOptions{common: common}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "run the cluster-level controllers (leader-elected)",
		Args:  cobra.NoArgs,
		RunE:  role(o.run),
	}
	fs := cmd.Flags()
	fs.IntVar(&o.workers, "workers", 4, "workers per controller")
	o.metrics.addFlags(fs, ":9090", "/metrics, /healthz and /readyz")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader through a Lease so only one replica acts")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "juneau-system"), "namespace of the leader-election Lease")
	fs.StringVar(&o.heartbeatNamespace, "heartbeat-lease-namespace", "juneau-node", "namespace of the node agents' heartbeat Leases, juneau-node-<node> (the agents' namespace)")
	fs.StringVar(&o.leaseName, "leader-elect-name", "juneau-controller", "name of the leader-election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lease lasts without renewal")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before giving up")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew")
	fs.DurationVar(&o.orphanGrace, "orphan-claim-grace", elasticip.DefaultOrphanGrace, "how long a claim whose consumer is gone stays before it is deleted")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Minute, "informer resync period")
	fs.StringSliceVar(&o.statefulKinds, "stateful-workload-kinds", nil,
		"workload kinds (group/Kind, e.g. apps.kruise.io/StatefulSet) whose Pods keep their automatic ElasticIP when re-created under the same name, besides apps/StatefulSet")
	fs.StringVar(&o.webhookNamespace, "webhook-namespace", envOr("POD_NAMESPACE", "juneau-system"), "namespace of the webhook's replicas")
	fs.StringVar(&o.webhookSelector, "webhook-selector", "app.kubernetes.io/name=juneau,app.kubernetes.io/component=webhook", "label selector of the webhook's replicas")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port the webhook's replicas serve on")
	fs.DurationVar(&o.webhookProbeInterval, "webhook-probe-interval", 200*time.Millisecond,
		"how often each Ready webhook replica's /healthz is asked (and each probe's timeout); 0 turns the probing off")
	fs.IntVar(&o.webhookProbeFailures, "webhook-probe-failures", 3,
		"missed probes in a row, while another replica answers, that get a webhook replica deleted (its Node died)")
	return cmd
}

func (o *controllerOptions) run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("controller")
	ctx = klog.NewContext(ctx, logger)
	kube, juneau, err := o.common.clients()
	if err != nil {
		return err
	}
	health := newHealth()
	srv, reg, err := startMetricsServer(ctx, o.metrics, kube, health)
	if err != nil {
		return err
	}
	defer srv.shutdown()

	runControllers := func(ctx context.Context) error {
		return o.runControllers(ctx, kube, juneau, reg, health)
	}
	if !o.leaderElect {
		return runControllers(ctx)
	}
	// A standby replica is healthy and ready too: it only waits for the Lease. Were it
	// not ready, a rolling update of the Deployment would stall on it.
	health.setReady()
	return o.runElected(ctx, kube, runControllers)
}

// runElected runs fn only while holding the Lease. Losing it ends the process: the
// controllers' caches and in-flight writes must not outlive leadership.
func (o *controllerOptions) runElected(ctx context.Context, kube kubernetes.Interface, fn func(context.Context) error) error {
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(o.leaseNamespace, o.leaseName),
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	errc := make(chan error, 1)
	lost := errors.New("leader election lost")
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            finishingLock{Interface: lock, timeout: o.renewDeadline},
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.FromContext(ctx).Info("Became leader", "identity", id)
				errc <- fn(ctx)
			},
			OnStoppedLeading: func() {
				select {
				case errc <- lost:
				default:
				}
			},
		},
	})
	select {
	case err := <-errc:
		if ctx.Err() != nil {
			return nil // normal shutdown
		}
		return err
	default:
		return ctx.Err()
	}
}

// runControllers builds every controller on shared informers, starts the informers and
// runs the controllers until ctx ends.
func (o *controllerOptions) runControllers(ctx context.Context, kube kubernetes.Interface, juneau versioned.Interface, reg registerer, health *health) error {
	kinds, err := podeip.ParseWorkloadKinds(o.statefulKinds)
	if err != nil {
		return fmt.Errorf("--stateful-workload-kinds: %w", err)
	}
	recorder, stopEvents := newRecorder(ctx, kube)
	defer stopEvents()
	selector, err := labels.Parse(o.webhookSelector)
	if err != nil {
		return fmt.Errorf("--webhook-selector: %w", err)
	}
	m, err := manager.New(manager.Config{
		Kube: kube, Juneau: juneau, Recorder: recorder, Registerer: reg, Resync: o.resync,
		LeaseNamespace: o.heartbeatNamespace, OrphanGrace: o.orphanGrace, StatefulKinds: kinds,
		WebhookReplicas: webhookreplicas.Options{Namespace: o.webhookNamespace, Selector: selector, Port: o.webhookPort,
			Interval: o.webhookProbeInterval, Failures: o.webhookProbeFailures},
	})
	if err != nil {
		return err
	}
	return m.Run(ctx, o.workers, health.setReady)
}

// newRecorder returns an Event recorder that knows juneau's kinds.
func newRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, func()) {
	scheme := runtime.NewScheme()
	_ = kubescheme.AddToScheme(scheme)
	_ = juneauscheme.AddToScheme(scheme)
	// Not stopped by ctx: a worker finishing its last sync after ctx ended may still
	// record an Event; the caller stops the broadcaster once the controllers returned.
	b := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(eventSink{EventSink: &typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")}, logger: klog.FromContext(ctx)})
	return b.NewRecorder(scheme, corev1.EventSource{Component: "juneau-controller"}), b.Shutdown
}
