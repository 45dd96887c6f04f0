package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// servedAd is an advertisement this Node answers for (ARP, NDP) or announces (BGP) after
// a sync, as it was then: what a later sync needs to tell why it stopped.
type servedAd struct {
	Name    string
	Address netip.Addr
	// Owner is the ElasticIP the advertisement was made for, when it says (labels).
	Owner    advertisement.Owner
	HasOwner bool
	// obj is the advertisement, whose owner is read (into Owner) only when it stopped
	// being served: reading it at every sync for every one was a tenth of a sync.
	obj metav1.Object
}

// answeredAd is an advertisement this Node answers for (Desired.answered), with its
// address.
type answeredAd struct {
	ad   *v1alpha1.ARPAdvertisement
	addr netip.Addr
	// network is the advertisement's spec.externalNetwork, interned: read without
	// reading the advertisement (Compute's gratuitous answers).
	network unique.Handle[string]
}

// announcedAds are the BGPAdvertisements whose prefix this Node announces
// (BGPDesired.Announce), sorted by compareServed; never nil.
func announcedAds(in Inputs, d Desired) []servedAd {
	out := make([]servedAd, 0, len(d.BGP.Announce))
	for _, ad := range in.BGPAdvertisements {
		if p, ok := announcedPrefix(in.NodeName, ad); ok && containsPrefix(d.BGP.Announce, p) {
			out = append(out, servedAd{Name: ad.Name, Address: p.Addr(), obj: ad})
		}
	}
	slices.SortFunc(out, compareServed)
	return out
}

// compareServed orders served advertisements as Compute orders Desired.Answering,
// which comparing two of them in one walk (listdiff.Sorted) relies on.
func compareServed(a, b servedAd) int { return byAddressThenName(a.Address, a.Name, b.Address, b.Name) }

// byAddressThenName is the one order of answered and announced advertisements.
func byAddressThenName(a netip.Addr, aName string, b netip.Addr, bName string) int {
	if c := a.Compare(b); c != 0 {
		return c
	}
	return strings.Compare(aName, bName)
}

// adState is an advertisement as this Node's cache holds it now; nil when the cache
// holds none of that name.
type adState struct {
	NodeName string
	Deleting bool
	// Refused says why this Node will not answer for the address (Desired.Refused).
	Refused string
}

// stoppedAd is an advertisement this Node stopped answering for or announcing, and why.
type stoppedAd struct {
	servedAd
	Why string
}

// stoppedServing says why each advertisement of stopped is no longer served
// (whyStopped); lookup finds an advertisement in this Node's cache.
func stoppedServing(in Inputs, d Desired, stopped []servedAd, lookup func(name string) *adState) []stoppedAd {
	out := make([]stoppedAd, 0, len(stopped))
	for _, ad := range stopped {
		if ad.obj != nil {
			ad.Owner, ad.HasOwner = advertisement.OwnerOf(ad.obj)
		}
		out = append(out, stoppedAd{servedAd: ad, Why: whyStopped(in, d, ad, lookup(ad.Name))})
	}
	return out
}

// whyStopped says, for the log, why this Node no longer answers for or announces last's
// address. now is the advertisement in this Node's cache, nil when gone from it. The
// cache holds only this Node's advertisements (field-selected), so one that moved to
// another Node leaves it as a deleted one does: then the ElasticIP it was made for (every
// ElasticIP and every Node's attachments are cached) tells which.
func whyStopped(in Inputs, d Desired, last servedAd, now *adState) string {
	switch {
	case now != nil && now.NodeName != in.NodeName:
		return fmt.Sprintf("its advertisement moved to Node %q", now.NodeName)
	case now != nil && now.Deleting:
		return "its advertisement is being deleted"
	case now != nil && now.Refused != "":
		return now.Refused
	case now != nil:
		return notServedWhy(in, d, last)
	case !last.HasOwner:
		return "its advertisement was deleted or moved to another Node"
	}
	if why := userWhy(in, last.Owner); why != "" {
		return why
	}
	return fmt.Sprintf("its advertisement no longer names this Node while ElasticIP %q is still used here as far as this Node knows: it moved to another Node", last.Owner.Key())
}

