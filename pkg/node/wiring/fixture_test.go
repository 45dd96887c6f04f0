package wiring

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneaufake "github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/agent"
)

// nodeName is the Node of the agent under test.
const nodeName = "node-a"

// Addresses of the fixture, each family's apart: an ElasticIP answered for must be no
// Node address, no ServiceCIDR and no Pod CIDR.
const (
	eip4, eip6 = "10.225.51.5", "2001:db8:51::5"
	pod4, pod6 = "10.244.1.5", "fd00:10:244:1::5"
)

// watchedKind says how the tests make an object of a kind of kinds and find it in the
// agent's inputs. It is written apart from kinds: a kind added there and not here fails
// TestEveryKindIsDeclaredOnce.
type watchedKind struct {
	// resource is the kind's API resource, as the fake clients record their actions.
	resource string
	// onNode: listed and watched with the field selector spec.nodeName=<this Node>.
	onNode bool
	// object is an object of this Node named name, with addresses of one family.
	object func(name string, v6 bool) runtime.Object
	// inputs are the names of the kind's objects among the agent's inputs.
	inputs func(in agent.Inputs) []string
}

// family picks the address of the family.
func family(v6 bool, v4Addr, v6Addr string) string {
	if v6 {
		return v6Addr
	}
	return v4Addr
}

var watched = map[string]watchedKind{
	"ElasticIPAttachment": {resource: "elasticipattachments",
		object: func(name string, v6 bool) runtime.Object {
			return &v1alpha1.ElasticIPAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
					Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
				Status: v1alpha1.ElasticIPAttachmentStatus{Phase: v1alpha1.AttachmentAttached, NodeName: nodeName,
					ElasticIP: family(v6, eip4, eip6), PodIP: family(v6, pod4, pod6),
					Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}},
			}
		},
		inputs: func(in agent.Inputs) []string { all, _ := in.AllAttachments(); return names(all) }},
	"ARPAdvertisement": {resource: "arpadvertisements", onNode: true,
		object: func(name string, v6 bool) runtime.Object {
			return &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.ARPAdvertisementSpec{Address: family(v6, eip4, eip6), NodeName: nodeName}}
		},
		inputs: func(in agent.Inputs) []string { all, _ := in.AllAdvertisements(); return names(all) }},
	"Node": {resource: "nodes",
		object: func(name string, v6 bool) runtime.Object {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: family(v6, "192.0.2.10", "2001:db8:2::10")}}}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.Nodes) }},
	"ServiceCIDR": {resource: "servicecidrs",
		object: func(name string, v6 bool) runtime.Object {
			return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{family(v6, "10.96.0.0/16", "fd00:96::/112")}}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.ServiceCIDRs) }},
	"Pod": {resource: "pods", onNode: true,
		object: func(name string, v6 bool) runtime.Object {
			ip := family(v6, pod4, pod6)
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: nodeName},
				Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.Pods) }},
	"NetworkInterface": {resource: "networkinterfaces", onNode: true,
		object: func(name string, v6 bool) runtime.Object {
			return &v1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec:   v1alpha1.NetworkInterfaceSpec{NodeName: nodeName, PodRef: v1alpha1.PodReference{Name: name}},
				Status: v1alpha1.NetworkInterfaceStatus{Address: family(v6, "10.225.52.7/32", "2001:db8:52::7/128")}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.NICs) }},
	"ElasticIP": {resource: "elasticips",
		object: func(name string, v6 bool) runtime.Object {
			// Labels, annotations and conditions the agent's cache drops (agent.TrimElasticIP).
			return &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "kept by nobody"}},
				Status: v1alpha1.ElasticIPStatus{Address: family(v6, eip4, eip6), Conditions: []metav1.Condition{
					{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Attached", Message: "attached"}}}}
		},
		inputs: func(in agent.Inputs) []string {
			// The agent looks ElasticIPs up in its cache: the two the test makes.
			var out []string
			for _, name := range []string{"v4", "v6"} {
				if in.ElasticIPs != nil && in.ElasticIPs.ElasticIP("default/"+name) != nil {
					out = append(out, name)
				}
			}
			return out
		}},
	"ExternalNetwork": {resource: "externalnetworks",
		object: func(name string, _ bool) runtime.Object {
			return &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.ExternalNetworkSpec{Type: v1alpha1.AdvertiseARP, AddressPools: []string{name}}}
		},
		inputs: func(in agent.Inputs) []string { return keys(in.Networks, "") }},
	"BGPPeer": {resource: "bgppeers",
		object: func(name string, v6 bool) runtime.Object {
			return &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.BGPPeerSpec{PeerAddress: family(v6, "192.0.2.1", "2001:db8:2::1")}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.BGPPeers) }},
	"BGPAdvertisement": {resource: "bgpadvertisements", onNode: true,
		object: func(name string, v6 bool) runtime.Object {
			return &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.BGPAdvertisementSpec{Address: family(v6, "10.225.53.5", "2001:db8:53::5"), NodeName: nodeName}}
		},
		inputs: func(in agent.Inputs) []string { return names(in.BGPAdvertisements) }},
}

