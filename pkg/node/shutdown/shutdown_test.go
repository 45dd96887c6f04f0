package shutdown

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

var owner = Owner{Namespace: "juneau-node", Name: "juneau-node"}

func TestDecide(t *testing.T) {
	now := metav1.Now()
	dsGroup := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	for _, tc := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		err       error
		uninstall bool
	}{
		{name: "the DaemonSet is there: a restart", ds: &appsv1.DaemonSet{}},
		{name: "the DaemonSet is being deleted", ds: &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, uninstall: true},
		{name: "the DaemonSet is gone", err: apierrors.NewNotFound(dsGroup, "juneau-node"), uninstall: true},
		{name: "the ServiceAccount is gone", err: apierrors.NewUnauthorized("token"), uninstall: true},
		{name: "the RBAC is gone", err: apierrors.NewForbidden(dsGroup, "juneau-node", errors.New("no rule")), uninstall: true},
		{name: "the API server is unreachable: keep", err: errors.New("dial tcp 10.96.0.1:443: connect: connection refused")},
		{name: "a timeout: keep", err: apierrors.NewTimeoutError("slow", 1)},
		{name: "a server error: keep", err: apierrors.NewInternalError(errors.New("etcd"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(owner, tc.ds, tc.err)
			if v.Uninstall != tc.uninstall || v.Reason == "" {
				t.Errorf("Decide = %+v, want uninstall %v with a reason", v, tc.uninstall)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name}}
	kube := fake.NewClientset(ds)
	ctx := context.Background()
	if v := Check(ctx, kube, owner); v.Uninstall {
		t.Errorf("with the DaemonSet in place: %v", v)
	}
	if err := kube.AppsV1().DaemonSets(owner.Namespace).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := Check(ctx, kube, owner); !v.Uninstall {
		t.Errorf("with the DaemonSet deleted: %v", v)
	}
}

func TestOwnerOf(t *testing.T) {
	controller := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "juneau-node", Name: "juneau-node-x",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "juneau-node", Controller: &controller}}}}
	if got, ok := OwnerOf(pod); !ok || got != owner {
		t.Errorf("OwnerOf = %v, %v; want %v", got, ok, owner)
	}
	pod.OwnerReferences[0].Kind = "ReplicaSet"
	if got, ok := OwnerOf(pod); ok {
		t.Errorf("a Pod of a ReplicaSet: OwnerOf = %v, want none", got)
	}
	if got, ok := OwnerOf(&corev1.Pod{}); ok {
		t.Errorf("a bare Pod: OwnerOf = %v, want none", got)
	}
}

func TestWriteVerdict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verdict")
	if err := WriteVerdict(path, Verdict{Uninstall: true, Reason: "DaemonSet juneau-node/juneau-node no longer exists"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "uninstall: DaemonSet juneau-node/juneau-node no longer exists\n"; string(got) != want {
		t.Errorf("verdict file = %q, want %q", got, want)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
