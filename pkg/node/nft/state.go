package nft

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/loutres/juneau/pkg/listdiff"
)

// Mapping pairs an ElasticIP with the Pod IP it is translated to.
type Mapping struct {
	ElasticIP netip.Addr
	PodIP     netip.Addr
	// BandwidthMbps limits the ElasticIP's traffic with the outside (not
	// the cluster ranges), in Mbit/s, separately in each direction; 0 means
	// unlimited. See MaxBandwidthMbps.
	BandwidthMbps int32
}

func (m Mapping) String() string {
	return m.ElasticIP.String() + "<->" + m.PodIP.String() + bandwidthSuffix(m.BandwidthMbps)
}

// Config is the node-wide part of the desired state. A change to it rebuilds
// the whole table; mappings change element by element.
type Config struct {
	// ExternalInterface is the interface towards the external network; Pod
	// traffic leaving through it gets its ElasticIP as source.
	ExternalInterface string
	// ClusterCIDRs are the Pod CIDRs, Service CIDRs and node addresses (as
	// /32 or /128), of both families. Traffic between a Pod and these ranges
	// is never translated.
	ClusterCIDRs []netip.Prefix
}

// DirectNIC is one source address a direct NIC may send from. A direct NIC
// is a Pod interface that carries an ElasticIP itself (as a /32); on the node
// its traffic enters through HostInterface, the host end of its veth. A NIC
// that sends from several addresses (eth0 carrying both the Pod IP of the
// primary CNI and an ElasticIP) is listed once per address.
type DirectNIC struct {
	HostInterface string
	Address       netip.Addr
	// BandwidthMbps limits the traffic between Address and the outside (not
	// the cluster ranges), in Mbit/s, separately in each direction; 0 means
	// unlimited. Set it on the entry of the ElasticIP, not of the Pod IP.
	BandwidthMbps int32
}

func (d DirectNIC) String() string {
	return d.HostInterface + "/" + d.Address.String() + bandwidthSuffix(d.BandwidthMbps)
}

// DesiredState is everything the datapath should translate on this node.
type DesiredState struct {
	Config
	// Mappings are the ElasticIPs attached to Pods of this node: translated
	// statelessly between the ElasticIP and the outside.
	Mappings []Mapping
	// Direct lists the direct NICs: packets entering the node through one
	// of their host interfaces with a source address not listed for that
	// interface are dropped, in each family the interface has an address of
	// (IPv6 link-local sources and :: excepted). Interfaces not listed are
	// not filtered.
	Direct []DirectNIC
	// InCluster lists the NAT mappings of the whole cluster, on any node.
	// Cluster clients on this node (its Pods, from a cluster address, and
	// the node itself) that connect to one of these ElasticIPs are
	// translated here, at their origin, to its Pod IP, with connection
	// tracking reversing the replies; see README.md, "In-cluster clients".
	// Mappings are always part of it, listed here or not. BandwidthMbps is
	// ignored: traffic within the cluster is never limited.
	InCluster []Mapping
	// MappingsChange and InClusterChange, when the caller keeps the lists edited in
	// place (the node agent's views), tell where each differs from the version before:
	// Sync and Checker.Check then take that window instead of comparing the list with
	// the last whole (listdiff.Since). The zero value tells nothing.
	MappingsChange, InClusterChange listdiff.Change
}

// ErrInvalidConfig means Sync refused the state and changed nothing.
var ErrInvalidConfig = errors.New("invalid NAT configuration")

// ErrInvalidMapping means some mappings were left out; the others were applied.
var ErrInvalidMapping = errors.New("invalid NAT mapping")

// maxIfNameLen is IFNAMSIZ minus the terminating NUL.
const maxIfNameLen = 15

// state is a DesiredState after validation: what is applied to the kernel,
// kept up to date change by change (see index.go).
type state struct {
	iface string
	// extIndex is the external interface's index when the table was built
	// (0: unknown), for the inbound fast path; see preroutingRules.
	extIndex uint32
	cidrs    []netip.Prefix // masked, without overlaps, sorted (IPv4 first)
	// eip2vpc and vpc2eip are the kept mappings, natBW the bandwidth of
	// each kept ElasticIP (0: unlimited).
	eip2vpc map[netip.Addr]netip.Addr
	vpc2eip map[netip.Addr]netip.Addr
	natBW   map[netip.Addr]int32
	// directIfaces are the filtered host interfaces of each family,
	// directOf the allowed source addresses with the one interface each may
	// enter through.
	directIfaces map[familyIface]struct{}
	directOf     map[netip.Addr]string
	// limits holds the limit in Mbit/s of every limited ElasticIP;
	// limitSrc maps the source address its outbound traffic carries when it
	// enters the node (the Pod IP for NAT, the ElasticIP itself for a direct
	// NIC) to that ElasticIP, and limitFrom is its inverse.
	limits    map[netip.Addr]int32
	limitSrc  map[netip.Addr]netip.Addr
	limitFrom map[netip.Addr]netip.Addr
	// cluster maps every kept in-cluster ElasticIP to its Pod IP.
	cluster map[netip.Addr]netip.Addr
}

