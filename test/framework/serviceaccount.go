package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Where manifests/ installs juneau (the controller and the webhook in SystemNamespace,
// the node agent in NodeNamespace), and the ServiceAccount each component runs as.
const (
	SystemNamespace                = "juneau-system"
	NodeNamespace                  = "juneau-node"
	ControllerServiceAccount       = "juneau-controller"
	NodeServiceAccount             = "juneau-node"
	WebhookServiceAccount          = "juneau-webhook"
	serviceAccountTokenLifetimeSec = int64(time.Hour / time.Second)
)

// RBACManifests returns the files of manifests/ that ApplyRBAC applies, relative to the
// repository root: the namespace, then each component's ServiceAccount and RBAC, and
// the ValidatingAdmissionPolicies confining each node agent to its own Node and the
// controller and the webhook to what they write.
func RBACManifests() []string {
	return []string{
		"manifests/00-namespace.yaml",
		"manifests/10-rbac-controller.yaml",
		"manifests/10-rbac-node.yaml",
		"manifests/10-rbac-node-scope.yaml",
		"manifests/10-rbac-least-authority.yaml",
		"manifests/10-rbac-metrics.yaml",
		"manifests/webhook/rbac.yaml",
	}
}

// ApplyRBAC applies the namespace, the ServiceAccounts and the RBAC of every component
// from manifests/ with the built kubectl, so components can run with the credentials
// of their own ServiceAccount (see ServiceAccountKubeconfig). It is idempotent and may
// be called by several tests of a package.
func (cp *ControlPlane) ApplyRBAC(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Server-side apply by one field manager: concurrent calls never conflict.
	args := []string{"apply", "--server-side", "--force-conflicts", "--field-manager=juneau-test-rbac"}
	for _, f := range RBACManifests() {
		args = append(args, "-f", filepath.Join(cp.RepoRoot, f))
	}
	if r := cp.Kubectl(ctx, "", args...); r.Err != nil {
		t.Fatalf("applying the RBAC manifests: %v", r.Err)
	}
}

// ServiceAccountKubeconfig makes sure the namespace and the ServiceAccount exist, gets
// a one-hour token for it through the TokenRequest API and writes a kubeconfig using
// that token (same server and CA as cp.Kubeconfig) into t.TempDir(). It returns the
// kubeconfig's path. Permissions are whatever RBAC grants the ServiceAccount (see
// ApplyRBAC). The token is bound to no object, so it names no Node: the node agent's
// needs NodeBoundKubeconfig.
func (cp *ControlPlane) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	return cp.tokenKubeconfig(t, namespace, name, nil, namespace+"-"+name)
}

// NodeBoundKubeconfig is ServiceAccountKubeconfig with a token bound to the Node object
// named node, which must exist. The API server then puts the Node's name into the
// token's user (extra authentication.kubernetes.io/node-name), as it does for the
// projected token of a DaemonSet Pod on that Node, and rejects the token once the Node
// is deleted. The node agent's ValidatingAdmissionPolicy (manifests/) scopes the agent's
// writes to that Node.
func (cp *ControlPlane) NodeBoundKubeconfig(t testing.TB, namespace, name, node string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := cp.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("binding a token of ServiceAccount %s/%s to Node %s: %v", namespace, name, node, err)
	}
	bound := &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
	return cp.tokenKubeconfig(t, namespace, name, bound, namespace+"-"+name+"-"+node)
}

// NodeBoundConfig is a client configuration acting as the ServiceAccount with a token
// bound to the Node, built from NodeBoundKubeconfig.
func (cp *ControlPlane) NodeBoundConfig(t testing.TB, namespace, name, node string) *rest.Config {
	t.Helper()
	return cp.loadConfig(t, cp.NodeBoundKubeconfig(t, namespace, name, node))
}

// ServiceAccountConfig is a client configuration acting as the ServiceAccount, built
// from ServiceAccountKubeconfig.
func (cp *ControlPlane) ServiceAccountConfig(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	return cp.loadConfig(t, cp.ServiceAccountKubeconfig(t, namespace, name))
}

func (cp *ControlPlane) loadConfig(t testing.TB, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = cp.Config.QPS, cp.Config.Burst
	return cfg
}

// tokenKubeconfig requests a token (bound to the object when bound is set) and writes a
// kubeconfig using it into t.TempDir() as <file>.kubeconfig.
func (cp *ControlPlane) tokenKubeconfig(t testing.TB, namespace, name string, bound *authenticationv1.BoundObjectReference, file string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token, err := cp.serviceAccountToken(ctx, namespace, name, bound)
	if err != nil {
		t.Fatalf("ServiceAccount %s/%s: %v", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["juneau-test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CA.CertPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "juneau-test", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), file+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("writing the kubeconfig of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return path
}

func (cp *ControlPlane) serviceAccountToken(ctx context.Context, namespace, name string, bound *authenticationv1.BoundObjectReference) (string, error) {
	core := cp.Kube.CoreV1()
	_, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the namespace: %w", err)
	}
	_, err = core.ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the ServiceAccount: %w", err)
	}
	tr, err := core.ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(serviceAccountTokenLifetimeSec), BoundObjectRef: bound},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token: %w", err)
	}
	return tr.Status.Token, nil
}
