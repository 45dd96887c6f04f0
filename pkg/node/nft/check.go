package nft

import (
	"maps"
	"net/netip"
)

// Programmed is what Sync programs of a DesiredState: every mapping and direct NIC it
// keeps after leaving out the invalid and conflicting ones.
type Programmed struct {
	// Mappings maps each translated ElasticIP to its Pod IP.
	Mappings map[netip.Addr]netip.Addr
	// Direct maps each allowed direct NIC address to its host interface.
	Direct map[netip.Addr]string
}

// Check validates desired exactly as Sync does, without touching the kernel. It returns
// what Sync would program and the error Sync would return: one wrapping
// ErrInvalidConfig (then Sync changes nothing, and Programmed is empty) or
// ErrInvalidMapping (what was left out). Callers deciding what depends on the
// datapath — answering ARP, a Pod's readiness — use it to agree with Sync.
func Check(desired DesiredState) (Programmed, error) {
	s, err := normalize(desired)
	if s == nil {
		return Programmed{}, err
	}
	return Programmed{Mappings: maps.Clone(s.eip2vpc), Direct: maps.Clone(s.directOf)}, err
}
