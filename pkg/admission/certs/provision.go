// Package certs provisions the webhook's serving certificate without cert-manager: a
// Secret holds a self-signed CA and a serving certificate it signed; the provisioner
// creates or renews them, writes the pair to the files the server reads, and puts the
// CA bundle into the ValidatingWebhookConfiguration so the API server trusts it.
//
// Every replica runs the same steps; they agree through the Secret (create fails with
// AlreadyExists, updates carry the resourceVersion), so at most one new CA or
// certificate wins. A Secret without ca.key is managed by someone else (cert-manager,
// an operator): its pair is used as it is and only its ca.crt is injected.
package certs

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionapply "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Keys of the Secret.
const (
	KeyCACert  = "ca.crt"
	KeyCAKey   = "ca.key"
	KeyTLSCert = corev1.TLSCertKey
	KeyTLSKey  = corev1.TLSPrivateKeyKey
)

// maxAttempts bounds the read-modify-write rounds lost to other replicas.
const maxAttempts = 5

// Config says what to provision.
type Config struct {
	// Secret holds the CA and the serving pair.
	Secret types.NamespacedName
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose webhooks get
	// the CA bundle; empty injects nothing.
	WebhookConfiguration string
	// Hosts are the DNS names and IP addresses the serving certificate covers; the first
	// is its common name.
	Hosts []string
	// CertFile and KeyFile receive the serving pair.
	CertFile, KeyFile string
}

// Provisioner keeps the webhook's certificate in place.
type Provisioner struct {
	cfg    Config
	client kubernetes.Interface
	clock  clock.PassiveClock
}

// New returns a provisioner; nothing happens until EnsureCertificate or Run.
func New(client kubernetes.Interface, cfg Config, clk clock.PassiveClock) (*Provisioner, error) {
	if cfg.Secret.Name == "" || cfg.Secret.Namespace == "" {
		return nil, errors.New("the certificate Secret needs a namespace and a name")
	}
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("the serving certificate needs at least one host name")
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("the serving certificate needs a certificate file and a key file")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provisioner{cfg: cfg, client: client, clock: clk}, nil
}

// EnsureCertificate makes the Secret hold a valid CA and serving certificate (creating
// or renewing what it manages), writes the pair to the files and returns the CA bundle.
func (p *Provisioner) EnsureCertificate(ctx context.Context) ([]byte, error) {
	secrets := p.client.CoreV1().Secrets(p.cfg.Secret.Namespace)
	for range maxAttempts {
		s, err := secrets.Get(ctx, p.cfg.Secret.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			data, err := p.refresh(ctx, nil)
			if err != nil {
				return nil, err
			}
			s = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: p.cfg.Secret.Name, Namespace: p.cfg.Secret.Namespace},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			if s, err = secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerWebhook}); apierrors.IsAlreadyExists(err) {
				continue // another replica was first: use its Secret
			} else if err != nil {
				return nil, fmt.Errorf("creating Secret %s: %w", p.cfg.Secret, err)
			}
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", p.cfg.Secret, err)
		case len(s.Data[KeyCAKey]) > 0:
			data, err := p.refresh(ctx, s.Data)
			if err != nil {
				return nil, err
			}
			if !sameData(data, s.Data) {
				s = s.DeepCopy()
				s.Data = data
				if s, err = secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerWebhook}); apierrors.IsConflict(err) {
					continue
				} else if err != nil {
					return nil, fmt.Errorf("updating Secret %s: %w", p.cfg.Secret, err)
				}
			}
		}
		return p.install(s)
	}
	return nil, fmt.Errorf("the Secret %s kept changing under %d attempts to update it", p.cfg.Secret, maxAttempts)
}

