package agent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
	"github.com/loutres/juneau/pkg/node/nft"
)

// whyStopped tells every way an answered address can stop being answered apart, from
// the caches alone.
func TestWhyStopped(t *testing.T) {
	owner := advertisement.Owner{Namespace: "default", Name: "web-eip", UID: "uid-1"}
	last := servedAd{Name: "eip-default-web-eip", Address: netip.MustParseAddr("10.225.51.6"), Owner: owner, HasOwner: true}
	eip := func(mutate func(*v1alpha1.ElasticIP)) ElasticIPMap {
		e := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-eip", UID: "uid-1"},
			Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached,
				Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "web-attach"}}}
		if mutate != nil {
			mutate(e)
		}
		return ElasticIPMap{"default/web-eip": e}
	}
	moved := attachment("web-attach", "node-b", "10.225.51.6", "10.244.2.6", v1alpha1.AttachmentAttached, true)
	mapping := nft.Mapping{ElasticIP: netip.MustParseAddr("10.225.51.6"), PodIP: netip.MustParseAddr("10.244.1.6")}
	for _, tc := range []struct {
		name string
		in   Inputs
		d    Desired
		last servedAd
		now  *adState
		want string
	}{
		{"advertisement still cached, on another Node", Inputs{}, Desired{}, last, &adState{NodeName: "node-b"},
			`its advertisement moved to Node "node-b"`},
		{"advertisement being deleted", Inputs{}, Desired{}, last, &adState{NodeName: "node-a", Deleting: true},
			"its advertisement is being deleted"},
		{"refused", Inputs{}, Desired{}, last, &adState{NodeName: "node-a", Refused: "10.225.51.255 is the broadcast address"},
			"10.225.51.255 is the broadcast address"},
		{"mapping left out", Inputs{}, Desired{NAT: nft.DesiredState{Mappings: []nft.Mapping{mapping}}, NATRejected: errors.New("10.225.51.6 is attached to two Pods")},
			last, &adState{NodeName: "node-a"}, "its NAT mapping is left out: 10.225.51.6 is attached to two Pods"},
		{"nothing delivers it", Inputs{}, Desired{}, servedAd{Name: "x", Address: last.Address}, &adState{NodeName: "node-a"},
			"traffic to it is not programmed on this Node any more"},
		{"still named here, ElasticIP deleted", Inputs{}, Desired{}, last, &adState{NodeName: "node-a"},
			`its ElasticIP "default/web-eip" was deleted`},
		{"still named here, attachment Pending", Inputs{ElasticIPs: eip(nil), Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("web-attach", "node-a", "10.225.51.6", "", v1alpha1.AttachmentPending, false)}}, Desired{}, last, &adState{NodeName: "node-a"},
			`its ElasticIPAttachment "default/web-attach" is Pending`},
		{"still named here, attachment deleted", Inputs{ElasticIPs: eip(nil)}, Desired{}, last, &adState{NodeName: "node-a"},
			`its ElasticIPAttachment "default/web-attach" was deleted`},
		{"still named here, NIC Ready without its route", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) {
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0"}
		}), NICs: []*v1alpha1.NetworkInterface{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.eth0"},
			Spec: v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", ElasticIP: "web-eip"}, Status: v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfaceReady}}}},
			Desired{}, last, &adState{NodeName: "node-a"}, `no route on this Node leads to its NetworkInterface "default/web.eth0" any more`},
		{"still named here, NIC being deleted", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) {
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0"}
		}), NICs: []*v1alpha1.NetworkInterface{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.eth0", DeletionTimestamp: &metav1.Time{}},
			Spec: v1alpha1.NetworkInterfaceSpec{NodeName: "node-a", ElasticIP: "web-eip"}, Status: v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfaceReady}}}},
			Desired{}, last, &adState{NodeName: "node-a"}, `its NetworkInterface "default/web.eth0" is being deleted`},
		{"gone, ElasticIP deleted", Inputs{}, Desired{}, last, nil, `its ElasticIP "default/web-eip" was deleted`},
		{"gone, ElasticIP re-created", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) { e.UID = "uid-2" })}, Desired{}, last, nil,
			`its ElasticIP "default/web-eip" was deleted`},
		{"gone, ElasticIP deleting", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) { e.DeletionTimestamp = &metav1.Time{} })}, Desired{}, last, nil,
			`its ElasticIP "default/web-eip" is being deleted`},
		{"gone, ElasticIP unused", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) {
			e.Status.Attachment, e.Status.Phase = nil, v1alpha1.ElasticIPAvailable
		})}, Desired{}, last, nil, `its ElasticIP "default/web-eip" is used by nobody now (phase Available)`},
		{"gone, attachment on another Node", Inputs{ElasticIPs: eip(nil), Attachments: []*v1alpha1.ElasticIPAttachment{moved}}, Desired{}, last, nil,
			`its ElasticIP "default/web-eip" moved to Node "node-b" with ElasticIPAttachment "web-attach"`},
		{"gone, NIC not on this Node", Inputs{ElasticIPs: eip(func(e *v1alpha1.ElasticIP) {
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0"}
		})}, Desired{}, last, nil, `its ElasticIP "default/web-eip" is used by NetworkInterface "web.eth0", which is not on this Node`},
		{"gone, no owner recorded", Inputs{}, Desired{}, servedAd{Name: "x", Address: last.Address}, nil,
			"its advertisement was deleted or moved to another Node"},
		{"gone, ElasticIP still used here as far as the cache knows", Inputs{ElasticIPs: eip(nil), Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("web-attach", "node-a", "10.225.51.6", "10.244.1.6", v1alpha1.AttachmentAttached, true)}}, Desired{}, last, nil,
			`its advertisement no longer names this Node while ElasticIP "default/web-eip" is still used here as far as this Node knows: it moved to another Node`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.NodeName = "node-a"
			if got := whyStopped(tc.in, tc.d, tc.last, tc.now); !strings.Contains(got, tc.want) {
				t.Errorf("whyStopped = %q, want %q", got, tc.want)
			}
		})
	}
}

