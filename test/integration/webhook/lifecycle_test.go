package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/admission"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// TestNATAndDirectUseExclusive: an ElasticIP is used either by NAT or directly. A Pod
// naming an ElasticIP already attached by NAT is refused, and so is an attachment on an
// ElasticIP a Pod's NetworkInterface carries.
func TestNATAndDirectUseExclusive(t *testing.T) {
	cp := framework.Shared(t)
	runningWebhook(t, cp)
	e := newEnv(t, cp)
	e.forceDeletePodsAtEnd()
	e.mustApply(arpNet() + eipY("nat-eip", "$P-net", "") + eipY("direct-eip", "$P-net", "") +
		podY("nginx", nil, nil) + attY("nginx-nat", "nat-eip", "nginx.eth0") + directPod("web", "direct-eip"))
	e.mustApply(nicY("web", "eth0", e.podUID("web"), "direct-eip"))

	r := e.kubectl(directPod("thief", "nat-eip"), "apply", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, `ElasticIPAttachment "nginx-nat"`) ||
		!strings.Contains(r.Stderr, "metadata.annotations[juneau.loutres.me/elastic-ip]") {
		t.Errorf("a Pod naming an ElasticIP attached by NAT: err=%v\n%s", r.Err, r.Stderr)
	}
	r = e.kubectl(attY("web-nat", "direct-eip", "nginx.eth0"), "apply", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, `NetworkInterface "web.eth0"`) ||
		!strings.Contains(r.Stderr, "spec.elasticIPRef.name") {
		t.Errorf("an attachment on an ElasticIP a NIC carries: err=%v\n%s", r.Err, r.Stderr)
	}
}

// TestDeletingObjectsAreNeverBlocked: an object being deleted can still be written, so
// its finalizers can be removed, even when its references are gone; new references to
// it are refused.
func TestDeletingObjectsAreNeverBlocked(t *testing.T) {
	cp := framework.Shared(t)
	runningWebhook(t, cp)
	e := newEnv(t, cp)
	e.mustApply(arpNet() + eipY("held", "$P-net", ""))
	if r := e.kubectl("", "patch", "elasticip", "held", "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold"]}}`); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := e.kubectl("", "delete", "elasticip", "held", "--wait=false"); r.Err != nil {
		t.Fatal(r.Err)
	}
	e.mustApply(podY("web", nil, nil))
	e.forceDeletePodsAtEnd()
	r := e.kubectl(attY("att", "held", "web.eth0"), "apply", "-f", "-")
	if r.Err == nil || !strings.Contains(r.Stderr, `ElasticIP "held" is being deleted`) {
		t.Errorf("an attachment on a deleting ElasticIP: err=%v\n%s", r.Err, r.Stderr)
	}
	// The network goes away; the deleting ElasticIP's finalizer can still be removed.
	if r := e.kubectl("", "delete", "externalnetwork", "$P-net"); r.Err != nil {
		t.Fatalf("deleting the network only a deleting ElasticIP names: %v", r.Err)
	}
	if r := e.kubectl("", "patch", "elasticip", "held", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`); r.Err != nil {
		t.Fatalf("removing the finalizer: %v", r.Err)
	}
	if _, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(e.ns).Get(context.Background(), "held", metav1.GetOptions{}); ignoreNotFound(err) != nil || err == nil {
		t.Errorf("the ElasticIP is still there (err=%v)", err)
	}
}

