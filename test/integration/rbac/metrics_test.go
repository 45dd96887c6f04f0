package rbac

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/test/framework"
)

var servingAddr = regexp.MustCompile(`"Serving metrics and health".* address="([^"]+)" secure=true`)

// TestMetricsOnlyToReaders runs `juneau controller` with its own ServiceAccount's token
// and the shipped RBAC, metrics served as by default: over HTTPS, /metrics only to a
// token whose user the API server lets get /metrics (the ClusterRole
// juneau-metrics-reader), the health endpoints to anyone (the kubelet's probes).
func TestMetricsOnlyToReaders(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ctx := testContext(t, time.Minute)
	reader := "metrics-reader"
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-" + reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "juneau-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: reader, Namespace: framework.SystemNamespace}},
	}
	if _, err := cp.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	readerToken := cp.ServiceAccountConfig(t, framework.SystemNamespace, reader).BearerToken
	// The webhook's ServiceAccount exists and may do much, but not read metrics.
	otherToken := cp.ServiceAccountConfig(t, framework.SystemNamespace, "juneau-webhook").BearerToken

	ctrl := framework.StartComponent(t, "controller", "controller",
		"--kubeconfig="+cp.ServiceAccountKubeconfig(t, framework.SystemNamespace, framework.ControllerServiceAccount),
		"--metrics-bind-address=127.0.0.1:0", "--leader-elect=false", "-v=2")
	var addr string
	framework.Eventually(t, "the controller serves metrics over HTTPS", func(context.Context) (bool, string) {
		if m := servingAddr.FindStringSubmatch(ctrl.Log()); m != nil {
			addr = m[1]
		}
		return addr != "", ctrl.LogTail(5)
	}, ctrl)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(ctx context.Context, path, token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		what, path, token string
		code              int
		body              string
	}{
		{"/metrics without a token", "/metrics", "", http.StatusUnauthorized, "bearer token"},
		{"/metrics with a forged token", "/metrics", "forged", http.StatusUnauthorized, "bearer token"},
		{"/metrics as the webhook", "/metrics", otherToken, http.StatusForbidden,
			`user "system:serviceaccount:` + framework.SystemNamespace + `:juneau-webhook" may not get /metrics`},
		{"/metrics as a metrics reader", "/metrics", readerToken, http.StatusOK, "juneau_elasticip_allocations_total"},
		{"/healthz without a token", "/healthz", "", http.StatusOK, "ok"},
	} {
		// Eventually: the controller's caches and RBAC's own cache settle after the start.
		framework.Eventually(t, tc.what, func(ctx context.Context) (bool, string) {
			code, body := get(ctx, tc.path, tc.token)
			return code == tc.code && strings.Contains(body, tc.body), body
		}, ctrl)
	}
	if log := strings.ToLower(ctrl.Log()); strings.Contains(log, "forbidden") {
		t.Errorf("the controller was refused something:\n%s", ctrl.LogTail(60))
	}
}
