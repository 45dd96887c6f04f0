package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// Webhook is a running `juneau webhook` serving TLS on a loopback port.
type Webhook struct {
	*Component
	Addr              string
	CertFile, KeyFile string
}

// NewWebhook chooses a free loopback port and file paths for a webhook process.
func NewWebhook(t testing.TB) *Webhook {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &Webhook{
		Addr:     "127.0.0.1:" + strconv.Itoa(port),
		CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile:  filepath.Join(dir, "tls.key"),
	}
}

// Start runs the webhook with kubeconfig. Without provisioning flags in extra it
// serves a certificate issued here, and the returned CA is its issuer.
func (w *Webhook) Start(t testing.TB, name, kubeconfig string, extra ...string) *CA {
	t.Helper()
	var ca *CA
	if !strings.Contains(strings.Join(extra, " "), "--provision-certificate-secret") {
		ca = IssueServingFiles(t, w.CertFile, w.KeyFile)
	}
	args := append([]string{"webhook",
		"--kubeconfig=" + kubeconfig,
		"--bind-address=" + w.Addr,
		"--tls-cert-file=" + w.CertFile,
		"--tls-private-key-file=" + w.KeyFile,
		"--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false",
		"-v=2",
	}, extra...)
	w.Component = StartComponent(t, name, args...)
	return ca
}

// IssueServingFiles issues a serving certificate for 127.0.0.1 from a new CA and swaps
// it into the files by rename, as a Secret volume update does.
func IssueServingFiles(t testing.TB, certFile, keyFile string) *CA {
	t.Helper()
	ca, err := NewCA("webhook-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("127.0.0.1", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{keyFile: keyPEM, certFile: certPEM} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

// ManifestWebhookConfiguration reads the ValidatingWebhookConfiguration of manifests/webhook.
func (cp *ControlPlane) ManifestWebhookConfiguration(t testing.TB) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cp.RepoRoot, "manifests", "webhook", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("manifests/webhook/webhook.yaml: %v", err)
	}
	return &cfg
}

// RegisterWebhook installs the manifest's webhook configuration pointed at addr by URL
// (same paths), with caBundle (nil leaves it to the webhook to set). It is removed when
// the test ends.
func (cp *ControlPlane) RegisterWebhook(t testing.TB, addr string, caBundle []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := cp.ManifestWebhookConfiguration(t)
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		url := "https://" + addr + *cc.Service.Path
		cc.Service, cc.URL, cc.CABundle = nil, &url, caBundle
	}
	configs := cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_ = configs.Delete(ctx, cfg.Name, metav1.DeleteOptions{})
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := configs.Create(ctx, cfg, metav1.CreateOptions{})
		return err == nil, nil // AlreadyExists while the old one is removed
	}); err != nil {
		t.Fatalf("registering the webhook: %v", err)
	}
	t.Cleanup(func() {
		_ = configs.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// webhookProbe is an AddressPool the CRD schema accepts and the webhook refuses (host
// bits set).
const webhookProbe = `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata:
  name: webhook-probe
spec:
  advertiseMode: arp
  addresses: ["10.225.255.1/24"]
`

// WebhookProbe dry-runs the probe through the API server: nil when the webhook judged
// it, otherwise what happened instead.
func (cp *ControlPlane) WebhookProbe(ctx context.Context) error {
	r := cp.Kubectl(ctx, webhookProbe, "create", "--dry-run=server", "-f", "-")
	switch {
	case r.Err == nil:
		return errors.New("the probe was admitted: the webhook is not called")
	case strings.Contains(r.Stderr, "spec.addresses[0]") && strings.Contains(r.Stderr, "10.225.255.0/24"):
		return nil
	}
	return errors.New(strings.TrimSpace(r.Stderr))
}

// WaitWebhookServing polls until the API server reaches the webhook and gets its verdict.
func (cp *ControlPlane) WaitWebhookServing(t testing.TB, w *Webhook) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		if done, err := w.Exited(); done {
			return false, fmt.Errorf("the webhook exited: %v", err)
		}
		last = cp.WebhookProbe(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the API server never got a verdict from the webhook: %v (last: %v)", err, last)
	}
}

// StartWebhook starts a webhook with its own certificate, registers it by URL with a
// caBundle and waits until the API server uses it.
func (cp *ControlPlane) StartWebhook(t testing.TB, kubeconfig string) (*Webhook, *CA) {
	t.Helper()
	w := NewWebhook(t)
	ca := w.Start(t, "webhook", kubeconfig)
	cp.RegisterWebhook(t, w.Addr, ca.CertPEM)
	cp.WaitWebhookServing(t, w)
	return w, ca
}