// TestFailClosed: with the webhook process stopped, writes to juneau kinds and to Pods
// with juneau annotations fail, while other Pods are still created and status writes
// (never sent to the webhook) still succeed.
func TestFailClosed(t *testing.T) {
	cp := framework.Shared(t)
	w, _ := runningWebhook(t, cp)
	e := newEnv(t, cp)
	e.forceDeletePodsAtEnd()
	e.mustApply(arpNet() + eipY("e", "$P-net", ""))
	w.Stop()

	for name, manifest := range map[string]string{
		"ElasticIP":           eipY("e2", "$P-net", ""),
		"AddressPool":         poolY("$P-more", "arp", "10.226.$O.0/24"),
		"Pod with annotation": directPod("direct", "e"),
		"Pod with alias":      podY("alias", []string{`network.alibabacloud.com/pod-with-eip: "true"`}, nil),
	} {
		if r := e.kubectl(manifest, "apply", "-f", "-"); r.Err == nil || !strings.Contains(r.Stderr, "failed calling webhook") {
			t.Errorf("%s: err=%v, want a failed webhook call\n%s", name, r.Err, r.Stderr)
		}
	}
	if r := e.kubectl(podY("plain", []string{"example.com/note: hello"}, nil), "apply", "-f", "-"); r.Err != nil {
		t.Errorf("a Pod without juneau annotations was blocked: %v", r.Err)
	}
	eip, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(e.ns).Get(context.Background(), "e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eip.Status.Phase = v1alpha1.ElasticIPPending
	if _, err := cp.Juneau.JuneauV1alpha1().ElasticIPs(e.ns).UpdateStatus(context.Background(), eip, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a status write was blocked: %v", err)
	}
	if r := e.kubectl("", "delete", "elasticip", "e"); r.Err == nil {
		t.Error("deleting an ElasticIP succeeded without the webhook")
	}
}

// TestCertificateRotation: new certificate files (from a new CA, announced in the
// caBundle first) are served without a restart.
func TestCertificateRotation(t *testing.T) {
	cp := framework.Shared(t)
	w, _ := runningWebhook(t, cp)
	before, err := servedSerial(w.Addr)
	if err != nil {
		t.Fatal(err)
	}

	// Issue the new pair aside, trust the new CA, then swap the files.
	dir := t.TempDir()
	newCert, newKey := dir+"/tls.crt", dir+"/tls.key"
	ca := framework.IssueServingFiles(t, newCert, newKey)
	ctx := testContext(t, 2*time.Minute)
	configs := cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := configs.Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = ca.CertPEM
	}
	if _, err := configs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	renameOver(t, newKey, w.KeyFile)
	renameOver(t, newCert, w.CertFile)
	want := leafSerial(t, w.CertFile)
	if want.Cmp(before) == 0 {
		t.Fatal("the new certificate has the old serial")
	}

	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = cp.WebhookProbe(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the API server never reached the webhook with the new certificate: %v", last)
	}
	got, err := servedSerial(w.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cmp(want) != 0 {
		t.Errorf("served serial %s, want the new %s", got, want)
	}
	if done, _ := w.Exited(); done {
		t.Error("the webhook restarted")
	}
}

func renameOver(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func leafSerial(t *testing.T, certFile string) *big.Int {
	t.Helper()
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

// TestProvisionedCertificate: with --provision-certificate-secret the webhook creates
// its CA and certificate in the Secret, sets the caBundle of the configuration, and the
// API server trusts it; a restart reuses the Secret.
func TestProvisionedCertificate(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t, 2*time.Minute)
	secrets := cp.Kube.CoreV1().Secrets(systemNamespace)
	_ = serviceAccountKubeconfig(t, cp) // namespace and RBAC
	if err := ignoreNotFound(secrets.Delete(ctx, tlsSecret, metav1.DeleteOptions{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), tlsSecret, metav1.DeleteOptions{}) })
	flags := []string{
		"--provision-certificate-secret=" + systemNamespace + "/" + tlsSecret,
		"--webhook-configuration=" + configName,
		"--certificate-extra-hosts=127.0.0.1",
	}
	w := framework.NewWebhook(t)
	cp.RegisterWebhook(t, w.Addr, nil) // no caBundle: the webhook sets it
	w.Start(t, "webhook-provisioned", serviceAccountKubeconfig(t, cp), flags...)
	cp.WaitWebhookServing(t, w)

	s, err := secrets.Get(ctx, tlsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("the Secret lacks %s", k)
		}
	}
	cfg, err := cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, wh := range cfg.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, s.Data["ca.crt"]) {
			t.Errorf("webhook %s: caBundle is not the Secret's CA", wh.Name)
		}
	}
	served, err := servedSerial(w.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if want := leafSerial(t, w.CertFile); served.Cmp(want) != 0 {
		t.Errorf("served serial %s, the written file has %s", served, want)
	}

	// A restart (with fresh files, as in a new Pod) finds the Secret valid and serves
	// the same certificate.
	w.Stop()
	for _, f := range []string{w.CertFile, w.KeyFile} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	w.Start(t, "webhook-restarted", serviceAccountKubeconfig(t, cp), flags...)
	cp.WaitWebhookServing(t, w)
	again, err := secrets.Get(ctx, tlsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != s.ResourceVersion {
		t.Error("the restart rewrote the Secret")
	}
	if got, err := servedSerial(w.Addr); err != nil || got.Cmp(served) != 0 {
		t.Errorf("after the restart the served serial is %v (err %v), want %s", got, err, served)
	}
}

// TestManifestMatchesPodAnnotations: the Pod webhook's matchCondition is the one the
// code derives from the annotation keys, so no juneau annotation escapes validation.
func TestManifestMatchesPodAnnotations(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := (&framework.ControlPlane{RepoRoot: root}).ManifestWebhookConfiguration(t)
	var found bool
	for _, wh := range cfg.Webhooks {
		if wh.ClientConfig.Service == nil || wh.TimeoutSeconds == nil || *wh.TimeoutSeconds > 5 {
			t.Errorf("webhook %s: needs a service and timeoutSeconds <= 5", wh.Name)
		}
		for _, mc := range wh.MatchConditions {
			found = true
			if mc.Expression != admission.PodMatchExpression() {
				t.Errorf("matchCondition %s:\n got %s\nwant %s", mc.Name, mc.Expression, admission.PodMatchExpression())
			}
		}
	}
	if !found {
		t.Error("no matchCondition scopes the Pod webhook")
	}
}

// TestManifestsApply: every manifest of manifests/webhook is accepted by the API server
// (server-side dry run), including the CEL matchCondition.
func TestManifestsApply(t *testing.T) {
	cp := framework.Shared(t)
	_ = serviceAccountKubeconfig(t, cp) // the namespace must exist for a dry run
	ctx := testContext(t, time.Minute)
	if r := cp.Kubectl(ctx, "", "apply", "--dry-run=server", "-f", cp.RepoRoot+"/manifests/webhook"); r.Err != nil {
		t.Fatal(r.Err)
	}
}
