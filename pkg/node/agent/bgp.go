package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/bgp"
)

// ErrPasswordPending is what Inputs.Password returns while the Secret holding a
// password is still being read (its cache has not synced yet).
var ErrPasswordPending = errors.New("the password Secret is still being read")

// BGPDesired is what this Node's BGP speaker should do (docs/bgp.md).
type BGPDesired struct {
	// Peers are the BGPPeers that select this Node, sorted by name. A peer whose
	// password cannot be read, or that is invalid, carries the reason
	// (bgp.Peer.Problem): the speaker reports it Failed and keeps no session with it.
	Peers []bgp.Peer
	// Pending names the BGPPeers left out of Peers because their password is still
	// being read (ErrPasswordPending), sorted.
	Pending []string
	// Secrets are the Secrets the passwords of those BGPPeers are in, sorted.
	Secrets []types.NamespacedName
	// Announce are the /32s and /128s this Node announces, sorted: those of the BGPAdvertisements
	// naming it whose address it serves (the NAT mapping or the direct NIC's route is
	// in place, as for ARP), IPv6 ones only while the speaker has an IPv6 next hop.
	Announce []netip.Prefix
	// Attributes are those of each prefix of Announce: its BGPAdvertisement's
	// spec.communities (docs/bgp.md#communities) and the MED of its creation and
	// generation (bgp.MEDOf).
	Attributes map[netip.Prefix]bgp.PathAttributes
	// NoIPv6NextHop are the /128s of the BGPAdvertisements naming this Node, served or
	// not, while the speaker has no IPv6 next hop (Inputs.IPv6NextHop), sorted: the
	// Node would have to announce them and cannot. Empty when it needs no next hop.
	NoIPv6NextHop []netip.Prefix
}

