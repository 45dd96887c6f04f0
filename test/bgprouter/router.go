package bgprouter

import (
	"testing"

	"github.com/loutres/juneau/test/netns"
)

// Router is what a test that can run on either router asks of it: BIRD or FRR, as
// Start picks.
type Router interface {
	// Table is the router's BGP table as its own CLI prints it (every path, best
	// marked), for a test's log.
	Table() (string, error)
	// Quiet reports whether the router has no session Established with any of the
	// neighbors and holds no route from them.
	Quiet(neighbors []Neighbor) (bool, error)
	// Log is what the router's daemons printed so far.
	Log() string
}

// Kinds of router Start runs.
const (
	KindBIRD = "bird"
	KindFRR  = "frr"
)

// Start runs a router of the given kind (KindBIRD or KindFRR) in ns.
func Start(t testing.TB, kind string, ns *netns.NS, cfg Config) Router {
	t.Helper()
	switch kind {
	case KindBIRD:
		return StartBIRD(t, ns, cfg)
	case KindFRR:
		return StartFRR(t, ns, cfg)
	}
	t.Fatalf("no router kind %q: want %q or %q", kind, KindBIRD, KindFRR)
	return nil
}

// Table: `show route all`.
func (b *BIRD) Table() (string, error) { return b.Command("show", "route", "all") }

// Quiet: no protocol of the neighbors Established, an empty table.
func (b *BIRD) Quiet(neighbors []Neighbor) (bool, error) {
	for _, n := range neighbors {
		if up, err := b.Established(n.Name); err != nil || up {
			return false, err
		}
	}
	routes, err := b.Routes()
	return err == nil && len(routes) == 0, err
}

// Table: `show bgp ipv4 unicast` (every path, with its MED in the Metric column).
func (r *FRR) Table() (string, error) { return r.Command("show bgp ipv4 unicast") }

// Quiet: no neighbor Established, an empty IPv4 table.
func (r *FRR) Quiet(neighbors []Neighbor) (bool, error) {
	for _, n := range neighbors {
		state, err := r.NeighborState(n.Address.String())
		if err != nil || state == "Established" {
			return false, err
		}
	}
	routes, err := r.Routes()
	return err == nil && len(routes) == 0, err
}