// userWhy says why the user of the ElasticIP o, as this Node's caches hold it, no
// longer brings its traffic here: the ElasticIP is gone or unused, or its user is
// gone, elsewhere or not ready. "" when, as far as the caches tell, it still does.
func userWhy(in Inputs, o advertisement.Owner) string {
	key := o.Key()
	eip := elasticIPOf(in.ElasticIPs, key)
	switch {
	case eip == nil || (o.UID != "" && eip.UID != o.UID):
		return fmt.Sprintf("its ElasticIP %q was deleted", key)
	case eip.DeletionTimestamp != nil:
		return fmt.Sprintf("its ElasticIP %q is being deleted", key)
	case eip.Status.Attachment == nil:
		return fmt.Sprintf("its ElasticIP %q is used by nobody now (phase %s)", key, eip.Status.Phase)
	}
	user := eip.Status.Attachment
	if user.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
		a := in.attachment(eip.Namespace, user.Name)
		if a == nil {
			return fmt.Sprintf("its ElasticIPAttachment %q was deleted", eip.Namespace+"/"+user.Name)
		}
		switch {
		case a.DeletionTimestamp != nil:
			return fmt.Sprintf("its ElasticIPAttachment %q is being deleted", eip.Namespace+"/"+user.Name)
		case a.Status.NodeName != "" && a.Status.NodeName != in.NodeName:
			return fmt.Sprintf("its ElasticIP %q moved to Node %q with ElasticIPAttachment %q", key, a.Status.NodeName, user.Name)
		case a.Status.Phase != v1alpha1.AttachmentAttached || !meta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionReady):
			why := fmt.Sprintf("its ElasticIPAttachment %q is %s", eip.Namespace+"/"+user.Name, a.Status.Phase)
			if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason != "" {
				why += " (" + c.Reason + ")"
			}
			return why
		}
		return ""
	}
	i := slices.IndexFunc(in.NICs, func(n *v1alpha1.NetworkInterface) bool {
		return n.Namespace == eip.Namespace && n.Name == user.Name && n.Spec.NodeName == in.NodeName
	})
	if i < 0 {
		return fmt.Sprintf("its ElasticIP %q is used by %s %q, which is not on this Node (any more)", key, user.Kind, user.Name)
	}
	nic := in.NICs[i]
	switch {
	case nic.DeletionTimestamp != nil:
		return fmt.Sprintf("its NetworkInterface %q is being deleted, with its Pod", eip.Namespace+"/"+user.Name)
	case nic.Status.Phase != v1alpha1.NetworkInterfaceReady:
		return fmt.Sprintf("its NetworkInterface %q is %s", eip.Namespace+"/"+user.Name, nic.Status.Phase)
	}
	return ""
}

// notServedWhy says why this Node does not deliver the address of last (it serves an
// address while its NAT mapping or its direct NIC's host route is programmed).
func notServedWhy(in Inputs, d Desired, last servedAd) string {
	addr := last.Address
	// Mappings are sorted by address first: a search, not a walk of 100,000.
	if _, ok := slices.BinarySearchFunc(d.NAT.Mappings, addr, func(m nft.Mapping, a netip.Addr) int { return m.ElasticIP.Compare(a) }); ok {
		if d.NATRejected != nil {
			return "its NAT mapping is left out: " + d.NATRejected.Error()
		}
		return "its NAT mapping is left out"
	}
	if slices.ContainsFunc(d.NAT.Direct, func(n nft.DirectNIC) bool { return n.Address == addr }) {
		return "its direct NetworkInterface's host route is left out"
	}
	if last.HasOwner {
		if why := userWhy(in, last.Owner); why != "" {
			return why
		}
		// Its NetworkInterface is here and Ready, but the CNI plugin's host route to it is
		// gone: the Pod's network was taken down (the Pod is going away).
		if eip := elasticIPOf(in.ElasticIPs, last.Owner.Key()); eip != nil && eip.Status.Attachment != nil &&
			eip.Status.Attachment.Kind == v1alpha1.AttachmentKindNetworkInterface {
			return fmt.Sprintf("no route on this Node leads to its NetworkInterface %q any more: the network of its Pod was taken down",
				eip.Namespace+"/"+eip.Status.Attachment.Name)
		}
	}
	return "traffic to it is not programmed on this Node any more: no Attached ElasticIPAttachment here translates it, and no NetworkInterface here holds it directly"
}

