package rbac

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

// The policies of manifests/10-rbac-least-authority.yaml.
const (
	controllerScopePolicy = "ValidatingAdmissionPolicy 'juneau-controller-scope'"
	webhookScopePolicy    = "ValidatingAdmissionPolicy 'juneau-webhook-scope'"
)

// attempt is one write made with a component's own token, as a stolen token would be
// used, and what the API server must answer.
type attempt struct {
	what    string
	do      func(ctx context.Context) error
	refusal string // "" when the write is the component's own and must succeed
}

// check makes every attempt: the allowed ones succeed, the others are refused by policy
// with its message. First it waits until the API server enforces the policy (it loads
// policies asynchronously): probe(i) makes a write the policy refuses, a new one each
// time (a write repeated after it was let through would change nothing, and a write
// that changes nothing is allowed).
func check(t *testing.T, cp *framework.ControlPlane, policy string, probe func(ctx context.Context, i int) error, attempts []attempt) {
	t.Helper()
	refused := func(err error, want string) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), policy) && strings.Contains(err.Error(), want)
	}
	var last error
	i := 0
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		i++
		if last = probe(ctx, i); ctx.Err() != nil {
			return false, ctx.Err()
		}
		return refused(last, ""), nil
	}); err != nil {
		name := strings.Trim(strings.TrimPrefix(policy, "ValidatingAdmissionPolicy "), "'")
		if p, perr := cp.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(context.Background(), name, metav1.GetOptions{}); perr == nil {
			t.Logf("%s status: %+v", policy, p.Status)
		}
		t.Fatalf("the API server never enforced %s: the probe got %v", policy, last)
	}
	for _, a := range attempts {
		err := a.do(testContext(t, 30*time.Second))
		switch {
		case a.refusal == "" && err != nil:
			t.Errorf("%s: %v, want it allowed", a.what, err)
		case a.refusal != "" && !refused(err, a.refusal):
			t.Errorf("%s: %v, want refused by %s saying %q", a.what, err, policy, a.refusal)
		}
	}
}

// TestControllerChangesOnlyItsAnnotationsAndConditions: with the controller's token, a
// Pod's juneau annotations (its own and the managed-cloud keys it writes back) and
// juneau conditions can be written; its image, labels, other annotations, other
// conditions and phase cannot.
func TestControllerChangesOnlyItsAnnotationsAndConditions(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ns := cp.NewNamespace(t, "least-controller")
	ctx := testContext(t, 2*time.Minute)
	pod, err := cp.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "shop"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := cp.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.ServiceAccountConfig(t, framework.SystemNamespace, framework.ControllerServiceAccount))
	patch := func(body string, sub ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := kube.CoreV1().Pods(ns).Patch(ctx, "web", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, sub...)
			return err
		}
	}
	annotation := func(k, v string) string {
		return `{"metadata":{"annotations":{"` + k + `":"` + v + `"}}}`
	}
	condition := func(typ, status string) string {
		return `{"status":{"conditions":[{"type":"` + typ + `","status":"` + status + `"}]}}`
	}
	attempts := []attempt{
		{what: "the controller setting the Pod's image", do: patch(`{"spec":{"containers":[{"name":"web","image":"registry.example/evil:1"}]}}`),
			refusal: "not its spec, labels, finalizers or owner references"},
		{what: "the controller changing the Pod's labels", do: patch(`{"metadata":{"labels":{"app":"evil"}}}`),
			refusal: "not its spec, labels, finalizers or owner references"},
		{what: "the controller changing an annotation not its own", do: patch(annotation("team", "evil")),
			refusal: "changes only juneau.loutres.me/ annotations of Pod \"" + ns + "/web\", not team"},
		{what: "the controller removing an annotation not its own", do: patch(`{"metadata":{"annotations":{"team":null}}}`),
			refusal: "not team"},
		{what: "the controller setting the Pod's Ready condition", do: patch(condition("Ready", "True"), "status"),
			refusal: "changes only juneau.loutres.me/ conditions of Pod \"" + ns + "/web\""},
		{what: "the controller setting the Pod's phase", do: patch(`{"status":{"phase":"Failed"}}`, "status"),
			refusal: "not its other conditions, phase, addresses or container statuses"},
		{what: "the controller setting its condition", do: patch(condition(v1alpha1.PodConditionElasticIPAssigned, "True"), "status")},
	}
	for _, k := range annotations.WrittenBack() {
		attempts = append(attempts, attempt{what: "the controller writing back " + k, do: patch(annotation(k, "web-eip"))})
	}
	probe := func(ctx context.Context, i int) error {
		return patch(fmt.Sprintf(`{"metadata":{"labels":{"probe":"%d"}}}`, i))(ctx)
	}
	check(t, cp, controllerScopePolicy, probe, attempts)

	got, err := cp.Kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := got.Spec.Containers[0].Image; img != "registry.example/web:1" {
		t.Errorf("the Pod's image is %q after the refused patch", img)
	}
}

