package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/loutres/juneau/test/framework"
)

// identity is a user of the API server with a static token.
type identity struct {
	name   string // kubeconfig file name
	user   string
	groups []string
	token  string
}

// credentials makes the CA, the API server's certificates, the service-account key
// and one token per identity, and writes a kubeconfig per identity: the admin's in the
// run directory reaches the API server through the loopback forwarder; the others,
// used inside the namespaces, reach it on the segment.
func (c *Cluster) credentials(ids []*identity) error {
	var err error
	if c.ca, err = framework.NewCAValidFor("juneau-cluster-ca", 90*24*time.Hour); err != nil {
		return err
	}
	dir := c.run.path("pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	serving, servingKey, err := c.ca.IssueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(ControlPlaneIP), net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesIP)})
	if err != nil {
		return err
	}
	kubeletClient, kubeletClientKey, err := c.ca.IssueClient("kube-apiserver-kubelet-client", nil)
	if err != nil {
		return err
	}
	var tokens strings.Builder
	for _, id := range ids {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		id.token = hex.EncodeToString(b)
		fmt.Fprintf(&tokens, "%s,%s,%s,\"%s\"\n", id.token, id.user, id.user, strings.Join(id.groups, ","))
	}
	for name, data := range map[string][]byte{
		"ca.crt": c.ca.CertPEM, "apiserver.crt": serving, "apiserver.key": servingKey,
		"kubelet-client.crt": kubeletClient, "kubelet-client.key": kubeletClientKey,
		"tokens.csv": []byte(tokens.String()),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	if err := framework.WriteRSAKey(filepath.Join(dir, "sa.key")); err != nil {
		return err
	}
	for _, id := range ids {
		server := fmt.Sprintf("https://%s:%d", ControlPlaneIP, APIServerPort)
		path := c.run.path("kubeconfigs", id.name)
		if id.name == "admin" {
			server, path = "https://"+c.forwarder.addr, c.Kubeconfig
		}
		if err := writeKubeconfig(path, server, c.ca.CertPEM, id.token); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(path, server string, ca []byte, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["juneau"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["juneau"] = &clientcmdapi.Context{Cluster: "juneau", AuthInfo: "user", Namespace: "default"}
	cfg.CurrentContext = "juneau"
	return clientcmd.WriteToFile(*cfg, path)
}

// inNS wraps argv to run inside the network namespace at ns.
func inNS(ns string, argv ...string) []string {
	return append([]string{"nsenter", "--net=" + ns, "--"}, argv...)
}

// startInNS starts a component inside the control plane's namespace and verifies it
// runs there before anything uses it.
func (c *Cluster) startInNS(ctx context.Context, ns, name string, argv ...string) (*proc, error) {
	want, err := nsInode(ns)
	if err != nil {
		return nil, err
	}
	p, err := c.run.startProc(name, nil, inNS(ns, argv...)...)
	if err != nil {
		return nil, err
	}
	if err := p.execd(ctx, argv[0]); err != nil {
		return nil, err
	}
	if err := p.inNamespaces(want, 0); err != nil {
		return nil, err
	}
	c.addProc(p)
	return p, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	const client, peer = "http://127.0.0.1:2379", "http://127.0.0.1:2380"
	_, err := c.startInNS(ctx, c.CPNS, "etcd", c.bins.path("etcd"),
		"--name=juneau", "--data-dir="+c.run.path("etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=juneau="+peer, "--listen-metrics-urls=http://127.0.0.1:2381",
		"--unsafe-no-fsync", "--log-level=warn")
	return err
}

func (c *Cluster) startAPIServer(ctx context.Context) (*proc, error) {
	pki := c.run.path("pki")
	return c.startInNS(ctx, c.CPNS, "kube-apiserver", c.bins.path("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--advertise-address="+ControlPlaneIP,
		"--secure-port="+strconv.Itoa(APIServerPort),
		"--tls-cert-file="+filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(pki, "apiserver.key"),
		"--client-ca-file="+filepath.Join(pki, "ca.crt"),
		"--token-auth-file="+filepath.Join(pki, "tokens.csv"),
		"--kubelet-client-certificate="+filepath.Join(pki, "kubelet-client.crt"),
		"--kubelet-client-key="+filepath.Join(pki, "kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR+","+ServiceCIDR6,
		// The API server has no kube-proxy beside it: it calls webhooks (and aggregated
		// APIs) on their endpoints' Pod IPs, routed through the Nodes.
		"--enable-aggregator-routing=true",
		"--cert-dir="+c.run.path("apiserver"),
		"--profiling=false")
}

func (c *Cluster) startControllers(ctx context.Context) error {
	pki := c.run.path("pki")
	kcm := c.run.path("kubeconfigs", "kube-controller-manager")
	if _, err := c.startInNS(ctx, c.CPNS, "kube-controller-manager", c.bins.path("kube-controller-manager"),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		// Each Node's Pod CIDRs are given to it as it registers (Node.register), as a
		// CNI's IPAM would; the ranges here describe the dual-stack cluster.
		"--cluster-name=juneau", "--allocate-node-cidrs=false",
		"--cluster-cidr="+ClusterCIDR+","+ClusterCIDR6,
		"--service-cluster-ip-range="+ServiceCIDR+","+ServiceCIDR6,
		"--flex-volume-plugin-dir="+c.run.path("kcm-flexvolume"),
		"--profiling=false"); err != nil {
		return err
	}
	sched := c.run.path("kubeconfigs", "kube-scheduler")
	_, err := c.startInNS(ctx, c.CPNS, "kube-scheduler", c.bins.path("kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false", "--profiling=false")
	return err
}

// waitAPIServer waits until the API server answers /readyz through the forwarder.
func (c *Cluster) waitAPIServer(ctx context.Context, apiserver *proc) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if apiserver.exited() {
			return false, apiserver.failure()
		}
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}
