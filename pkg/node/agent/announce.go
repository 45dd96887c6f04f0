package agent

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
	"github.com/loutres/juneau/pkg/status"
)

// BGP is the node's BGP speaker (bgp.Speaker).
type BGP interface {
	SetPeers(peers []bgp.Peer)
	SetAnnouncements(prefixes []netip.Prefix, with map[netip.Prefix]bgp.PathAttributes) error
	Status() bgp.Status
	Changed() <-chan struct{}
	// NextHop6 is the next hop of IPv6 announcements; invalid: none, so the Node
	// announces no IPv6 address.
	NextHop6() netip.Addr
}

var _ BGP = (*bgp.Speaker)(nil)

// UseBGP gives the agent its BGP speaker and the reader of its passwords (nil: no
// Secret can be read); call it before Run. Without it, the agent announces nothing and
// says so on the BGPAdvertisements of its Node.
func (a *Agent) UseBGP(speaker BGP, passwords *Passwords) {
	a.speaker, a.passwords = speaker, passwords
}

// applyBGP hands the speaker its peers and announcements and writes what it reports:
// the Node's BGPNodeStatus and the Announced condition of its BGPAdvertisements.
//
// The speaker is told its first set of peers (which it tells that it restarted, for
// graceful restart) only once every cache it is computed from has synced, the password
// Secrets included: a peer missing from the first set would lose this Node's routes.
func (a *Agent) applyBGP(ctx context.Context, in Inputs, d Desired) (bgp.Status, error) {
	if a.speaker == nil {
		return bgp.Status{}, a.markAnnounced(ctx, in, d, bgp.Status{})
	}
	if a.passwords != nil {
		a.passwords.Want(d.BGP.Secrets)
	}
	if !a.bgpStarted {
		if len(d.BGP.Pending) > 0 {
			klog.FromContext(ctx).V(2).Info("Waiting for the password Secrets of BGPPeers before starting BGP", "peers", d.BGP.Pending)
			return bgp.Status{}, nil
		}
		a.bgpStarted = true
		klog.FromContext(ctx).Info("Starting BGP", "peers", len(d.BGP.Peers), "announcements", len(d.BGP.Announce))
	}
	if len(d.BGP.NoIPv6NextHop) > 0 && !a.toldNoNextHop6 {
		// Once: the Announced conditions of those advertisements say it at every sync.
		a.toldNoNextHop6 = true
		klog.FromContext(ctx).Info("This Node has IPv6 addresses to announce but no IPv6 next hop", "prefixes", d.BGP.NoIPv6NextHop,
			"fix", "give its external interface a global IPv6 address and restart the agent, or set --bgp-ipv6-next-hop")
	}
	a.speaker.SetPeers(d.BGP.Peers)
	if err := a.speaker.SetAnnouncements(d.BGP.Announce, d.BGP.Attributes); err != nil {
		return bgp.Status{}, err
	}
	st := a.speaker.Status()
	a.metrics.observeBGP(st)
	if err := a.writeNodeStatus(ctx, in, st); err != nil {
		return st, err
	}
	return st, a.markAnnounced(ctx, in, d, st)
}