// The agent logs, at info level, when it starts and stops answering for an address, with
// why it stopped, once per change: not at every sync; its first sync logs how many it
// answers for, not each.
func TestAnsweringTransitionsLogged(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ad := func(name, addr, eipName string) *v1alpha1.ARPAdvertisement {
		o := advertisement.Owner{Namespace: "default", Name: eipName, UID: types.UID("uid-" + eipName)}
		return &v1alpha1.ARPAdvertisement{ObjectMeta: advertisement.Meta(name, o),
			Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: addr, NodeName: "node-a"}}
	}
	a5, a6 := ad("eip-default-a", "10.225.51.5", "a"), ad("eip-default-b", "10.225.51.6", "b")
	client := fake.NewClientset(a5, a6)
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0"}, Clients{Juneau: client}, Listers{}, nil, fakeARP{}, nil, nil, nil)
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", Advertisements: []*v1alpha1.ARPAdvertisement{a5, a6},
		Attachments: []*v1alpha1.ElasticIPAttachment{
			attachment("a", "node-a", "10.225.51.5", "10.244.1.5", v1alpha1.AttachmentAttached, true),
			attachment("b", "node-a", "10.225.51.6", "10.244.1.6", v1alpha1.AttachmentAttached, true),
		},
		ElasticIPs: ElasticIPMap{},
	}
	step := func(conditionTrue ...string) string {
		t.Helper()
		before := len(logs.String())
		d := a.compute(in)
		a.logAnswering(ctx, in, d, a.answersLogged, conditionTrue)
		a.answersLogged = true
		return logs.String()[before:]
	}
	// First sync: a summary, and the condition it turned True.
	out := step("eip-default-a")
	if !strings.Contains(out, "Answering for the advertisements of this Node") || !strings.Contains(out, `"arp"=2`) && !strings.Contains(out, "arp=2") ||
		strings.Count(out, "Answering ARP") != 1 || !strings.Contains(out, `eip-default-a`) {
		t.Errorf("first sync logged:\n%s\nwant the summary and eip-default-a", out)
	}
	if out := step(); out != "" {
		t.Errorf("a sync that changes nothing logged:\n%s", out)
	}
	// b's Pod went away (its attachment is gone) and its ElasticIP too.
	in.Attachments = in.Attachments[:1]
	in.Advertisements = []*v1alpha1.ARPAdvertisement{a5}
	out = step()
	if !strings.Contains(out, "Stopped answering ARP") || !strings.Contains(out, "eip-default-b") ||
		!strings.Contains(out, `its ElasticIP \"default/b\" was deleted`) && !strings.Contains(out, `its ElasticIP "default/b" was deleted`) {
		t.Errorf("stopping logged:\n%s\nwant Stopped answering ARP for eip-default-b, its ElasticIP deleted", out)
	}
	if out := step(); out != "" {
		t.Errorf("the next sync logged again:\n%s", out)
	}
	// b back: logged as answered again, even though its condition did not change.
	in.Attachments = append(in.Attachments, attachment("b", "node-a", "10.225.51.6", "10.244.1.6", v1alpha1.AttachmentAttached, true))
	in.Advertisements = []*v1alpha1.ARPAdvertisement{a5, a6}
	if out := step(); strings.Count(out, "Answering ARP") != 1 || !strings.Contains(out, "eip-default-b") {
		t.Errorf("answering again logged:\n%s", out)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(line, "E") {
			t.Errorf("an error-level line: %s", line)
		}
	}
	if n, _ := a.Serving(); n != 2 {
		t.Errorf("Serving: answering %d, want 2", n)
	}
}

