// Package framework starts a real local control plane (etcd + kube-apiserver with RBAC)
// for integration and end-to-end tests, installs juneau's CRDs and hands out clients.
package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// ServiceCIDR is the Service range of the test control plane.
const ServiceCIDR = "10.96.0.0/12"

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	Binaries   Binaries
	Dir        string // temp dir holding data, certificates, logs and the kubeconfig
	Kubeconfig string // admin kubeconfig
	URL        string // https://127.0.0.1:<port>
	CA         *CA    // signs the API server's serving certificate
	Config     *rest.Config
	Kube       kubernetes.Interface
	Juneau     juneauclient.Interface
	RepoRoot   string

	etcd, apiserver *process
	etcdURL         string
	// The command lines, to start a stopped component again as it was.
	etcdArgs, apiserverArgs []string
	restarts                int
}

// Start brings up etcd and kube-apiserver on free loopback ports, writes an admin
// kubeconfig, installs the CRDs from manifests/crds and waits until they are served.
// Call Stop to tear everything down; on error nothing is left running.
func Start(ctx context.Context) (cp *ControlPlane, err error) {
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "juneau-cp-")
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Binaries: bins, Dir: dir, RepoRoot: root}
	defer func() {
		if err != nil {
			cp.Stop()
			cp = nil
		}
	}()
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := cp.installCRDs(ctx); err != nil {
		return nil, err
	}
	return cp, nil
}

// startEtcd starts etcd on two free ports. Test binaries run in parallel, so a port
// freePort found may be taken by another process before etcd binds it: etcd then
// exits with "address already in use" and is started again on other ports.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		clientPort, err := pickPort()
		if err != nil {
			return err
		}
		peerPort, err := pickPort()
		if err != nil {
			return err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
		peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
		cp.etcdURL = client
		cp.etcdArgs = []string{"--name=juneau-test",
			"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=juneau-test=" + peer,
			"--unsafe-no-fsync", "--log-level=warn",
		}
		err = cp.runEtcd(ctx)
		if err == nil || attempt == 3 || !cp.portTaken("etcd") {
			return err
		}
		cp.etcd.stop(0)
	}
}

// pickPort picks the components' ports: freePort, or a port that is taken in a test.
var pickPort = freePort

// portTaken reports whether the component's log says a port it should listen on was
// taken.
func (cp *ControlPlane) portTaken(name string) bool {
	log, err := os.ReadFile(cp.logPath(name))
	return err == nil && bytes.Contains(log, []byte("address already in use"))
}

// runEtcd starts etcd with its command line and waits until it is healthy.
func (cp *ControlPlane) runEtcd(ctx context.Context) error {
	var err error
	cp.etcd, err = startProcess("etcd", cp.logPath("etcd"), cp.Binaries.path("etcd"), cp.etcdArgs...)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return waitFor(waitCtx, cp.etcd, "waiting for etcd", func(ctx context.Context) error {
		// Each check is short: whoever else holds the port may never answer, and etcd's
		// exit is seen between checks.
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return httpOK(ctx, http.DefaultClient, cp.etcdURL+"/health")
	})
}

// logPath names a component's log; a restarted component writes a log of its own.
func (cp *ControlPlane) logPath(name string) string {
	if cp.restarts == 0 {
		return filepath.Join(cp.Dir, name+".log")
	}
	return filepath.Join(cp.Dir, fmt.Sprintf("%s-%d.log", name, cp.restarts))
}

// startAPIServer starts kube-apiserver on a free port, again on another one when the
// port was taken before it bound it (as startEtcd).
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	var err error
	if cp.CA, err = NewCA("juneau-test-ca"); err != nil {
		return err
	}
	certPEM, keyPEM, err := cp.CA.IssueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)})
	if err != nil {
		return err
	}
	token, err := randomToken()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"ca.crt":      cp.CA.CertPEM,
		"tokens.csv":  []byte(token + ",juneau-test-admin,juneau-test-admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cp.Dir, name), data, 0o600); err != nil {
			return err
		}
	}
	saKey := filepath.Join(cp.Dir, "sa.key")
	if err := WriteRSAKey(saKey); err != nil {
		return err
	}
	args := []string{"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--tls-cert-file=" + filepath.Join(cp.Dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(cp.Dir, "serving.key"),
		"--client-ca-file=" + filepath.Join(cp.Dir, "ca.crt"),
		"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		// No controller-manager runs, so nothing creates the "default" ServiceAccount the
		// ServiceAccount admission plugin would insist on for every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
	}
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			return err
		}
		cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
		cp.apiserverArgs = append(slices.Clone(args), "--secure-port="+strconv.Itoa(port))
		if err := cp.writeKubeconfig(token); err != nil {
			return err
		}
		err = cp.runAPIServer(ctx)
		if err == nil {
			break
		}
		if attempt == 3 || !cp.portTaken("kube-apiserver") {
			return err
		}
		cp.apiserver.stop(0)
	}
	if cp.Kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return err
	}
	cp.Juneau, err = juneauclient.NewForConfig(cp.Config)
	return err
}

// runAPIServer starts kube-apiserver with its command line and waits until it is ready.
func (cp *ControlPlane) runAPIServer(ctx context.Context) error {
	var err error
	cp.apiserver, err = startProcess("kube-apiserver", cp.logPath("kube-apiserver"), cp.Binaries.path("kube-apiserver"), cp.apiserverArgs...)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return waitFor(waitCtx, cp.apiserver, "waiting for kube-apiserver /readyz", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // as in runEtcd
		defer cancel()
		return httpOK(ctx, httpClient, cp.URL+"/readyz")
	})
}

func (cp *ControlPlane) writeKubeconfig(token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["juneau-test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CA.CertPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["juneau-test"] = &clientcmdapi.Context{Cluster: "juneau-test", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "juneau-test"
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, cp.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	var err error
	cp.Config, err = clientcmd.NewNonInteractiveClientConfig(*cfg, "juneau-test", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return err
	}
	cp.Config.QPS, cp.Config.Burst = 200, 400
	return nil
}

// Stop terminates kube-apiserver and etcd and removes the temp dir. Set
// JUNEAU_KEEP_TEST_DIR=1 to keep the logs for debugging.
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	if cp.apiserver != nil {
		cp.apiserver.stop(10 * time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.stop(10 * time.Second)
	}
	if os.Getenv("JUNEAU_KEEP_TEST_DIR") == "" {
		_ = os.RemoveAll(cp.Dir)
	}
}

func httpOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