// writeNodeStatus applies the Node's BGPNodeStatus when it changed: one object named
// after the Node, owned by it (deleted with it), written once a BGPPeer selects the Node
// and kept up to date from then on.
func (a *Agent) writeNodeStatus(ctx context.Context, in Inputs, st bgp.Status) error {
	want := nodeState(st)
	if a.nodeStatus == nil {
		if want.PeersConfigured == 0 {
			// Nothing to show, unless an earlier run wrote sessions that are gone.
			cur, err := a.client.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				a.nodeStatus = &want
				return nil
			case err != nil:
				return fmt.Errorf("reading BGPNodeStatus %q: %w", a.cfg.NodeName, err)
			}
			a.nodeStatus = &cur.Status
		}
	}
	if a.nodeStatus != nil && equality.Semantic.DeepEqual(*a.nodeStatus, want) {
		return nil
	}
	node := in.thisNode()
	if node == nil {
		return nil // the owner reference needs the Node's UID; the Node's event brings us back
	}
	peers := make([]*applyv1alpha1.BGPSessionStatusApplyConfiguration, 0, len(want.Peers))
	for _, p := range want.Peers {
		session := applyv1alpha1.BGPSessionStatus().WithName(p.Name).WithPeerAddress(p.PeerAddress).WithState(p.State).
			WithSince(p.Since).WithPrefixesAnnounced(p.PrefixesAnnounced)
		if p.StateMessage != "" {
			session.WithStateMessage(p.StateMessage)
		}
		if p.StateBFD != "" {
			session.WithStateBFD(p.StateBFD)
		}
		peers = append(peers, session)
	}
	obj := applyv1alpha1.BGPNodeStatus(a.cfg.NodeName).
		WithOwnerReferences(applymetav1.OwnerReference().WithAPIVersion("v1").WithKind("Node").WithName(node.Name).WithUID(node.UID)).
		WithStatus(applyv1alpha1.BGPNodeState().WithPeersConfigured(want.PeersConfigured).WithPeersEstablished(want.PeersEstablished).
			WithPeers(peers...))
	asked := a.cfg.Clock.Now()
	_, err := a.client.JuneauV1alpha1().BGPNodeStatuses().Apply(ctx, obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerNode, Force: true})
	a.waitedSince(asked)
	if err != nil {
		return fmt.Errorf("writing BGPNodeStatus %q: %w", a.cfg.NodeName, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated BGPNodeStatus", "configured", want.PeersConfigured, "established", want.PeersEstablished)
	a.nodeStatus = &want
	return nil
}

// markAnnounced writes the Announced condition of every BGPAdvertisement of this Node
// whose condition changes, with server-side apply so the agent owns only that condition.
func (a *Agent) markAnnounced(ctx context.Context, in Inputs, d Desired, st bgp.Status) error {
	w := status.BGPAdvertisements(a.client, v1alpha1.FieldManagerNode, nil)
	w.Wrote = a.wrote
	for _, ad := range in.BGPAdvertisements {
		prefix, ok := announcedPrefix(in.NodeName, ad)
		if !ok {
			continue
		}
		var want metav1.Condition
		if a.speaker == nil {
			want = metav1.Condition{Type: v1alpha1.ConditionAnnounced, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoPeer,
				Message:            fmt.Sprintf("the node agent of Node %q runs no BGP speaker (it has no IPv4 InternalIP for a router ID; see its --bgp-router-id flag)", in.NodeName),
				ObservedGeneration: ad.Generation}
		} else {
			want = announcedCondition(in.NodeName, ad, containsPrefix(d.BGP.Announce, prefix), in.IPv6NextHop, st)
		}
		cur, changed := status.One(ad.Status.Conditions, want, metav1.NewTime(a.cfg.Clock.Now()))
		if !changed {
			continue
		}
		apply := applyv1alpha1.BGPAdvertisement(ad.Name).WithStatus(applyv1alpha1.BGPAdvertisementStatus().WithConditions(status.Apply(cur)))
		asked := a.cfg.Clock.Now()
		written, err := w.Write(ctx, ad, apply, ad.Status.Conditions, []metav1.Condition{cur}, "announced", cur.Status)
		a.waitedSince(asked)
		if err != nil {
			return err
		}
		if !written {
			continue // deleted since the cache saw it; its deletion reaches the cache next
		}
		have := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnnounced)
		wasTrue := have != nil && have.Status == metav1.ConditionTrue && have.ObservedGeneration == ad.Generation
		switch {
		case cur.Status == metav1.ConditionTrue && !wasTrue:
			klog.FromContext(ctx).Info("Announced", "advertisement", klog.KObj(ad), "prefix", prefix)
		case cur.Status != metav1.ConditionTrue && wasTrue && containsPrefix(d.BGP.Announce, prefix):
			// Still this Node's to announce, but no router hears it now (withdrawals
			// of the route itself are logged by logAnnouncing).
			klog.FromContext(ctx).Info("Not announced to any BGP peer any more", "advertisement", klog.KObj(ad), "prefix", prefix,
				"reason", cur.Reason, "message", cur.Message)
		default:
			klog.FromContext(ctx).V(2).Info("Set Announced", "advertisement", klog.KObj(ad), "prefix", prefix, "status", cur.Status, "reason", cur.Reason)
		}
	}
	return nil
}

func containsPrefix(list []netip.Prefix, p netip.Prefix) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}
