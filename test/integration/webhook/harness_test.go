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
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/admission"
	"github.com/loutres/juneau/test/framework"
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

// serviceAccountKubeconfig applies the manifests' namespace and RBAC and returns a
// kubeconfig authenticating as the webhook's ServiceAccount.
func serviceAccountKubeconfig(t *testing.T, cp *framework.ControlPlane) string {
	t.Helper()
	cp.ApplyRBAC(t)
	return cp.ServiceAccountKubeconfig(t, framework.SystemNamespace, framework.WebhookServiceAccount)
}

// runningWebhook starts a webhook as its ServiceAccount with its own certificate,
// registers it and waits until the API server uses it.
func runningWebhook(t *testing.T, cp *framework.ControlPlane) (*framework.Webhook, *framework.CA) {
	t.Helper()
	return cp.StartWebhook(t, serviceAccountKubeconfig(t, cp))
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
	// A review whose confirming read finds the webhook's budget of live reads spent is
	// refused with "retry" (pkg/admission/live.go), as on a loaded API server; a user
	// applies again, and so does the test, until the review is decided.
	var r framework.KubectlResult
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		r = e.cp.Kubectl(ctx, e.expand(stdin), append(slices.Clone(args), "-n", e.ns)...)
		return !strings.Contains(r.Stderr, admission.ErrNoBudget.Error()), nil
	})
	return r
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