// Withdrawals are logged with why, once.
func TestWithdrawalLogged(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	ad := bgpAd("eip-a", "10.225.53.5", "node-a")
	a := New(Config{NodeName: "node-a"}, Clients{}, Listers{}, nil, fakeARP{}, nil, nil, nil)
	in := Inputs{NodeName: "node-a", ExternalInterface: "ext0", BGPAdvertisements: []*v1alpha1.BGPAdvertisement{ad},
		Attachments: []*v1alpha1.ElasticIPAttachment{attachment("a", "node-a", "10.225.53.5", "10.244.1.5", v1alpha1.AttachmentAttached, true)}}
	a.logAnnouncing(ctx, in, Compute(in))
	if n := len(a.announcingAds); n != 1 {
		t.Fatalf("announcing %d advertisements, want 1", n)
	}
	moved := ad.DeepCopy()
	moved.Spec.NodeName = "node-b"
	in.BGPAdvertisements = []*v1alpha1.BGPAdvertisement{moved}
	a.logAnnouncing(ctx, in, Compute(in))
	a.logAnnouncing(ctx, in, Compute(in))
	out := logs.String()
	if strings.Count(out, "Withdrawing BGP announcement") != 1 || !strings.Contains(out, "10.225.53.5/32") || !strings.Contains(out, "moved to Node") {
		t.Errorf("logged:\n%s\nwant one withdrawal of 10.225.53.5/32, moved to node-b", out)
	}
}

// An advertisement deleted after the cache saw it (the API says NotFound) is no reason
// to fail the sync: its deletion reaches the cache next.
func TestMarkAnsweringSkipsDeletedAdvertisement(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	gone := &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "eip-default-gone", Generation: 1},
		Spec: v1alpha1.ARPAdvertisementSpec{ExternalNetwork: "ext-net", Address: "10.225.51.5", NodeName: "node-a"}}
	here := gone.DeepCopy()
	here.Name = "eip-default-here"
	client := fake.NewClientset(here)
	// The API server's answer for an object that is gone (the fake would create it).
	client.PrependReactor("patch", "arpadvertisements", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.PatchAction).GetName() == gone.Name {
			return true, nil, apierrors.NewNotFound(v1alpha1.Resource("arpadvertisements"), gone.Name)
		}
		return false, nil, nil
	})
	a := New(Config{NodeName: "node-a", ExternalInterface: "ext0"}, Clients{Juneau: client}, Listers{}, nil, fakeARP{}, nil, nil, nil)
	in := Inputs{NodeName: "node-a", Advertisements: []*v1alpha1.ARPAdvertisement{gone, here}}
	addr := netip.MustParseAddr(gone.Spec.Address)
	started, err := a.markAnswering(ctx, in, []answeredAd{{ad: gone, addr: addr}, {ad: here, addr: addr}}, nil)
	if err != nil {
		t.Fatalf("markAnswering: %v", err)
	}
	if len(started) != 1 || started[0] != here.Name {
		t.Errorf("started %v, want only %s", started, here.Name)
	}
}
