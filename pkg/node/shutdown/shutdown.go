// Package shutdown decides what a stopping node agent leaves on its Node.
//
// A node agent stops for two very different reasons. A restart (a rolling update of the
// DaemonSet, an evicted or crashed Pod) must leave the datapath in place: the next agent
// takes it over without interrupting translated traffic. An uninstall (`kubectl delete -k
// manifests/`) must leave the Node as it was before juneau: no nftables table, no juneau
// entry in the CNI configuration.
//
// The agent tells them apart at SIGTERM by asking the API server about the DaemonSet
// that owns its Pod (see docs/operations.md):
//
//   - the DaemonSet is gone, or is being deleted: uninstall;
//   - the agent's credentials were revoked (401: its ServiceAccount is gone; 403: its
//     RBAC is gone), which is what `kubectl delete -k` does before the Pods stop: uninstall;
//   - the DaemonSet is there: restart;
//   - anything else (the API server cannot be reached, a timeout): restart, since keeping
//     the datapath is the safe choice when in doubt; the agent of the next install takes
//     the table over.
package shutdown

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Verdict is what a stopping agent does with its Node.
type Verdict struct {
	// Uninstall: remove the datapath and the CNI entry. Otherwise keep everything.
	Uninstall bool
	// Reason says why, for the log and the verdict file.
	Reason string
}

// String is the verdict as written to the verdict file: "uninstall: <reason>" or
// "restart: <reason>".
func (v Verdict) String() string {
	if v.Uninstall {
		return "uninstall: " + v.Reason
	}
	return "restart: " + v.Reason
}

// Owner names the DaemonSet that runs the agent's Pod.
type Owner struct {
	Namespace, Name string
}

func (o Owner) String() string { return "DaemonSet " + o.Namespace + "/" + o.Name }

// OwnerOf returns the DaemonSet controlling pod; ok is false when a DaemonSet does not
// run it (the agent started by hand or by a test), in which case it never uninstalls.
func OwnerOf(pod *corev1.Pod) (Owner, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return Owner{}, false
	}
	return Owner{Namespace: pod.Namespace, Name: ref.Name}, true
}

// Decide turns what the API server answered about the owner into a verdict.
func Decide(owner Owner, ds *appsv1.DaemonSet, err error) Verdict {
	switch {
	case err == nil && ds.DeletionTimestamp != nil:
		return Verdict{Uninstall: true, Reason: owner.String() + " is being deleted"}
	case err == nil:
		return Verdict{Reason: owner.String() + " still exists"}
	case apierrors.IsNotFound(err):
		return Verdict{Uninstall: true, Reason: owner.String() + " no longer exists"}
	case apierrors.IsUnauthorized(err):
		return Verdict{Uninstall: true, Reason: "the agent's credentials are no longer accepted (its ServiceAccount was deleted)"}
	case apierrors.IsForbidden(err):
		return Verdict{Uninstall: true, Reason: "the agent may no longer read its " + owner.String() + " (its RBAC was deleted)"}
	default:
		return Verdict{Reason: fmt.Sprintf("could not read %s (%v); keeping the datapath", owner, err)}
	}
}

// Check asks the API server about the owner and decides.
func Check(ctx context.Context, kube kubernetes.Interface, owner Owner) Verdict {
	ds, err := kube.AppsV1().DaemonSets(owner.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	return Decide(owner, ds, err)
}

// WriteVerdict writes the verdict to path for the other containers of the Pod (the one
// keeping the CNI entry removes it on an uninstall), atomically.
func WriteVerdict(path string, v Verdict) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".verdict-")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(v.String() + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
