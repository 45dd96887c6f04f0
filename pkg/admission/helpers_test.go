package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/tenancy"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
)

// fixture holds validators over fake clients whose informer caches are seeded by hand,
// so a test can put an object in the cache and the API server (cached), only in the
// API server (live: created a moment ago, not yet seen by the informer), or neither.
type fixture struct {
	t         testing.TB
	kube      *kubefake.Clientset
	juneau    *fake.Clientset
	kubeInf   kubeinformers.SharedInformerFactory
	juneauInf juneauinformers.SharedInformerFactory
	v         *Validators
	handler   *Handler
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, kube: kubefake.NewClientset(), juneau: fake.NewClientset()}
	f.kubeInf = kubeinformers.NewSharedInformerFactory(f.kube, 0)
	f.juneauInf = juneauinformers.NewSharedInformerFactory(f.juneau, 0)
	v, err := New(f.kube, f.juneau, f.kubeInf, f.juneauInf)
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	f.handler = NewHandler(v, func() bool { return true })
	return f
}

// cached adds objects to the API server and to the caches.
func (f *fixture) cached(objs ...runtime.Object) *fixture {
	f.t.Helper()
	f.live(objs...)
	for _, o := range objs {
		if err := f.indexerFor(o).Add(o); err != nil {
			f.t.Fatal(err)
		}
	}
	return f
}

// live adds objects to the API server only.
func (f *fixture) live(objs ...runtime.Object) *fixture {
	f.t.Helper()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.Pod, *corev1.Node, *corev1.Namespace:
			err = f.kube.Tracker().Add(o)
		default:
			err = f.juneau.Tracker().Add(o)
		}
		if err != nil {
			f.t.Fatalf("adding %T: %v", o, err)
		}
	}
	return f
}

func (f *fixture) indexerFor(o runtime.Object) interface{ Add(any) error } {
	j := f.juneauInf.Juneau().V1alpha1()
	switch o := o.(type) {
	case *v1alpha1.AddressPool:
		return j.AddressPools().Informer().GetIndexer()
	case *v1alpha1.ExternalNetwork:
		return j.ExternalNetworks().Informer().GetIndexer()
	case *v1alpha1.ElasticIP:
		return j.ElasticIPs().Informer().GetIndexer()
	case *v1alpha1.ElasticIPAttachment:
		return j.ElasticIPAttachments().Informer().GetIndexer()
	case *v1alpha1.NetworkInterface:
		return j.NetworkInterfaces().Informer().GetIndexer()
	case *v1alpha1.ARPAdvertisement:
		return j.ARPAdvertisements().Informer().GetIndexer()
	case *v1alpha1.BGPAdvertisement:
		return j.BGPAdvertisements().Informer().GetIndexer()
	case *v1alpha1.BGPPeer:
		return j.BGPPeers().Informer().GetIndexer()
	case *corev1.Pod:
		return transformed{f.kubeInf.Core().V1().Pods().Informer().GetIndexer(), cached.Pod}
	case *corev1.Node:
		return transformed{f.kubeInf.Core().V1().Nodes().Informer().GetIndexer(), cached.Node}
	case *corev1.Namespace:
		return transformed{f.kubeInf.Core().V1().Namespaces().Informer().GetIndexer(), tenancy.TrimNamespace}
	default:
		f.t.Fatalf("no cache for %T", o)
		return nil
	}
}

// transformed applies the informer's transform, as a running informer would.
type transformed struct {
	indexer   interface{ Add(any) error }
	transform func(any) (any, error)
}

func (t transformed) Add(o any) error {
	o, err := t.transform(o)
	if err != nil {
		return err
	}
	return t.indexer.Add(o)
}

