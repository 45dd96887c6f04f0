package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/admission"
	"github.com/loutres/juneau/pkg/admission/certs"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

type webhookOptions struct {
	common      *commonOptions
	bindAddress string
	certFile    string
	keyFile     string
	metrics     metricsOptions
	maxInFlight int

	// Certificate provisioning (without cert-manager).
	secret        string
	configuration string
	service       string
	extraHosts    []string
	checkInterval time.Duration
}

func newWebhookCommand(common *commonOptions) *cobra.Command {
	o := &webhookOptions{common: common}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "run the validating admission webhook server",
		Long: `Serves the ValidatingAdmissionWebhook of juneau over TLS:
  ` + admission.PathJuneau + `  the juneau.loutres.me kinds
  ` + admission.PathPods + `    Pods carrying juneau annotations
  ` + admission.PathHealthz + `, ` + admission.PathReadyz + `  health (ready once the caches are synced)

The serving certificate is read from --tls-cert-file and --tls-private-key-file and
re-read when the files change. With --provision-certificate-secret the webhook makes
them itself: it keeps a CA and a serving certificate in that Secret (creating or
renewing them), writes the pair to those files, and sets the CA bundle of the
--webhook-configuration.`,
		Args: cobra.NoArgs,
		RunE: role(o.run),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.bindAddress, "bind-address", ":9443", "address (host:port) the TLS server listens on; it also serves /healthz and /readyz")
	fs.StringVar(&o.certFile, "tls-cert-file", "", "PEM serving certificate (with intermediates); re-read when it changes")
	fs.StringVar(&o.keyFile, "tls-private-key-file", "", "PEM private key of the serving certificate; re-read when it changes")
	fs.StringVar(&o.secret, "provision-certificate-secret", "", "namespace/name of a Secret holding a CA and the serving certificate, created and renewed by the webhook; empty: the files are provided by someone else")
	fs.StringVar(&o.configuration, "webhook-configuration", "", "ValidatingWebhookConfiguration whose caBundle is set from the provisioned CA (with --provision-certificate-secret)")
	fs.StringVar(&o.service, "service", "juneau-webhook", "Service (in the Secret's namespace) the provisioned certificate is issued for")
	fs.StringSliceVar(&o.extraHosts, "certificate-extra-hosts", nil, "more DNS names or IP addresses for the provisioned certificate")
	fs.DurationVar(&o.checkInterval, "certificate-check-interval", time.Hour, "how often the provisioned certificate and caBundle are checked and renewed")
	o.metrics.addFlags(fs, ":9092", "/metrics")
	fs.IntVar(&o.maxInFlight, "max-requests-in-flight", admission.DefaultMaxInFlight, "admission reviews read or judged at once; more are answered 429 Too Many Requests")
	return cmd
}

func (o *webhookOptions) validate() error {
	if o.certFile == "" || o.keyFile == "" {
		return errors.New("--tls-cert-file and --tls-private-key-file are required")
	}
	if o.maxInFlight < 1 {
		return fmt.Errorf("--max-requests-in-flight must be at least 1, not %d", o.maxInFlight)
	}
	if o.configuration != "" && o.secret == "" {
		return errors.New("--webhook-configuration needs --provision-certificate-secret")
	}
	return nil
}

// certificateHosts are the names a client may use for the Service: the API server
// uses <service>.<namespace>.svc.
func (o *webhookOptions) certificateHosts(namespace string) []string {
	svc := o.service
	hosts := []string{svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local", svc + "." + namespace, svc}
	return append(hosts, o.extraHosts...)
}

func (o *webhookOptions) run(ctx context.Context) error {
	if err := o.validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithName("webhook")
	ctx = klog.NewContext(ctx, logger)
	kube, juneau, err := o.common.clients()
	if err != nil {
		return err
	}
	provisioner, err := o.provisionCertificate(ctx, kube)
	if err != nil {
		return err
	}

	kubeInf := kubeinformers.NewSharedInformerFactory(kube, 0)
	juneauInf := juneauinformers.NewSharedInformerFactory(juneau, 0)
	validators, err := admission.New(kube, juneau, kubeInf, juneauInf)
	if err != nil {
		return err
	}
	health := newHealth()
	srv, reg, err := startMetricsServer(ctx, o.metrics, kube, health)
	if err != nil {
		return err
	}
	defer srv.shutdown()
	metrics, err := admission.NewMetrics(reg)
	if err != nil {
		return err
	}
	handler := admission.NewHandler(validators, validators.HasSynced)
	handler.SetMetrics(metrics)
	handler.SetMaxInFlight(o.maxInFlight)
	server := admission.NewServer(admission.ServerConfig{BindAddress: o.bindAddress, CertFile: o.certFile, KeyFile: o.keyFile},
		handler, validators.HasSynced)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return server.Run(ctx) })
	if provisioner != nil {
		g.Go(func() error { provisioner.Run(ctx, o.checkInterval, 10*time.Second); return nil })
	}
	kubeInf.Start(ctx.Done())
	juneauInf.Start(ctx.Done())
	g.Go(func() error {
		if !cache.WaitForNamedCacheSync("webhook", ctx.Done(), validators.InformersSynced()...) {
			return nil // ctx ended
		}
		logger.Info("Caches synced; validating requests")
		health.setReady()
		return nil
	})
	err = g.Wait()
	kubeInf.Shutdown()
	juneauInf.Shutdown()
	return err
}

// provisionCertificate makes the serving certificate files from the Secret before the
// server starts, retrying while the API server is unreachable. The returned
// provisioner's Run sets the caBundle and keeps both current; nil when not asked for.
func (o *webhookOptions) provisionCertificate(ctx context.Context, kube kubernetes.Interface) (*certs.Provisioner, error) {
	if o.secret == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(o.secret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--provision-certificate-secret must be namespace/name, got %q", o.secret)
	}
	p, err := certs.New(kube, certs.Config{
		Secret:               types.NamespacedName{Namespace: ns, Name: name},
		WebhookConfiguration: o.configuration,
		Hosts:                o.certificateHosts(ns),
		CertFile:             o.certFile,
		KeyFile:              o.keyFile,
	}, nil)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, err := p.EnsureCertificate(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Provisioning the serving certificate failed; retrying")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("provisioning the serving certificate: %w", err)
	}
	return p, nil
}
