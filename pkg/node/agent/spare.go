package agent

import "net/netip"

// spareLists are the lists Compute makes anew at every sync, one entry per answered
// advertisement: at 100,000, 7 MB a sync that the garbage collector then had to find
// (a third of a sync after one change, docs/performance.md#scale). The agent hands
// each back once it no longer reads it.
type spareLists struct {
	answered             []answeredAd
	arp, ndp, gratuitous []netip.Addr
}

// reuse is s emptied when it can hold n entries, else a new list that can.
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// withSpare hands in the spare lists, once: they are Compute's until recycle gives
// them back.
func (a *Agent) withSpare(in Inputs) Inputs {
	spare := a.spare
	a.spare = spareLists{}
	in.spare = &spare
	return in
}

// recycle keeps d's address lists, and answered (a list of answered advertisements
// no longer read), for the next Compute: the responders, the saved addresses and the
// log keep copies of their own, and nothing reads d after the sync that made it.
func (a *Agent) recycle(d Desired, answered []answeredAd) {
	a.spare.arp, a.spare.ndp, a.spare.gratuitous = d.ARP, d.NDP, d.Gratuitous
	if answered != nil {
		a.spare.answered = answered
	}
}
