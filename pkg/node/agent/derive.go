package agent

import (
	"cmp"
	"net/netip"
	"slices"
	"unique"

	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
)

// What Compute derives of each attachment and advertisement, and in which order: from
// the listed objects (Compute alone) or kept by the agent's views (views).

// natEntry is the NAT pair of an attached ElasticIPAttachment: an in-cluster mapping
// (bandwidth 0), and one of this Node's own when own, with its ElasticIP's limit.
type natEntry struct {
	m         nft.Mapping
	own       bool
	bandwidth int32
}

// natEntryOf is the natEntry of an attachment on node's agent, if it is attached;
// bandwidth gives an ElasticIP's limit.
func natEntryOf(node string, a *v1alpha1.ElasticIPAttachment, bandwidth func(namespace, name string) int32) (natEntry, bool) {
	m, ok := attached(a)
	if !ok {
		return natEntry{}, false
	}
	e := natEntry{m: m}
	if a.Status.NodeName == node {
		e.own, e.bandwidth = true, bandwidth(a.Namespace, a.Spec.ElasticIPRef.Name)
	}
	return e, true
}

// byMapping orders mappings by ElasticIP, Pod IP, then limit. The later fields are
// compared only on a tie (cmp.Or would compare them every time).
func byMapping(a, b nft.Mapping) int {
	if c := a.ElasticIP.Compare(b.ElasticIP); c != 0 {
		return c
	}
	if c := a.PodIP.Compare(b.PodIP); c != 0 {
		return c
	}
	return cmp.Compare(a.BandwidthMbps, b.BandwidthMbps)
}

// ownMapping is the mapping this Node translates for e, with its limit.
func (e natEntry) ownMapping() nft.Mapping {
	m := e.m
	m.BandwidthMbps = e.bandwidth
	return m
}

// mappings are the in-cluster mappings of the attached attachments and this Node's own
// mappings, each sorted by byMapping: the views' when Inputs has them (shared with
// the views until their next update, never copied), else derived from Attachments.
func (in *Inputs) mappings() (inCluster, own []nft.Mapping) {
	if in.derived != nil {
		return in.derived.inCluster, in.derived.own
	}
	inCluster = make([]nft.Mapping, 0, len(in.Attachments))
	for _, a := range in.Attachments {
		if e, ok := natEntryOf(in.NodeName, a, in.bandwidth); ok {
			inCluster = append(inCluster, e.m)
			if e.own {
				own = append(own, e.ownMapping())
			}
		}
	}
	slices.SortFunc(inCluster, byMapping)
	slices.SortFunc(own, byMapping)
	return inCluster, own
}

// adCandidate is the advertisement with its address when it names this Node with a
// usable address and is not being deleted: one this Node answers for if it serves the
// address.
func adCandidate(node string, ad *v1alpha1.ARPAdvertisement) (answeredAd, bool) {
	if ad.Spec.NodeName != node || ad.DeletionTimestamp != nil {
		return answeredAd{}, false
	}
	addr, err := netip.ParseAddr(ad.Spec.Address)
	if err != nil || addr.Zone() != "" {
		return answeredAd{}, false
	}
	return answeredAd{ad: ad, addr: addr.Unmap(), network: unique.Make(ad.Spec.ExternalNetwork)}, true
}

func byAnsweredAd(a, b answeredAd) int {
	return byAddressThenName(a.addr, a.ad.Name, b.addr, b.ad.Name)
}

// adCandidates are the adCandidates sorted by address then name: the view's when Inputs
// has one, else derived from Advertisements.
func (in *Inputs) adCandidates() []answeredAd {
	if in.derived != nil {
		return in.derived.ads
	}
	out := make([]answeredAd, 0, len(in.Advertisements))
	for _, ad := range in.Advertisements {
		if c, ok := adCandidate(in.NodeName, ad); ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, byAnsweredAd)
	return out
}

// ElasticIPSource finds an ElasticIP by "<namespace>/<name>": nil when there is none.
type ElasticIPSource interface {
	ElasticIP(key string) *v1alpha1.ElasticIP
}

// ElasticIPMap is an ElasticIPSource holding its ElasticIPs.
type ElasticIPMap map[string]*v1alpha1.ElasticIP

// ElasticIP is the ElasticIP at key.
func (m ElasticIPMap) ElasticIP(key string) *v1alpha1.ElasticIP { return m[key] }

// elasticIPOf is the ElasticIP at key in s, nil when s is.
func elasticIPOf(s ElasticIPSource, key string) *v1alpha1.ElasticIP {
	if s == nil {
		return nil
	}
	return s.ElasticIP(key)
}

// elasticIPLister is the ElasticIPSource of the agent's cache (100,000 ElasticIPs
// put into a map at every sync took a sixth of it).
type elasticIPLister struct{ l listers.ElasticIPLister }

func (s elasticIPLister) ElasticIP(key string) *v1alpha1.ElasticIP {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	eip, err := s.l.ElasticIPs(namespace).Get(name)
	if err != nil {
		return nil
	}
	return eip
}

// networkSet is a set of ExternalNetworks by their interned names (answeredAd.network),
// with the last answer kept: advertisements come in runs of one network, and looking
// each one's network up read 100,000 advertisements from memory.
type networkSet struct {
	names      map[unique.Handle[string]]bool
	last       unique.Handle[string]
	lastAnswer bool
}

// gratuitousNetworks are the networks with spec.gratuitousARP.
func gratuitousNetworks(networks map[string]*v1alpha1.ExternalNetwork) *networkSet {
	s := &networkSet{}
	for name, n := range networks {
		if n.Spec.GratuitousARP {
			if s.names == nil {
				s.names = map[unique.Handle[string]]bool{}
			}
			s.names[unique.Make(name)] = true
		}
	}
	return s
}

// sortedNames are the set's names, sorted.
func (s *networkSet) sortedNames() []string {
	var out []string
	for n := range s.names {
		out = append(out, n.Value())
	}
	slices.Sort(out)
	return out
}

// has reports whether the network named n is in the set.
func (s *networkSet) has(n unique.Handle[string]) bool {
	if len(s.names) == 0 {
		return false
	}
	if n != s.last {
		s.last, s.lastAnswer = n, s.names[n]
	}
	return s.lastAnswer
}