func newState(c Config) *state {
	return &state{
		iface: c.ExternalInterface, cidrs: mergePrefixes(c.ClusterCIDRs),
		eip2vpc: map[netip.Addr]netip.Addr{}, vpc2eip: map[netip.Addr]netip.Addr{}, natBW: map[netip.Addr]int32{},
		directIfaces: map[familyIface]struct{}{}, directOf: map[netip.Addr]string{},
		limits: map[netip.Addr]int32{}, limitSrc: map[netip.Addr]netip.Addr{}, limitFrom: map[netip.Addr]netip.Addr{},
		cluster: map[netip.Addr]netip.Addr{},
	}
}

// validConfig checks the node-wide part of a desired state.
func validConfig(c Config) error {
	if c.ExternalInterface == "" || len(c.ExternalInterface) > maxIfNameLen {
		return fmt.Errorf("%w: external interface name %q", ErrInvalidConfig, c.ExternalInterface)
	}
	return nil
}

// normalize validates a whole DesiredState at once, as the first Sync does.
// A bad Config is fatal (nil state). A bad or conflicting mapping is left out
// and reported in the error (wrapping ErrInvalidMapping) while the rest is
// kept: one broken attachment must not stop the others. Every side of a
// conflict is dropped, because sending an address's traffic to the wrong Pod
// is worse than sending it nowhere.
func normalize(d DesiredState) (*state, error) {
	ix, err := newIndex(d.Config)
	if err != nil {
		return nil, err
	}
	ix.apply(nil, d.Mappings, nil, d.Direct, nil, d.InCluster)
	return ix.s, ix.err()
}

func sortedAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return a
}

func sortedKeys[V any](m map[netip.Addr]V) []netip.Addr {
	return slices.SortedFunc(maps.Keys(m), netip.Addr.Compare)
}

// usable reports an address that may be an ElasticIP, a Pod IP or a direct
// NIC's source: unicast, and for IPv6 neither loopback nor link-local (which
// never leaves its link). Callers unmap IPv4-mapped IPv6 addresses first.
func usable(a netip.Addr) bool {
	switch {
	case a.Is4():
		return !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
	case a.Is6():
		return !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !a.IsLinkLocalUnicast()
	}
	return false
}

// sameConfig reports whether two states need the same rules (they may differ
// in map elements).
func (s *state) sameConfig(o *state) bool {
	return s.iface == o.iface && slices.Equal(s.cidrs, o.cidrs)
}

// direct returns the filtered interfaces and the allowed pairs, sorted.
func (s *state) direct() ([]familyIface, []DirectNIC) {
	return slices.SortedFunc(maps.Keys(s.directIfaces), compareFamilyIface), directPairs(s.directOf)
}

// mappings returns the state's mappings sorted by ElasticIP.
func (s *state) mappings() []Mapping {
	out := make([]Mapping, 0, len(s.eip2vpc))
	for eip, pod := range s.eip2vpc {
		out = append(out, Mapping{ElasticIP: eip, PodIP: pod, BandwidthMbps: s.natBW[eip]})
	}
	slices.SortFunc(out, func(a, b Mapping) int { return a.ElasticIP.Compare(b.ElasticIP) })
	return out
}

// clusterMappings returns the kept in-cluster mappings sorted by ElasticIP.
func (s *state) clusterMappings() []Mapping {
	out := make([]Mapping, 0, len(s.cluster))
	for eip, pod := range s.cluster {
		out = append(out, Mapping{ElasticIP: eip, PodIP: pod})
	}
	slices.SortFunc(out, func(a, b Mapping) int { return a.ElasticIP.Compare(b.ElasticIP) })
	return out
}

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ first, last netip.Addr }

// mergePrefixes masks the prefixes (an IPv4-mapped IPv6 prefix becomes the
// IPv4 prefix it means) and drops the ones covered by another; what is left
// is sorted, IPv4 first, and free of overlaps, which an nftables interval set
// requires.
func mergePrefixes(in []netip.Prefix) []netip.Prefix {
	var all []netip.Prefix
	for _, p := range in {
		if !p.IsValid() {
			continue
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() {
			if bits < 96 {
				continue // covers more than the mapped IPv4 space: no IPv4 prefix
			}
			a, bits = a.Unmap(), bits-96
		}
		all = append(all, netip.PrefixFrom(a.WithZone(""), bits).Masked())
	}
	// Shorter prefixes first, so a covering prefix is kept before what it covers.
	slices.SortFunc(all, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	var out []netip.Prefix
	for _, p := range all {
		if len(out) > 0 && out[len(out)-1].Overlaps(p) {
			continue // sorted by address: an overlapping earlier prefix covers p
		}
		out = append(out, p)
	}
	return out
}

// ranges turns sorted, non-overlapping prefixes into ranges, joining adjacent
// ones (an interval set rejects two intervals that touch).
func ranges(prefixes []netip.Prefix) []addrRange {
	var out []addrRange
	for _, p := range prefixes {
		r := addrRange{first: p.Masked().Addr(), last: lastAddr(p)}
		if n := len(out); n > 0 && out[n-1].last.Next() == r.first {
			out[n-1].last = r.last
			continue
		}
		out = append(out, r)
	}
	return out
}

// lastAddr is the last address of a prefix: its host bits all set.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// familyPrefixes are the prefixes of one family among sorted ones.
func familyPrefixes(ps []netip.Prefix, f *family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if familyOf(p.Addr()) == f {
			out = append(out, p)
		}
	}
	return out
}