// computeBGP decides the speaker's peers and announcements; served reports the
// addresses this Node delivers.
func computeBGP(in Inputs, served func(netip.Addr) bool) BGPDesired {
	var d BGPDesired
	nodeLabels, known := in.nodeLabels()
	for _, p := range in.BGPPeers {
		if !known || p.DeletionTimestamp != nil {
			continue
		}
		selected, err := bgp.Selects(p, nodeLabels)
		if err != nil {
			d.Peers = append(d.Peers, unusablePeer(p, err.Error()))
			continue
		}
		if !selected {
			continue
		}
		var password string
		if ref := p.Spec.PasswordSecretRef; ref != nil {
			secret := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
			if !slices.Contains(d.Secrets, secret) {
				d.Secrets = append(d.Secrets, secret)
			}
			if in.Password == nil {
				d.Peers = append(d.Peers, unusablePeer(p, "this node agent reads no Secrets, so it cannot set the TCP-MD5 password"))
				continue
			}
			password, err = in.Password(*ref)
			switch {
			case errors.Is(err, ErrPasswordPending):
				d.Pending = append(d.Pending, p.Name)
				continue
			case err != nil:
				d.Peers = append(d.Peers, unusablePeer(p, "cannot read the TCP-MD5 password (spec.passwordSecretRef): "+err.Error()))
				continue
			}
		}
		peer, err := bgp.PeerFor(p, password)
		if err != nil {
			d.Peers = append(d.Peers, unusablePeer(p, err.Error()))
			continue
		}
		d.Peers = append(d.Peers, peer)
	}
	slices.SortFunc(d.Peers, func(a, b bgp.Peer) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(d.Pending)
	slices.SortFunc(d.Secrets, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, ad := range in.BGPAdvertisements {
		p, ok := announcedPrefix(in.NodeName, ad)
		switch {
		case !ok:
		case p.Addr().Is6() && !in.IPv6NextHop:
			d.NoIPv6NextHop = append(d.NoIPv6NextHop, p)
		case served(p.Addr()):
			d.Announce = append(d.Announce, p)
			if d.Attributes == nil {
				d.Attributes = map[netip.Prefix]bgp.PathAttributes{}
			}
			d.Attributes[p] = bgp.PathAttributes{Communities: ad.Spec.Communities, MED: bgp.MEDOf(ad.CreationTimestamp.Time, ad.Generation)}
		}
	}
	for _, l := range []*[]netip.Prefix{&d.Announce, &d.NoIPv6NextHop} {
		slices.SortFunc(*l, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		*l = slices.Compact(*l)
	}
	return d
}

// announcedPrefix is the host prefix of a BGPAdvertisement naming node: a /32 for an
// IPv4 address, a /128 for an IPv6 one.
func announcedPrefix(node string, ad *v1alpha1.BGPAdvertisement) (netip.Prefix, bool) {
	if ad.Spec.NodeName != node || ad.DeletionTimestamp != nil {
		return netip.Prefix{}, false
	}
	addr, err := netip.ParseAddr(ad.Spec.Address)
	if err != nil || addr.Is4In6() || addr.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, addr.BitLen()), true
}

// unusablePeer is the status-only Peer of a BGPPeer the speaker cannot configure.
func unusablePeer(p *v1alpha1.BGPPeer, problem string) bgp.Peer {
	addr, _ := netip.ParseAddr(p.Spec.PeerAddress)
	return bgp.Peer{Name: p.Name, Address: addr, Problem: problem}
}

// nodeLabels are this Node's labels; known is false while the Node is not in the cache
// (then no BGPPeer selects it).
func (in Inputs) nodeLabels() (map[string]string, bool) {
	for _, n := range in.Nodes {
		if n.Name == in.NodeName {
			return n.Labels, true
		}
	}
	return nil, false
}

// thisNode is this Node's object, nil when not cached.
func (in Inputs) thisNode() *corev1.Node {
	for _, n := range in.Nodes {
		if n.Name == in.NodeName {
			return n
		}
	}
	return nil
}

// announcedCondition is the Announced condition of one of this Node's
// BGPAdvertisements: True once its /32 or /128 goes out in at least one Established
// session that takes its family. nextHop6 tells whether the speaker has an IPv6 next
// hop: without one, a /128 is never announced, whatever else holds, which the
// condition says first.
func announcedCondition(node string, ad *v1alpha1.BGPAdvertisement, served, nextHop6 bool, st bgp.Status) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionAnnounced, Status: metav1.ConditionFalse, ObservedGeneration: ad.Generation}
	prefix, _ := announcedPrefix(node, ad)
	established := st.Established()
	switch n := st.AnnouncedTo(prefix); {
	case prefix.Addr().Is6() && !nextHop6:
		c.Reason = v1alpha1.ReasonNoIPv6NextHop
		c.Message = fmt.Sprintf("not announced: the node agent of Node %q has no IPv6 next hop for %s (no global IPv6 address on its external interface when it started); "+
			"give the interface one and restart the agent, or set its --bgp-ipv6-next-hop flag", node, prefix)
	case !served:
		c.Reason = v1alpha1.ReasonNotProgrammed
		c.Message = fmt.Sprintf("not announced: traffic to %s is not programmed on Node %q yet", ad.Spec.Address, node)
	case n > 0:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonAnnounced
		c.Message = fmt.Sprintf("%s announced by Node %q to %d of its %d %s", prefix, node, n, len(st.Peers), messages.Plural(len(st.Peers), "BGP peer"))
	case len(st.Peers) == 0:
		c.Reason = v1alpha1.ReasonNoPeer
		c.Message = fmt.Sprintf("no BGPPeer selects Node %q, so no router hears %s", node, prefix)
	case established == 0:
		c.Reason = v1alpha1.ReasonNoEstablishedPeer
		c.Message = fmt.Sprintf("no BGP session of Node %q is Established: %s", node, sessionStates(st))
	default:
		// Established, but the route is not sent yet: the speaker is still exchanging
		// its graceful restart state with the routers, or applying the change.
		c.Reason = v1alpha1.ReasonNoEstablishedPeer
		c.Message = fmt.Sprintf("%s not yet sent in the %d Established BGP sessions of Node %q", prefix, established, node)
		if prefix.Addr().Is6() {
			c.Message += ": IPv6 goes only to routers that take ipv6-unicast in the session, with the Node's global IPv6 address on its external interface as next hop (docs/bgp.md)"
		}
	}
	return c
}

// sessionStates words the sessions that are not Established: "tor-a" is WrongASN, ...
func sessionStates(st bgp.Status) string {
	var out []string
	for _, p := range st.Peers {
		if p.State != v1alpha1.BGPSessionEstablished {
			out = append(out, fmt.Sprintf("%q is %s", p.Name, p.State))
		}
	}
	return strings.Join(out, ", ")
}

// nodeState is the BGPNodeStatus content of a speaker status.
func nodeState(st bgp.Status) v1alpha1.BGPNodeState {
	return v1alpha1.BGPNodeState{
		PeersConfigured:  int32(len(st.Peers)),
		PeersEstablished: int32(st.Established()),
		Peers:            st.Sessions(),
	}
}
