// Package webhook tests `juneau webhook`, run as a process from the built binary with
// real TLS, registered with a real kube-apiserver through the manifest's
// ValidatingWebhookConfiguration (pointed at the process by URL), and exercised with
// the real kubectl. The webhook runs as the ServiceAccount of manifests/webhook with
// that manifest's RBAC, so the least-privilege rules are tested too.
//
// The webhook configuration is cluster-wide, so the tests of this package never run in
// parallel; cluster-scoped objects get names and addresses unique to each test.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/loutres/juneau/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	systemNamespace = "juneau-system"
	serviceAccount  = "juneau-webhook"
	configName      = "juneau-webhook"
	tlsSecret       = "juneau-webhook-tls"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// serviceAccountKubeconfig applies the manifest's namespace and RBAC and returns a
// kubeconfig authenticating as the webhook's ServiceAccount.
func serviceAccountKubeconfig(t *testing.T, cp *framework.ControlPlane) string {
	t.Helper()
	ctx := testContext(t, time.Minute)
	for _, f := range []string{"namespace.yaml", "rbac.yaml"} {
		if r := cp.Kubectl(ctx, "", "apply", "-f", filepath.Join(cp.RepoRoot, "manifests", "webhook", f)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	expiry := int64(3600)
	tok, err := cp.Kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", serviceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CA.CertPEM}
	cfg.AuthInfos["webhook"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "webhook"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// webhookProcess is a running `juneau webhook`.
type webhookProcess struct {
	*framework.Component
	addr              string
	certFile, keyFile string
}

// newWebhook chooses a free loopback port and file paths for a webhook process.
func newWebhook(t *testing.T) *webhookProcess {
	t.Helper()
	dir := t.TempDir()
	return &webhookProcess{
		addr:     "127.0.0.1:" + strconv.Itoa(freePort(t)),
		certFile: filepath.Join(dir, "tls.crt"),
		keyFile:  filepath.Join(dir, "tls.key"),
	}
}

// start runs the webhook as its ServiceAccount. Without provisioning flags in extra,
// it serves a certificate issued here, and the returned CA is its issuer.
func (w *webhookProcess) start(t *testing.T, cp *framework.ControlPlane, name string, extra ...string) *framework.CA {
	t.Helper()
	var ca *framework.CA
	if !strings.Contains(strings.Join(extra, " "), "--provision-certificate-secret") {
		ca = newServingFiles(t, w.certFile, w.keyFile)
	}
	args := append([]string{"webhook",
		"--kubeconfig=" + serviceAccountKubeconfig(t, cp),
		"--bind-address=" + w.addr,
		"--tls-cert-file=" + w.certFile,
		"--tls-private-key-file=" + w.keyFile,
		"-v=2",
	}, extra...)
	w.Component = framework.StartComponent(t, name, args...)
	return ca
}

// newServingFiles issues a serving certificate for 127.0.0.1 from a new CA and swaps it
// into the files by rename, as a Secret volume update does.
func newServingFiles(t *testing.T, certFile, keyFile string) *framework.CA {
	t.Helper()
	ca, err := framework.NewCA("webhook-test-ca")
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

// manifestConfiguration reads the ValidatingWebhookConfiguration of manifests/webhook.
func manifestConfiguration(t *testing.T, cp *framework.ControlPlane) *admissionregistrationv1.ValidatingWebhookConfiguration {
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

// register installs the manifest's webhook configuration pointed at addr by URL (same
// paths), with caBundle (nil leaves it to the webhook to set). It is removed when the
// test ends.
func register(t *testing.T, cp *framework.ControlPlane, addr string, caBundle []byte) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	cfg := manifestConfiguration(t, cp)
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

// probe is an AddressPool the CRD schema accepts and the webhook refuses (host bits set).
const probe = `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata:
  name: webhook-probe
spec:
  advertiseMode: arp
  addresses: ["10.225.255.1/24"]
`

// probeResult dry-runs the probe through the API server: nil when our webhook judged
// it, otherwise what happened instead.
func probeResult(ctx context.Context, cp *framework.ControlPlane) error {
	r := cp.Kubectl(ctx, probe, "create", "--dry-run=server", "-f", "-")
	switch {
	case r.Err == nil:
		return errors.New("the probe was admitted: the webhook is not called")
	case strings.Contains(r.Stderr, "spec.addresses[0]") && strings.Contains(r.Stderr, "10.225.255.0/24"):
		return nil
	}
	return errors.New(strings.TrimSpace(r.Stderr))
}

// waitServing polls until the API server reaches the webhook and gets its verdict.
func waitServing(t *testing.T, cp *framework.ControlPlane, w *webhookProcess) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		if done, err := w.Exited(); done {
			return false, fmt.Errorf("the webhook exited: %v", err)
		}
		last = probeResult(ctx, cp)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the API server never got a verdict from the webhook: %v (last: %v)", err, last)
	}
}

// runningWebhook starts a webhook with its own certificate, registers it and waits
// until the API server uses it.
func runningWebhook(t *testing.T, cp *framework.ControlPlane) (*webhookProcess, *framework.CA) {
	t.Helper()
	w := newWebhook(t)
	ca := w.start(t, cp, "webhook")
	register(t, cp, w.addr, ca.CertPEM)
	waitServing(t, cp, w)
	return w, ca
}

// servedSerial dials the webhook and returns the serial of the certificate it presents.
func servedSerial(addr string) (*big.Int, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only the serial is read
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// env is one test case's namespace, name prefix for cluster-scoped objects and third
// address octet, all unique in the package.
type env struct {
	t      *testing.T
	cp     *framework.ControlPlane
	ns     string
	prefix string
	octet  int
}

var nextOctet atomic.Int32

func newEnv(t *testing.T, cp *framework.ControlPlane) *env {
	t.Helper()
	octet := int(nextOctet.Add(1))
	if octet > 254 { // 10.225.255.0/24 is the probe's
		t.Fatal("out of test address blocks: run fewer test cases per process")
	}
	return &env{t: t, cp: cp, ns: cp.NewNamespace(t, "wh"), prefix: fmt.Sprintf("c%d", octet), octet: octet}
}

// expand fills $NS (namespace), $P (prefix of cluster-scoped names) and $O (the
// third octet of this case's addresses: 10.225.$O.0/24).
func (e *env) expand(s string) string {
	return strings.NewReplacer("$NS", e.ns, "$P", e.prefix, "$O", strconv.Itoa(e.octet)).Replace(s)
}

func (e *env) kubectl(stdin string, args ...string) framework.KubectlResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range args {
		args[i] = e.expand(args[i])
	}
	return e.cp.Kubectl(ctx, e.expand(stdin), append(args, "-n", e.ns)...)
}

func (e *env) mustApply(manifest string) {
	e.t.Helper()
	if r := e.kubectl(manifest, "apply", "-f", "-"); r.Err != nil {
		e.t.Fatalf("setup: %v", r.Err)
	}
}

// podUID returns the UID of a Pod of the namespace.
func (e *env) podUID(name string) string {
	e.t.Helper()
	p, err := e.cp.Kube.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(p.UID)
}

// node creates a Node with the given addresses; it is removed when the test ends.
func (e *env) node(name string, addresses ...string) {
	e.t.Helper()
	ctx := context.Background()
	nodes := e.cp.Kube.CoreV1().Nodes()
	n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.expand(name)}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = nodes.Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	for _, a := range addresses {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: e.expand(a)})
	}
	if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// forceDeletePods removes the namespace's Pods at the end (no kubelet confirms deletion).
func (e *env) forceDeletePodsAtEnd() {
	e.t.Cleanup(func() {
		zero := int64(0)
		_ = e.cp.Kube.CoreV1().Pods(e.ns).DeleteCollection(context.Background(),
			metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