// names are the sorted names of objs.
func names[T metav1.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

// keys are the sorted keys of m, each without prefix.
func keys[T any](m map[string]T, prefix string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k[len(prefix):])
	}
	slices.Sort(out)
	return out
}

// kindNames are the names of the kinds of watched, sorted.
func kindNames() []string {
	out := make([]string, 0, len(watched))
	for name := range watched {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// clients are fake API clients.
type clients struct {
	kube   *kubefake.Clientset
	juneau *juneaufake.Clientset
}

// add adds obj to the fake clients, as a watch event to the informers.
func (cs clients) add(t *testing.T, obj runtime.Object) {
	t.Helper()
	tracker := cs.juneau.Tracker()
	// As the API server sends them: the caches must drop this bookkeeping.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
	}
	switch obj.(type) {
	case *corev1.Pod, *corev1.Node, *networkingv1.ServiceCIDR:
		tracker = cs.kube.Tracker()
	}
	if err := tracker.Add(obj); err != nil {
		t.Fatalf("adding %T: %v", obj, err)
	}
}

// newClients are fake clients holding, of every watched kind, an IPv4 object "v4" and
// an IPv6 one "v6" when seeded.
func newClients(t *testing.T, seeded bool) clients {
	cs := clients{kube: kubefake.NewClientset(), juneau: juneaufake.NewClientset()}
	if seeded {
		for _, name := range kindNames() {
			cs.add(t, watched[name].object("v4", false))
			cs.add(t, watched[name].object("v6", true))
		}
	}
	return cs
}

// responder records what the agent answers ARP or NDP for (agent.ARP, agent.NDP), and
// counts the syncs that set it.
type responder struct {
	mu    sync.Mutex
	addrs []netip.Addr
	syncs int
}

func (r *responder) SetAddressesSince(addrs []netip.Addr, _ listdiff.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs, r.syncs = slices.Clone(addrs), r.syncs+1
}

func (r *responder) SetGratuitous([]netip.Addr) {}

// answers are the addresses answered for, and the number of syncs so far.
func (r *responder) answers() ([]netip.Addr, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs), r.syncs
}

// standbyAgent is an agent on c standing by (another agent of the Node holds the
// datapath): a sync reads the caches and sets the ARP and NDP answers, and writes
// nothing, so that the tests' events alone trigger syncs.
func standbyAgent(t *testing.T, c *caches, arp, ndp *responder) *agent.Agent {
	t.Helper()
	a := agent.New(agent.Config{NodeName: nodeName, ExternalInterface: "ext0",
		MinInterval: time.Millisecond, Resync: time.Hour, Holds: func() bool { return false },
	}, agent.Clients{}, c.listers, nil, arp, ndp, nil, nil)
	if err := c.watch(a); err != nil {
		t.Fatal(err)
	}
	return a
}

// start starts the informers of c, and a when not nil, until the test ends.
func start(t *testing.T, c *caches, a *agent.Agent) context.Context {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		c.shutdown()
	})
	c.start(ctx.Done())
	if a != nil {
		wg.Go(func() {
			if err := a.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	return ctx
}

// eventually polls cond until it holds, failing the test after a timeout.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
