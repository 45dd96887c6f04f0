package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Passwords reads a key of a Secret it was asked to watch: pending until the Secret's
// cache has synced, then the value, or an error naming what is missing; a change of the
// Secret calls onChange and is seen; a Secret no longer wanted is forgotten.
func TestPasswords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "juneau-system", Name: "juneau-bgp-passwords"},
		Data: map[string][]byte{"tor-a": []byte("s3cret")}})
	changes := make(chan struct{}, 100)
	p := NewPasswords(kube, time.Minute, func() { changes <- struct{}{} })
	ref := v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "juneau-bgp-passwords", Key: "tor-a"}
	if _, err := p.Password(ref); !errors.Is(err, ErrPasswordPending) {
		t.Fatalf("before any Want: %v, want ErrPasswordPending", err)
	}
	p.start(ctx)
	stopped := make(chan struct{})
	go func() { p.stop(); close(stopped) }()

	secret := types.NamespacedName{Namespace: "juneau-system", Name: "juneau-bgp-passwords"}
	missing := types.NamespacedName{Namespace: "juneau-system", Name: "other"}
	p.Want([]types.NamespacedName{secret, missing})
	eventually := func(what string, ok func() (bool, string)) {
		t.Helper()
		var last string
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			done, got := ok()
			last = got
			return done, nil
		}); err != nil {
			t.Fatalf("%s: last %s", what, last)
		}
	}
	eventually("the password", func() (bool, string) {
		got, err := p.Password(ref)
		return err == nil && got == "s3cret", got + " " + errString(err)
	})
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Error("no onChange once the Secret's cache synced")
	}
	if _, err := p.Password(v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "juneau-bgp-passwords", Key: "tor-b"}); err == nil ||
		!strings.Contains(err.Error(), `Secret "juneau-system/juneau-bgp-passwords" has no key "tor-b"`) {
		t.Errorf("missing key: %v", err)
	}
	eventually("the missing Secret", func() (bool, string) {
		_, err := p.Password(v1alpha1.SecretKeyReference{Namespace: "juneau-system", Name: "other", Key: "tor-a"})
		return err != nil && strings.Contains(err.Error(), `Secret "juneau-system/other" does not exist`), errString(err)
	})

	if _, err := kube.CoreV1().Secrets("juneau-system").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "juneau-system", Name: "juneau-bgp-passwords"},
		Data: map[string][]byte{"tor-a": []byte("n3w")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the changed password", func() (bool, string) {
		got, err := p.Password(ref)
		return err == nil && got == "n3w", got + " " + errString(err)
	})

	p.Want(nil)
	if _, err := p.Password(ref); !errors.Is(err, ErrPasswordPending) {
		t.Errorf("after the Secret is no longer wanted: %v, want ErrPasswordPending", err)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("stop did not return after the context ended")
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
