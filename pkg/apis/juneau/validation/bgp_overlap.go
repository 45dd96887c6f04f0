package validation

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// A Node keeps one BGP session per router address, so two BGPPeers with the same
// peerAddress must never select the same Node. Whether they can is decided from the
// selectors alone, not from today's Nodes, because labels change later.
//
// Two selectors "can overlap" when some set of labels — a Node that could exist —
// satisfies both. Label keys are independent of each other, so that holds exactly when,
// for every key, the requirements both selectors put on that key can be met together:
// a key required with value "a" by one and "b" by the other (In/NotIn/matchLabels), or
// required to exist by one and to be absent by the other, makes them disjoint. An empty
// or absent selector selects every Node and so overlaps every selector that selects
// anything. A selector whose own requirements contradict each other selects nothing and
// overlaps nothing.

// BGPPeerConflict is a pair of BGPPeers with the same peerAddress whose node selectors
// can select the same Node. A and B are names, A < B.
type BGPPeerConflict struct {
	A, B    string
	Address string
}

// ConflictingBGPPeers returns every conflicting pair among peers, sorted by A then B.
// Peers whose selector is invalid are left out (ValidateBGPPeer reports them).
func ConflictingBGPPeers(peers []*v1alpha1.BGPPeer) []BGPPeerConflict {
	byAddress := map[string][]*v1alpha1.BGPPeer{}
	for _, p := range peers {
		byAddress[p.Spec.PeerAddress] = append(byAddress[p.Spec.PeerAddress], p)
	}
	var out []BGPPeerConflict
	for addr, group := range byAddress {
		for i := range group {
			for j := i + 1; j < len(group); j++ {
				overlap, err := SelectorsCanOverlap(group[i].Spec.NodeSelector, group[j].Spec.NodeSelector)
				if err != nil || !overlap {
					continue
				}
				a, b := group[i].Name, group[j].Name
				if b < a {
					a, b = b, a
				}
				out = append(out, BGPPeerConflict{A: a, B: b, Address: addr})
			}
		}
	}
	slices.SortFunc(out, func(x, y BGPPeerConflict) int {
		return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B))
	})
	return out
}

// ValidateBGPPeerUnique checks p against the other BGPPeers: none with the same
// peerAddress may select a Node p can select. others may include p itself (by name),
// which is skipped.
func ValidateBGPPeerUnique(p *v1alpha1.BGPPeer, others []*v1alpha1.BGPPeer) field.ErrorList {
	var clash []string
	for _, o := range others {
		if o.Name == p.Name || o.Spec.PeerAddress != p.Spec.PeerAddress {
			continue
		}
		if overlap, err := SelectorsCanOverlap(p.Spec.NodeSelector, o.Spec.NodeSelector); err == nil && overlap {
			clash = append(clash, o.Name)
		}
	}
	if len(clash) == 0 {
		return nil
	}
	who := messages.Kinds("BGPPeer", clash) + " " + messages.Verb(messages.Count(clash), "has", "have")
	return field.ErrorList{duplicate(field.NewPath("spec", "peerAddress"), p.Spec.PeerAddress, fmt.Sprintf(
		"%s the same peerAddress and a nodeSelector that can select the same Nodes as this one: a Node keeps one session per "+
			"router address; make the node selectors exclusive (e.g. different values of one label) or use one BGPPeer", who))}
}

// SelectorsCanOverlap reports whether some Node's labels can satisfy both selectors
// (nil or empty: every Node). It fails on a selector that is not valid.
func SelectorsCanOverlap(a, b *metav1.LabelSelector) (bool, error) {
	ra, err := keyConstraints(a)
	if err != nil {
		return false, err
	}
	rb, err := keyConstraints(b)
	if err != nil {
		return false, err
	}
	for key, c := range ra {
		if other, ok := rb[key]; ok {
			c = c.and(other)
		}
		if !c.satisfiable() {
			return false, nil
		}
	}
	for key, c := range rb {
		if _, ok := ra[key]; !ok && !c.satisfiable() {
			return false, nil
		}
	}
	return true, nil
}

// valueConstraint is what the requirements of one selector say about the value of one
// label key: whether the label may be absent, and which values it may take (only
// values in allowed when allowed is not nil, and never a value in excluded).
type valueConstraint struct {
	absentOK bool
	allowed  sets.Set[string] // nil: any value
	excluded sets.Set[string]
}

func anyValue() valueConstraint {
	return valueConstraint{absentOK: true, excluded: sets.New[string]()}
}

func (c valueConstraint) and(o valueConstraint) valueConstraint {
	out := valueConstraint{absentOK: c.absentOK && o.absentOK, excluded: c.excluded.Union(o.excluded)}
	switch {
	case c.allowed == nil:
		out.allowed = o.allowed
	case o.allowed == nil:
		out.allowed = c.allowed
	default:
		out.allowed = c.allowed.Intersection(o.allowed)
	}
	return out
}

// satisfiable: the label may be absent, or may take some value. Without an allowed set
// some value always remains, since label values are not a finite set.
func (c valueConstraint) satisfiable() bool {
	return c.absentOK || c.allowed == nil || c.allowed.Difference(c.excluded).Len() > 0
}

// keyConstraints turns a selector into one constraint per label key it mentions.
func keyConstraints(s *metav1.LabelSelector) (map[string]valueConstraint, error) {
	out := map[string]valueConstraint{}
	if s == nil {
		return out, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, err
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		c, ok := out[r.Key()]
		if !ok {
			c = anyValue()
		}
		values := sets.New(r.ValuesUnsorted()...)
		var this valueConstraint
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			this = valueConstraint{allowed: values, excluded: sets.New[string]()}
		case selection.NotIn, selection.NotEquals:
			this = valueConstraint{absentOK: true, excluded: values}
		case selection.Exists:
			this = valueConstraint{excluded: sets.New[string]()}
		case selection.DoesNotExist:
			this = valueConstraint{absentOK: true, allowed: sets.New[string](), excluded: sets.New[string]()}
		default:
			return nil, fmt.Errorf("label selector operator %q is not supported", r.Operator())
		}
		out[r.Key()] = c.and(this)
	}
	return out, nil
}
