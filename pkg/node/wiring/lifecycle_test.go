package wiring

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// node is this Node with the given InternalIPs.
func node(addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "node-uid"}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

func TestBGPRouterID(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name    string
		flag    string
		objects []runtime.Object
		want    string
		wantErr string
		noID    bool
	}{
		{name: "the flag wins", flag: "192.0.2.99", objects: []runtime.Object{node("192.0.2.10")}, want: "192.0.2.99"},
		{name: "the IPv4 InternalIP, after an IPv6 one", objects: []runtime.Object{node("2001:db8::10", "192.0.2.10")}, want: "192.0.2.10"},
		{name: "an IPv6 Node has none", objects: []runtime.Object{node("2001:db8::10")}, wantErr: "has no IPv4 InternalIP", noID: true},
		{name: "no Node", wantErr: `reading Node "node-a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := Options{NodeName: nodeName, RouterID: tc.flag}.bgpRouterID(ctx, kubefake.NewClientset(tc.objects...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, errNoRouterID) != tc.noID {
					t.Fatalf("error %v, want one containing %q (errNoRouterID: %v)", err, tc.wantErr, tc.noID)
				}
				return
			}
			if err != nil || id != netip.MustParseAddr(tc.want) {
				t.Fatalf("router ID %v, %v; want %s", id, err, tc.want)
			}
		})
	}
}

// fakeTable records the removal of the nftables table.
type fakeTable struct{ removed bool }

func (f *fakeTable) Remove(context.Context) error { f.removed = true; return nil }

// TestShutdownVerdict: the table is removed only when the DaemonSet running the
// agent's Pod is being deleted; the verdict file says what was decided.
func TestShutdownVerdict(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "juneau-node-x", Namespace: "juneau-node",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "juneau-node", Controller: new(true)}}}}
	ds := func(deleting bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "juneau-node", Namespace: "juneau-node"}}
		if deleting {
			d.DeletionTimestamp = &metav1.Time{}
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		pods    []*corev1.Pod
		objects []runtime.Object
		want    string
	}{
		{name: "DaemonSet being deleted", pods: []*corev1.Pod{pod}, objects: []runtime.Object{ds(true)}, want: "uninstall: DaemonSet juneau-node/juneau-node is being deleted"},
		{name: "DaemonSet gone", pods: []*corev1.Pod{pod}, want: "uninstall: DaemonSet juneau-node/juneau-node no longer exists"},
		{name: "DaemonSet there", pods: []*corev1.Pod{pod}, objects: []runtime.Object{ds(false)}, want: "restart: DaemonSet juneau-node/juneau-node still exists"},
		{name: "no Pod", objects: []runtime.Object{ds(true)}, want: "restart: not run by a DaemonSet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, p := range tc.pods {
				if err := pods.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			o := Options{PodName: pod.Name, PodNamespace: pod.Namespace, VerdictFile: filepath.Join(t.TempDir(), "verdict")}
			table := &fakeTable{}
			uninstall := o.shutdown(logger, kubefake.NewClientset(tc.objects...), corelisters.NewPodLister(pods), table)
			written, err := os.ReadFile(o.VerdictFile)
			if err != nil {
				t.Fatal(err)
			}
			wantUninstall := strings.HasPrefix(tc.want, "uninstall")
			if uninstall != wantUninstall || table.removed != wantUninstall || string(written) != tc.want+"\n" {
				t.Errorf("uninstall %v, table removed %v, verdict %q; want %q", uninstall, table.removed, written, tc.want)
			}
		})
	}
}

// TestHeartbeatLease: the heartbeat creates the agent's Lease, labelled and owned by
// its Node, lasting --heartbeat-lease-duration.
func TestHeartbeatLease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := kubefake.NewClientset(node("192.0.2.10"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		Options{NodeName: nodeName, LeaseNamespace: "juneau-node", LeaseDuration: 40 * time.Second}.heartbeat(kube).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	eventually(t, ctx, "the heartbeat Lease", func() bool {
		l, err := kube.CoordinationV1().Leases("juneau-node").Get(ctx, v1alpha1.NodeLeasePrefix+nodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		owners := l.OwnerReferences
		if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].UID != types.UID("node-uid") ||
			l.Labels["app.kubernetes.io/component"] != "node" || *l.Spec.LeaseDurationSeconds != 40 || *l.Spec.HolderIdentity != nodeName {
			t.Fatalf("Lease %+v", l)
		}
		return true
	})
}