// kinds of the objects under review: group, version, kind and resource.
var reviewKinds = map[string]struct{ group, version, resource string }{
	"AddressPool":         {v1alpha1.GroupName, "v1alpha1", "addresspools"},
	"ExternalNetwork":     {v1alpha1.GroupName, "v1alpha1", "externalnetworks"},
	"ElasticIP":           {v1alpha1.GroupName, "v1alpha1", "elasticips"},
	"ElasticIPAttachment": {v1alpha1.GroupName, "v1alpha1", "elasticipattachments"},
	"NetworkInterface":    {v1alpha1.GroupName, "v1alpha1", "networkinterfaces"},
	"ARPAdvertisement":    {v1alpha1.GroupName, "v1alpha1", "arpadvertisements"},
	"BGPAdvertisement":    {v1alpha1.GroupName, "v1alpha1", "bgpadvertisements"},
	"BGPPeer":             {v1alpha1.GroupName, "v1alpha1", "bgppeers"},
	"AllocationClaim":     {v1alpha1.GroupName, "v1alpha1", "allocationclaims"},
	"Pod":                 {"", "v1", "pods"},
}

func kindOf(o runtime.Object) string {
	switch o.(type) {
	case *v1alpha1.AddressPool:
		return "AddressPool"
	case *v1alpha1.ExternalNetwork:
		return "ExternalNetwork"
	case *v1alpha1.ElasticIP:
		return "ElasticIP"
	case *v1alpha1.ElasticIPAttachment:
		return "ElasticIPAttachment"
	case *v1alpha1.NetworkInterface:
		return "NetworkInterface"
	case *v1alpha1.ARPAdvertisement:
		return "ARPAdvertisement"
	case *v1alpha1.BGPAdvertisement:
		return "BGPAdvertisement"
	case *v1alpha1.BGPPeer:
		return "BGPPeer"
	case *v1alpha1.AllocationClaim:
		return "AllocationClaim"
	case *corev1.Pod:
		return "Pod"
	}
	return ""
}

// request builds the AdmissionRequest the API server would send: obj is nil for
// DELETE, old is nil for CREATE.
func request(t testing.TB, op admissionv1.Operation, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	subject := obj
	if subject == nil {
		subject = old
	}
	kind := kindOf(subject)
	k := reviewKinds[kind]
	meta := subject.(metav1.Object)
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("uid-" + meta.GetName()),
		Kind:      metav1.GroupVersionKind{Group: k.group, Version: k.version, Kind: kind},
		Resource:  metav1.GroupVersionResource{Group: k.group, Version: k.version, Resource: k.resource},
		Name:      meta.GetName(),
		Namespace: meta.GetNamespace(),
		Operation: op,
	}
	if obj != nil {
		req.Object = runtime.RawExtension{Raw: mustJSON(t, obj)}
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return req
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// review posts a request to the path its kind belongs to and returns the response.
func (f *fixture) review(op admissionv1.Operation, obj, old runtime.Object) *admissionv1.AdmissionResponse {
	f.t.Helper()
	req := request(f.t, op, obj, old)
	path := PathJuneau
	if req.Kind.Kind == "Pod" {
		path = PathPods
	}
	code, review := post(f.t, f.handler.ForPath(path), mustJSON(f.t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: req}))
	if code != http.StatusOK || review.Response == nil {
		f.t.Fatalf("HTTP %d, response %+v", code, review.Response)
	}
	if review.Response.UID != req.UID {
		f.t.Fatalf("response UID %q, want %q", review.Response.UID, req.UID)
	}
	return review.Response
}

// post sends a body to an HTTP handler and decodes the AdmissionReview it answers.
func post(t testing.TB, h http.Handler, body []byte) (int, admissionv1.AdmissionReview) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, PathJuneau, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var review admissionv1.AdmissionReview
	if w.Body.Len() > 0 && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
			t.Fatalf("HTTP %d with a body that is no AdmissionReview: %v\n%s", w.Code, err, w.Body.String())
		}
	}
	return w.Code, review
}

// verdictCase is one expectation: allowed, or denied with an HTTP-style code and a
// message containing every string of want.
type verdictCase struct {
	code int32 // 0: allowed
	want []string
}

func allowed() verdictCase { return verdictCase{} }

func invalid(want ...string) verdictCase {
	return verdictCase{code: http.StatusUnprocessableEntity, want: want}
}