// TestWebhookChangesOnlyItsCABundleAndSecret: with the webhook's token, the caBundle of
// its ValidatingWebhookConfiguration and its TLS Secret can be written; the
// configuration's failure policy, service and rules cannot, nor another Secret.
func TestWebhookChangesOnlyItsCABundleAndSecret(t *testing.T) {
	cp := framework.Shared(t)
	cp.ApplyRBAC(t)
	ctx := testContext(t, 2*time.Minute)
	// A configuration of the webhook's name whose rules match nothing of the shared
	// control plane, so other tests never call it.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "juneau-webhook"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "elasticips.juneau.loutres.me",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: framework.SystemNamespace, Name: "juneau-webhook", Path: ptr.To("/validate")},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), "juneau-webhook", metav1.DeleteOptions{})
		_ = cp.Kube.CoreV1().Secrets(framework.SystemNamespace).Delete(context.Background(), "juneau-webhook-tls", metav1.DeleteOptions{})
	})
	kube := kubernetes.NewForConfigOrDie(cp.ServiceAccountConfig(t, framework.SystemNamespace, framework.WebhookServiceAccount))
	patch := func(body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, "juneau-webhook", types.JSONPatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
	}
	secret := func(name string, typ corev1.SecretType) func(context.Context) error {
		return func(ctx context.Context) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: framework.SystemNamespace}, Type: typ,
				Data: map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")}}
			_, err := kube.CoreV1().Secrets(framework.SystemNamespace).Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = kube.CoreV1().Secrets(framework.SystemNamespace).Update(ctx, s, metav1.UpdateOptions{})
			}
			return err
		}
	}
	const others = "its other fields (clientConfig, rules, failurePolicy, selectors, timeouts) stay as installed"
	probe := func(ctx context.Context, i int) error {
		return patch(fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/timeoutSeconds","value":%d}]`, 1+i%30))(ctx)
	}
	check(t, cp, webhookScopePolicy, probe, []attempt{
		{what: "the webhook switching its failure policy to Ignore", do: patch(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`), refusal: others},
		{what: "the webhook repointing its service", do: patch(`[{"op":"replace","path":"/webhooks/0/clientConfig/service/name","value":"evil"}]`), refusal: others},
		{what: "the webhook dropping its rules", do: patch(`[{"op":"replace","path":"/webhooks/0/rules","value":[]}]`), refusal: others},
		{what: "the webhook setting its caBundle", do: patch(`[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"Y2E="}]`)},
		{what: "the webhook creating another Secret", do: secret("evil", corev1.SecretTypeOpaque),
			refusal: `not in Secret "juneau-system/evil"`},
		{what: "the webhook writing its Secret with another type", do: secret("juneau-webhook-tls", corev1.SecretTypeOpaque),
			refusal: `of type kubernetes.io/tls only`},
		{what: "the webhook writing its TLS Secret", do: secret("juneau-webhook-tls", corev1.SecretTypeTLS)},
	})
}
