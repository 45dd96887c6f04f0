package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	secretName = types.NamespacedName{Namespace: "juneau-system", Name: "juneau-webhook-tls"}
	hosts      = []string{"juneau-webhook.juneau-system.svc", "127.0.0.1"}
	start      = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
)

type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	dir    string
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	return &fixture{t: t, ctx: ctx, client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(start), dir: t.TempDir()}
}

func (f *fixture) provisioner(h ...string) *Provisioner {
	f.t.Helper()
	if h == nil {
		h = hosts
	}
	p, err := New(f.client, Config{
		Secret: secretName, WebhookConfiguration: "juneau-webhook", Hosts: h,
		CertFile: filepath.Join(f.dir, "tls.crt"), KeyFile: filepath.Join(f.dir, "tls.key"),
	}, f.clock)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) secret() *corev1.Secret {
	f.t.Helper()
	s, err := f.client.CoreV1().Secrets(secretName.Namespace).Get(f.ctx, secretName.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// served loads the files the server would read and verifies them against the bundle,
// for each host, at the fixture's time.
func (f *fixture) served(bundle []byte) *x509.Certificate {
	f.t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(f.dir, "tls.crt"), filepath.Join(f.dir, "tls.key"))
	if err != nil {
		f.t.Fatalf("the written files are no pair: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		f.t.Fatal("the bundle holds no certificate")
	}
	for _, h := range hosts {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: f.clock.Now()}); err != nil {
			f.t.Errorf("the served certificate does not verify for %s: %v", h, err)
		}
	}
	return pair.Leaf
}

func countActions(c *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	f := newFixture(t)
	p := f.provisioner()
	bundle, err := p.EnsureCertificate(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := f.secret()
	if s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data[KeyCACert], bundle) || len(s.Data[KeyCAKey]) == 0 {
		t.Fatalf("Secret: type %q, keys %v", s.Type, keys(s.Data))
	}
	leaf := f.served(bundle)
	if leaf.NotAfter.Sub(start) < ServingValidity-time.Hour {
		t.Errorf("serving certificate valid until %s only", leaf.NotAfter)
	}

	// A restart a month later finds everything valid: no write, same certificate.
	f.clock.Step(30 * 24 * time.Hour)
	again, err := f.provisioner().EnsureCertificate(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := countActions(f.client, "update", "secrets"); n != 0 {
		t.Errorf("%d Secret updates, want none", n)
	}
	if !bytes.Equal(again, bundle) || f.served(again).SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Error("the certificate changed without reason")
	}
}

func TestEnsureRenews(t *testing.T) {
	cases := []struct {
		name      string
		step      time.Duration
		hosts     []string
		newCA     bool
		newServer bool
	}{
		{name: "serving certificate ages", step: 250 * 24 * time.Hour, newServer: true},
		{name: "a host is added", hosts: append([]string{"juneau-webhook.juneau-system"}, hosts...), newServer: true},
		{name: "CA ages", step: 7 * 365 * 24 * time.Hour, newCA: true, newServer: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			firstBundle, err := f.provisioner().EnsureCertificate(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			first := f.served(firstBundle)
			f.clock.Step(tc.step)
			bundle, err := f.provisioner(tc.hosts...).EnsureCertificate(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			leaf := f.served(bundle)
			if got := leaf.SerialNumber.Cmp(first.SerialNumber) != 0; got != tc.newServer {
				t.Errorf("new serving certificate: %v, want %v", got, tc.newServer)
			}
			cas, err := parseCerts(bundle)
			if err != nil {
				t.Fatal(err)
			}
			oldCAs, _ := parseCerts(firstBundle)
			if got := !cas[0].Equal(oldCAs[0]); got != tc.newCA {
				t.Errorf("new CA: %v, want %v", got, tc.newCA)
			}
			if tc.newCA && (len(cas) != 2 || !cas[1].Equal(oldCAs[0])) {
				t.Errorf("the bundle has %d CAs, want the new one and the previous one", len(cas))
			}
		})
	}
}

func TestEnsureRepairsAnUnreadableCA(t *testing.T) {
	f := newFixture(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretName.Namespace, Name: secretName.Name},
		Data:       map[string][]byte{KeyCACert: []byte("junk"), KeyCAKey: []byte("junk")},
	})
	bundle, err := f.provisioner().EnsureCertificate(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.served(bundle)
}