func forbidden(want ...string) verdictCase {
	return verdictCase{code: http.StatusForbidden, want: want}
}

func (c verdictCase) check(t *testing.T, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	if c.code == 0 {
		if !resp.Allowed {
			t.Fatalf("denied, want allowed: %s", resp.Result.Message)
		}
		return
	}
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("allowed, want denied with %d containing %q", c.code, c.want)
	}
	if resp.Result.Code != c.code {
		t.Errorf("code %d, want %d (%s)", resp.Result.Code, c.code, resp.Result.Message)
	}
	for _, w := range c.want {
		if !strings.Contains(resp.Result.Message, w) {
			t.Errorf("message lacks %q:\n%s", w, resp.Result.Message)
		}
	}
}

// Object builders.

const ns = "team"

var deletedAt = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func pool(name string, mode v1alpha1.AdvertiseMode, addrs ...string) *v1alpha1.AddressPool {
	return &v1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.AddressPoolSpec{AdvertiseMode: mode, Addresses: addrs}}
}

func network(name string, typ v1alpha1.AdvertiseMode, pools ...string) *v1alpha1.ExternalNetwork {
	return &v1alpha1.ExternalNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ExternalNetworkSpec{Type: typ, AddressPools: pools}}
}

func eip(name, net, requested string) *v1alpha1.ElasticIP {
	return &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("eip-" + name)},
		Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: net, RequestedIP: requested}}
}

func eip6(name, net, requested string) *v1alpha1.ElasticIP {
	e := eip(name, net, requested)
	e.Spec.IPFamily = v1alpha1.IPv6
	return e
}

func attachment(name, eipName, nicName string) *v1alpha1.ElasticIPAttachment {
	return &v1alpha1.ElasticIPAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ElasticIPAttachmentSpec{
			ElasticIPRef: v1alpha1.ElasticIPReference{Name: eipName},
			TargetRef:    v1alpha1.AttachmentTarget{NetworkInterfaceName: nicName},
		}}
}

func nic(podName, iface, eipName string) *v1alpha1.NetworkInterface {
	return &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.NetworkInterfaceName(podName, iface),
			UID: types.UID("nic-" + podName + "." + iface)},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef:    v1alpha1.PodReference{Name: podName, UID: "pod-" + podName, Interface: iface},
			NodeName:  "node-a",
			ElasticIP: eipName,
		}}
}

func pod(name string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pod-" + name), Annotations: ann},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

func node(name string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func claim(addr, poolName, consumerNS, consumerName, uid string) *v1alpha1.AllocationClaim {
	return &v1alpha1.AllocationClaim{ObjectMeta: metav1.ObjectMeta{Name: iprange.ClaimName(netip.MustParseAddr(addr))},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: poolName, Address: addr,
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: consumerNS, Name: consumerName, UID: uid}}}
}

func arpAd(name, net, addr, nodeName string) *v1alpha1.ARPAdvertisement {
	return &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: net, Address: addr, NodeName: nodeName}}
}

// deleting marks an object as being deleted.
func deleting[T metav1.Object](o T) T {
	o.SetDeletionTimestamp(&deletedAt)
	o.SetFinalizers([]string{"example.com/hold"})
	return o
}

// withLabels sets labels, for metadata-only updates.
func withLabels[T metav1.Object](o T, kv ...string) T {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	o.SetLabels(l)
	return o
}

func withBandwidth(e *v1alpha1.ElasticIP, mbps int32) *v1alpha1.ElasticIP {
	e.Spec.BandwidthMbps = &mbps
	return e
}

// named renames an object.
func named[T metav1.Object](o T, name string) T {
	o.SetName(name)
	return o
}

func onNode(n *v1alpha1.NetworkInterface, nodeName string) *v1alpha1.NetworkInterface {
	n.Spec.NodeName = nodeName
	return n
}

type corev1Pod = corev1.Pod

// podOrNil keeps a nil *Pod a nil runtime.Object.
func podOrNil(p *corev1.Pod) runtime.Object {
	if p == nil {
		return nil
	}
	return p
}
