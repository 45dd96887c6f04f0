package agent

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
)

// The CNI plugin's question, answered by UID: a NIC holds its ElasticIP only when it is
// this Pod's, names the ElasticIP the annotations name, is Ready, and the ElasticIP
// names that very NIC as its holder.
func TestDirectInterfacesHolderByUID(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web",
		Annotations: map[string]string{v1alpha1.AnnotationElasticIP: "web-eip"}}}
	nic := func(uid, podUID types.UID, eip string) *v1alpha1.NetworkInterface {
		return &v1alpha1.NetworkInterface{
			ObjectMeta: metav1.ObjectMeta{Name: "web.eth0", Namespace: "default", UID: uid},
			Spec:       v1alpha1.NetworkInterfaceSpec{PodRef: v1alpha1.PodReference{Name: "web", UID: string(podUID), Interface: "eth0"}, ElasticIP: eip},
			Status:     v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfaceReady, Address: "10.225.51.6/32"},
		}
	}
	eip := func(holder types.UID) *v1alpha1.ElasticIP {
		return &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: "web-eip", Namespace: "default"},
			Status: v1alpha1.ElasticIPStatus{Address: "10.225.51.6",
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0", UID: holder}}}
	}
	for _, tc := range []struct {
		name    string
		nic     *v1alpha1.NetworkInterface
		eip     *v1alpha1.ElasticIP
		holds   bool
		waiting string
	}{
		{"held", nic("uid-nic", "uid-web", "web-eip"), eip("uid-nic"), true, ""},
		{"the ElasticIP names another NIC of that name", nic("uid-nic", "uid-web", "web-eip"), eip("uid-earlier"), false,
			`ElasticIP "web-eip" does not name NetworkInterface "web.eth0" (UID "uid-nic") as its holder yet`},
		{"the NIC of an earlier Pod of the same name", nic("uid-nic", "uid-earlier-pod", "web-eip"), eip("uid-nic"), false,
			`NetworkInterface "web.eth0" is not created yet`},
		{"the NIC names another ElasticIP than the annotations", nic("uid-nic", "uid-web", "other-eip"), eip("uid-nic"), false,
			`names ElasticIP "other-eip", not "web-eip"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			nics := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			eips := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, add := range []error{pods.Add(pod), nics.Add(tc.nic), eips.Add(tc.eip)} {
				if add != nil {
					t.Fatal(add)
				}
			}
			s := &DirectSource{Pods: corelisters.NewPodLister(pods), NICs: listers.NewNetworkInterfaceLister(nics),
				ElasticIPs: listers.NewElasticIPLister(eips)}
			got, err := s.DirectInterfaces("default", "web", "uid-web")
			if err != nil || len(got) != 1 {
				t.Fatalf("DirectInterfaces = %+v, %v", got, err)
			}
			if got[0].Holds != tc.holds || !strings.Contains(got[0].Waiting, tc.waiting) {
				t.Errorf("holds=%v waiting=%q, want holds=%v waiting containing %q", got[0].Holds, got[0].Waiting, tc.holds, tc.waiting)
			}
		})
	}
}

// The sources a direct NIC may send from: its ElasticIP; for eth0 also the Pod's address
// of the other family, which the CNI plugin leaves on it (a dual-stack Pod with an IPv4
// ElasticIP keeps its IPv6 Pod IP); an extra NIC has its ElasticIP alone.
func TestDirectNICsAllowBothFamiliesOfEth0(t *testing.T) {
	nic := func(iface, eip, addr string) *v1alpha1.NetworkInterface {
		return &v1alpha1.NetworkInterface{
			ObjectMeta: metav1.ObjectMeta{Name: "web." + iface, Namespace: "default"},
			Spec: v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", ElasticIP: eip,
				PodRef: v1alpha1.PodReference{Name: "web", UID: "uid-web", Interface: iface}},
			Status: v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfaceReady, Address: addr},
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00:244:1::5"}}}}
	in := Inputs{NodeName: "node-a", Pods: []*corev1.Pod{pod},
		NICs: []*v1alpha1.NetworkInterface{nic("eth0", "web-eip", "10.225.51.6/32"), nic("ext0", "gw-eip", "10.225.51.7/32")},
		HostInterface: func(a netip.Addr) (string, bool) {
			if a == netip.MustParseAddr("10.225.51.7") {
				return "jnext0", true
			}
			return "veth-web", true
		}}
	var got []string
	for _, d := range directNICs(in) {
		got = append(got, d.HostInterface+" "+d.Address.String())
	}
	want := []string{"veth-web 10.225.51.6", "jnext0 10.225.51.7", "veth-web fd00:244:1::5"}
	if !slices.Equal(got, want) {
		t.Errorf("allowed sources %q, want %q", got, want)
	}
}