func TestEnsureUsesAnExternallyManagedSecret(t *testing.T) {
	seed := newFixture(t)
	bundle, err := seed.provisioner().EnsureCertificate(seed.ctx)
	if err != nil {
		t.Fatal(err)
	}
	external := seed.secret()
	delete(external.Data, KeyCAKey) // as cert-manager would leave it
	external.ResourceVersion = ""
	f := newFixture(t, external)
	got, err := f.provisioner().EnsureCertificate(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bundle) || countActions(f.client, "update", "secrets") != 0 {
		t.Error("an externally managed Secret was changed or its CA not used")
	}
	f.served(got)
}

func TestEnsureLosesRaces(t *testing.T) {
	t.Run("another replica creates the Secret first", func(t *testing.T) {
		f := newFixture(t)
		other := newFixture(t)
		if _, err := other.provisioner().EnsureCertificate(other.ctx); err != nil {
			t.Fatal(err)
		}
		winner := other.secret()
		winner.ResourceVersion = ""
		f.client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if err := f.client.Tracker().Add(winner); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, secretName.Name)
		})
		bundle, err := f.provisioner().EnsureCertificate(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bundle, winner.Data[KeyCACert]) {
			t.Error("the winner's CA was not used")
		}
		if f.served(bundle).SerialNumber.Cmp(mustLeaf(t, winner.Data[KeyTLSCert]).SerialNumber) != 0 {
			t.Error("the winner's certificate was not written")
		}
	})
	t.Run("an update conflicts once", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.provisioner().EnsureCertificate(f.ctx); err != nil {
			t.Fatal(err)
		}
		conflicts := 0
		f.client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts > 0 {
				return false, nil, nil
			}
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, secretName.Name, nil)
		})
		f.clock.Step(250 * 24 * time.Hour)
		bundle, err := f.provisioner().EnsureCertificate(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if conflicts != 1 || countActions(f.client, "update", "secrets") != 2 {
			t.Errorf("conflicts %d, updates %d; want one conflict, then a successful retry", conflicts, countActions(f.client, "update", "secrets"))
		}
		f.served(bundle)
	})
}

func mustLeaf(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCerts(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestInjectCABundle(t *testing.T) {
	none := admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "juneau-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "validate.juneau.loutres.me", SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			{Name: "pods.validate.juneau.loutres.me", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
				ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("old")}},
		},
	}
	f := newFixture(t, vwc)
	p := f.provisioner()
	if err := p.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	bundle := f.secret().Data[KeyCACert]
	got, err := f.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(f.ctx, "juneau-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range got.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			t.Errorf("webhook %s: caBundle not set", w.Name)
		}
		if len(w.AdmissionReviewVersions) != 1 {
			t.Errorf("webhook %s lost its other fields: %+v", w.Name, w)
		}
	}
	patches := countActions(f.client, "patch", "validatingwebhookconfigurations")
	if err := p.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := countActions(f.client, "patch", "validatingwebhookconfigurations"); n != patches {
		t.Errorf("a second sync patched again (%d patches, want %d)", n, patches)
	}
}

func TestInjectCABundleWithoutConfiguration(t *testing.T) {
	f := newFixture(t)
	if err := f.provisioner().Sync(f.ctx); err == nil {
		t.Error("Sync succeeded without the webhook configuration, want an error to retry on")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "tls.crt")); err != nil {
		t.Errorf("the certificate was not written before the failure: %v", err)
	}
}