// logAnswering logs, at info level, each advertisement this Node started answering for
// (its Answering condition turned True: conditionTrue, or it came back since the last
// sync) and each it stopped answering for, with why. The first sync of the lock holder
// (or the first after a sync that did not log its answers: !logged) logs only the
// conditions it turned True, and one line with how many it answers for: the rest it
// answered for before (or its predecessor did). d tells where its answered list
// differs from the last Compute's (answeredSince, answeredGone).
func (a *Agent) logAnswering(ctx context.Context, in Inputs, d Desired, logged bool, conditionTrue []string) {
	logger := klog.FromContext(ctx)
	cur := d.answered
	a.answeringAds = cur
	started := conditionTrue
	var stopped []servedAd
	if !logged {
		logger.Info("Answering for the advertisements of this Node", "arp", len(d.ARP), "ndp", len(d.NDP))
	} else {
		// Only where the two lists differ (the rest is the same advertisements at the
		// same addresses): comparing 100,000 by address and name took a sixth of a sync.
		// An advertisement whose address changed is in both.
		since := d.answeredSince
		gone, back := listdiff.Sorted(d.answeredGone, cur[since.Start:since.NewEnd], byAnsweredAd)
		started = slices.Clone(started)
		for _, x := range back {
			started = append(started, x.ad.Name)
		}
		slices.Sort(started)
		started = slices.Compact(started)
		for _, x := range gone {
			stopped = append(stopped, servedAd{Name: x.ad.Name, Address: x.addr, obj: x.ad})
		}
	}
	for _, name := range started {
		addr, ok := a.answeredAddress(in, name, cur)
		switch {
		case !ok:
		case addr.Is4():
			logger.Info("Answering ARP", "advertisement", klog.KRef("", name), "address", addr)
		default:
			logger.Info("Answering NDP", "advertisement", klog.KRef("", name), "address", addr)
		}
	}
	lookup := func(name string) *adState {
		ad := a.advertisement(in, name)
		if ad == nil {
			return nil
		}
		return &adState{NodeName: ad.Spec.NodeName, Deleting: ad.DeletionTimestamp != nil, Refused: d.Refused[name]}
	}
	for _, s := range stoppedServing(in, d, stopped, lookup) {
		if s.Address.Is4() {
			logger.Info("Stopped answering ARP", "advertisement", klog.KRef("", s.Name), "address", s.Address, "reason", s.Why)
		} else {
			logger.Info("Stopped answering NDP", "advertisement", klog.KRef("", s.Name), "address", s.Address, "reason", s.Why)
		}
	}
}

// answeredAddress is the address of the advertisement name among cur, the answered ones
// (found through the cache: a map of all of them at every sync that started answering
// for one took a tenth of it at 100,000).
func (a *Agent) answeredAddress(in Inputs, name string, cur []answeredAd) (netip.Addr, bool) {
	ad := a.advertisement(in, name)
	if ad == nil {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(ad.Spec.Address)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = addr.Unmap()
	_, ok := slices.BinarySearchFunc(cur, addr, func(x answeredAd, addr netip.Addr) int {
		if c := x.addr.Compare(addr); c != 0 {
			return c
		}
		return strings.Compare(x.ad.Name, name)
	})
	return addr, ok
}

// advertisement is this Node's ARPAdvertisement name from the cache (from in when the
// agent has no lister: tests), nil when there is none.
func (a *Agent) advertisement(in Inputs, name string) *v1alpha1.ARPAdvertisement {
	if a.listers.Advertisements != nil {
		ad, err := a.listers.Advertisements.Get(name)
		if err != nil {
			return nil
		}
		return ad
	}
	for _, ad := range in.Advertisements {
		if ad.Name == name {
			return ad
		}
	}
	return nil
}

// logAnnouncing logs, at info level, each BGPAdvertisement whose address this Node no
// longer announces (it withdraws the route from its peers), with why. Announcements are
// logged when their Announced condition turns True (markAnnounced).
func (a *Agent) logAnnouncing(ctx context.Context, in Inputs, d Desired) {
	cur := announcedAds(in, d)
	prev := a.announcingAds
	a.announcingAds = cur
	lookup := func(name string) *adState {
		for _, ad := range in.BGPAdvertisements {
			if ad.Name == name {
				return &adState{NodeName: ad.Spec.NodeName, Deleting: ad.DeletionTimestamp != nil}
			}
		}
		return nil
	}
	var stopped []servedAd
	if prev != nil {
		stopped, _ = listdiff.Sorted(prev, cur, compareServed)
	}
	for _, s := range stoppedServing(in, d, stopped, lookup) {
		klog.FromContext(ctx).Info("Withdrawing BGP announcement", "advertisement", klog.KRef("", s.Name),
			"prefix", netip.PrefixFrom(s.Address, s.Address.BitLen()), "reason", s.Why)
	}
}

// Serving reports how many advertisements the agent answered for (ARP and NDP) and
// announced (BGP) at its last sync; for its last words when it stops. Call it only once
// Run has returned.
func (a *Agent) Serving() (answering, announcing int) {
	return len(a.answeringAds), len(a.announcingAds)
}