// refresh returns the Secret data to store: data itself when everything in it is fine,
// otherwise with a new serving pair and, when the CA is unusable or ageing, a new CA.
func (p *Provisioner) refresh(ctx context.Context, data map[string][]byte) (map[string][]byte, error) {
	logger := klog.FromContext(ctx).WithValues("secret", p.cfg.Secret)
	now := p.clock.Now()
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	cas, caErr := parseCerts(data[KeyCACert])
	caKey, keyErr := parseSigner(data[KeyCAKey])
	var reason string
	switch {
	case data == nil:
		reason = "no Secret yet"
	case caErr != nil || keyErr != nil:
		reason = fmt.Sprintf("the CA cannot be read: %v", errors.Join(caErr, keyErr))
	case expiresSoon(cas[0], now):
		reason = fmt.Sprintf("the CA expires soon (%s)", cas[0].NotAfter.UTC().Format(time.RFC3339))
	}
	if reason != "" {
		ca, err := newCA(p.cfg.Secret.Name, now)
		if err != nil {
			return nil, err
		}
		logger.Info("Creating a webhook CA", "reason", reason)
		out[KeyCACert] = caBundle(ca.cert, cas, now) // cas is nil when unreadable
		out[KeyCAKey] = ca.key
		if cas, err = parseCerts(ca.cert); err != nil {
			return nil, err
		}
		if caKey, err = parseSigner(ca.key); err != nil {
			return nil, err
		}
	}
	if reason == "" {
		// Drop earlier CAs once they have expired.
		current := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cas[0].Raw})
		out[KeyCACert] = caBundle(current, cas[1:], now)
	}
	if problem := servingProblem(pair{cert: out[KeyTLSCert], key: out[KeyTLSKey]}, cas[0], p.cfg.Hosts, now); problem != "" {
		if data != nil {
			logger.Info("Issuing a new webhook serving certificate", "reason", problem)
		}
		serving, err := issueServing(cas[0], caKey, p.cfg.Hosts, now)
		if err != nil {
			return nil, err
		}
		out[KeyTLSCert], out[KeyTLSKey] = serving.cert, serving.key
	}
	return out, nil
}

// install writes the serving pair of a Secret to the files and returns its CA bundle.
func (p *Provisioner) install(s *corev1.Secret) ([]byte, error) {
	cert, key, ca := s.Data[KeyTLSCert], s.Data[KeyTLSKey], s.Data[KeyCACert]
	if len(cert) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("the Secret %s has no %s and %s", p.cfg.Secret, KeyTLSCert, KeyTLSKey)
	}
	if len(ca) == 0 {
		return nil, fmt.Errorf("the Secret %s has no %s to give the API server", p.cfg.Secret, KeyCACert)
	}
	// The key goes first: the server keeps its previous pair until both files match.
	if err := writeIfChanged(p.cfg.KeyFile, key, 0o600); err != nil {
		return nil, err
	}
	if err := writeIfChanged(p.cfg.CertFile, cert, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// InjectCABundle sets clientConfig.caBundle of every webhook of the configuration,
// with server-side apply: the field is ours, the rest belongs to whoever applied the
// manifest, and re-applying that manifest leaves the bundle alone.
func (p *Provisioner) InjectCABundle(ctx context.Context, bundle []byte) error {
	if p.cfg.WebhookConfiguration == "" {
		return nil
	}
	configs := p.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	current, err := configs.Get(ctx, p.cfg.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", p.cfg.WebhookConfiguration, err)
	}
	apply := admissionapply.ValidatingWebhookConfiguration(p.cfg.WebhookConfiguration)
	stale := false
	for _, w := range current.Webhooks {
		stale = stale || !bytes.Equal(w.ClientConfig.CABundle, bundle)
		apply.WithWebhooks(admissionapply.ValidatingWebhook().WithName(w.Name).
			WithClientConfig(admissionapply.WebhookClientConfig().WithCABundle(bundle...)))
	}
	if !stale {
		return nil
	}
	if _, err := configs.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerWebhook, Force: true}); err != nil {
		return fmt.Errorf("setting the caBundle of ValidatingWebhookConfiguration %s: %w", p.cfg.WebhookConfiguration, err)
	}
	klog.FromContext(ctx).Info("Set the CA bundle of the webhook configuration", "configuration", p.cfg.WebhookConfiguration)
	return nil
}

// Run checks the certificate and the CA bundle at once and then every interval until
// ctx ends; after a failure (the webhook configuration may be applied after the
// webhook starts) it tries again after retry.
func (p *Provisioner) Run(ctx context.Context, interval, retry time.Duration) {
	logger := klog.FromContext(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		next := interval
		if err := p.Sync(ctx); err != nil {
			logger.Error(err, "Keeping the webhook certificate in place failed; retrying", "after", retry)
			next = retry
		}
		timer.Reset(next)
	}
}

// Sync is EnsureCertificate followed by InjectCABundle.
func (p *Provisioner) Sync(ctx context.Context) error {
	bundle, err := p.EnsureCertificate(ctx)
	if err != nil {
		return err
	}
	return p.InjectCABundle(ctx, bundle)
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// writeIfChanged replaces path atomically (write a temporary file, rename it over)
// unless it already holds data, so readers never see a half-written file.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
