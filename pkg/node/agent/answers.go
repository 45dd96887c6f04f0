package agent

import (
	"net/netip"
	"slices"

	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// answerState is what Compute's answers of one sync (the advertisements answered for
// and the ARP, NDP and gratuitous addresses) leave the next: the lists, owned here and
// patched in place, and what they were computed from besides the views' lists. An
// answer changes only at an address whose advertisements or own mapping changed, so
// when nothing else did, the next Compute recomputes the addresses the views' changes
// span and keeps the rest: a walk of 100,000 candidates, and readers comparing 100,000
// answers to find one, were most of a sync after one change (docs/performance.md#scale).
// Anything else changed (a rebuilt view, a direct NIC, a conflict the programmer left
// out, a subnet, a network's gratuitous ARP) and they are computed whole.
type answerState struct {
	answered             []answeredAd
	arp, ndp, gratuitous []netip.Addr
	// spare: the lists before the last whole computation, which the next one fills.
	spare spareLists
	// The views' versions the lists follow (0: none, the next are computed whole), and
	// the rest of what they were computed from.
	adsSeen, ownSeen uint64
	reserved         []reservedAddress
	direct           []netip.Addr
	gratuitousNets   []string
	rejected         bool
	// arpT and ndpT follow the edits of arp and ndp (Desired.ARPChange, NDPChange).
	arpT, ndpT listdiff.Tracker
	// patched counts the answers patched rather than computed whole (tests).
	patched int
}

// spareLists are lists no longer read, one entry per answered advertisement, that a
// whole computation fills instead of allocating: at 100,000, 7 MB a sync that the
// garbage collector then had to find.
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

// answerer decides, for candidates in address order, which this Node answers for.
type answerer struct {
	d        *Desired
	reserved []reservedAddress
	// j walks d.NAT.Mappings beside the candidates.
	j int
}

// serves reports whether the Node delivers traffic to c's address now: a mapping of
// its own the programmer kept, or a direct NIC's host route. Candidates are asked in
// address order (the mappings are walked beside them).
func (w *answerer) serves(c answeredAd) bool {
	m := w.d.NAT.Mappings
	for w.j < len(m) && m[w.j].ElasticIP.Less(c.addr) {
		w.j++
	}
	nat := w.j < len(m) && m[w.j].ElasticIP == c.addr
	if nat && w.d.NATRejected != nil {
		_, nat = w.d.Programmed.Mappings[c.addr]
	}
	if nat {
		return true
	}
	_, direct := w.d.Programmed.Direct[c.addr]
	return direct
}

// answer appends to out the candidates this Node answers for: served and not a
// reserved address.
func (w *answerer) answer(out []answeredAd, candidates []answeredAd) []answeredAd {
	for _, c := range candidates {
		if w.serves(c) && whyReserved(w.reserved, c.addr) == "" {
			out = append(out, c)
		}
	}
	return out
}

// refused are the candidates at a reserved address this Node serves, with why it
// does not answer for them: found by address, not by a walk.
func (w *answerer) refused(candidates []answeredAd) map[string]string {
	var out map[string]string
	for _, r := range w.reserved {
		i := firstAt(candidates, r.addr, func(c answeredAd) netip.Addr { return c.addr })
		w.j = firstAt(w.d.NAT.Mappings, r.addr, mappingAddr)
		for ; i < len(candidates) && candidates[i].addr == r.addr; i++ {
			if w.serves(candidates[i]) {
				if out == nil {
					out = map[string]string{}
				}
				out[candidates[i].ad.Name] = r.why
			}
		}
	}
	w.j = 0
	return out
}

// firstAt is the index of the first entry of s, sorted by address, at addr or after.
func firstAt[T any](s []T, addr netip.Addr, at func(T) netip.Addr) int {
	i, _ := slices.BinarySearchFunc(s, addr, func(x T, a netip.Addr) int {
		if at(x).Less(a) {
			return -1
		}
		return 1
	})
	return i
}

// span is a closed range of addresses [lo, hi]; lo's zero Addr is below every address,
// toEnd stands for above every address.
type span struct {
	lo, hi netip.Addr
	toEnd  bool
	empty  bool
}

// spanOf is the addresses whose entries of list, sorted by address, the window w of
// its last change may have changed: from the entry before it to the entry after it.
func spanOf[T any](list []T, w listdiff.Window, at func(T) netip.Addr) span {
	if w.Empty() {
		return span{empty: true}
	}
	var s span
	if w.Start > 0 {
		s.lo = at(list[w.Start-1])
	}
	if w.NewEnd < len(list) {
		s.hi = at(list[w.NewEnd])
	} else {
		s.toEnd = true
	}
	return s
}

// union is the smallest span holding s and t.
func (s span) union(t span) span {
	switch {
	case s.empty:
		return t
	case t.empty:
		return s
	}
	u := span{lo: s.lo, hi: s.hi, toEnd: s.toEnd || t.toEnd}
	if t.lo.Less(s.lo) {
		u.lo = t.lo
	}
	if s.hi.Less(t.hi) {
		u.hi = t.hi
	}
	return u
}

// within returns the indexes [i, k) of the entries of s, sorted by address, in the span.
func within[T any](sp span, s []T, at func(T) netip.Addr) (i, k int) {
	i, k = firstAt(s, sp.lo, at), len(s)
	if !sp.toEnd {
		k, _ = slices.BinarySearchFunc(s, sp.hi, func(x T, a netip.Addr) int {
			if a.Less(at(x)) {
				return 1
			}
			return -1
		})
	}
	return i, max(i, k)
}

// The keys the lists are sorted by: answered advertisements and candidates, NAT
// mappings, addresses.
func answeredAddr(x answeredAd) netip.Addr { return x.addr }
func mappingAddr(m nft.Mapping) netip.Addr { return m.ElasticIP }
func itself(a netip.Addr) netip.Addr       { return a }

// addresses appends to arp, ndp and gratuitous the addresses of answered, in order and
// each once.
func addresses(answered []answeredAd, gratuitous *networkSet, arp, ndp, grat []netip.Addr) ([]netip.Addr, []netip.Addr, []netip.Addr) {
	for _, x := range answered {
		if !x.addr.Is4() {
			ndp = appendOnce(ndp, x.addr)
			continue
		}
		arp = appendOnce(arp, x.addr)
		if gratuitous.has(x.network) {
			grat = appendOnce(grat, x.addr)
		}
	}
	return arp, ndp, grat
}

func appendOnce(s []netip.Addr, a netip.Addr) []netip.Addr {
	if len(s) > 0 && s[len(s)-1] == a {
		return s
	}
	return append(s, a)
}

// answers fills d's answers (answered, ARP, NDP, Gratuitous, Refused and the changes
// since st's last) from the candidates, patching st's lists where the views changed
// when nothing else did, else computing them whole; d.NAT and d.Programmed are set.
func (st *answerState) answers(in Inputs, d *Desired, candidates []answeredAd) {
	w := &answerer{d: d, reserved: reservedAddresses(in)}
	d.Refused = w.refused(candidates)
	direct := make([]netip.Addr, 0, len(d.Programmed.Direct))
	for a := range d.Programmed.Direct {
		direct = append(direct, a)
	}
	slices.SortFunc(direct, netip.Addr.Compare)
	gratuitous := gratuitousNetworks(in.Networks)
	nets := gratuitous.sortedNames()
	rejected := d.NATRejected != nil
	var ads, own listdiff.Change
	if in.derived != nil {
		ads, own = in.derived.adsChange, in.derived.ownChange
	}

	if st.adsSeen != 0 && ads.From == st.adsSeen && st.ownSeen != 0 && own.From == st.ownSeen &&
		!rejected && !st.rejected && slices.Equal(w.reserved, st.reserved) && slices.Equal(direct, st.direct) &&
		slices.Equal(nets, st.gratuitousNets) {
		st.patch(d, w, candidates, gratuitous,
			spanOf(candidates, ads.Window, answeredAddr).union(spanOf(d.NAT.Mappings, own.Window, mappingAddr)))
	} else {
		st.whole(d, w, candidates, gratuitous)
	}
	st.adsSeen, st.ownSeen = ads.To, own.To
	st.reserved, st.direct, st.gratuitousNets, st.rejected = w.reserved, direct, nets, rejected
	d.answered = orNil(st.answered)
	d.ARP, d.NDP, d.Gratuitous = orNil(st.arp), orNil(st.ndp), orNil(st.gratuitous)
}

func orNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// whole computes the answers anew into the spare lists, and keeps the last ones as
// the next spares: d.answeredGone stays readable until the next Compute.
func (st *answerState) whole(d *Desired, w *answerer, candidates []answeredAd, gratuitous *networkSet) {
	answered := w.answer(reuse(st.spare.answered, len(candidates)), candidates)
	arp, ndp, grat := addresses(answered, gratuitous, reuse(st.spare.arp, len(answered)), st.spare.ndp[:0], st.spare.gratuitous[:0])
	since := listdiff.Of(st.answered, answered)
	d.answeredSince, d.answeredGone = since, st.answered[since.Start:since.OldEnd]
	st.spare = spareLists{answered: st.answered, arp: st.arp, ndp: st.ndp, gratuitous: st.gratuitous}
	st.answered, st.arp, st.ndp, st.gratuitous = answered, arp, ndp, grat
	st.arpT.Reset(len(arp))
	st.ndpT.Reset(len(ndp))
	d.ARPChange, d.NDPChange = st.arpT.Mark(), st.ndpT.Mark()
}

// patch recomputes the answers at the addresses of sp and keeps the rest.
func (st *answerState) patch(d *Desired, w *answerer, candidates []answeredAd, gratuitous *networkSet, sp span) {
	st.patched++
	if sp.empty {
		d.answeredSince, d.answeredGone = listdiff.Window{Start: len(st.answered), OldEnd: len(st.answered), NewEnd: len(st.answered)}, nil
		d.ARPChange, d.NDPChange = st.arpT.Mark(), st.ndpT.Mark()
		return
	}
	ci, ck := within(sp, candidates, answeredAddr)
	w.j = firstAt(d.NAT.Mappings, sp.lo, mappingAddr)
	fresh := w.answer(nil, candidates[ci:ck])
	i, k := within(sp, st.answered, answeredAddr)
	gone := slices.Clone(st.answered[i:k])
	st.answered = slices.Replace(st.answered, i, k, fresh...)
	since := listdiff.Of(gone, fresh)
	d.answeredSince = listdiff.Window{Start: i + since.Start, OldEnd: i + since.OldEnd, NewEnd: i + since.NewEnd}
	d.answeredGone = gone[since.Start:since.OldEnd]

	arp, ndp, grat := addresses(fresh, gratuitous, nil, nil, nil)
	st.arp = replaceIn(&st.arpT, sp, st.arp, arp)
	st.ndp = replaceIn(&st.ndpT, sp, st.ndp, ndp)
	st.gratuitous = replaceIn(nil, sp, st.gratuitous, grat)
	d.ARPChange, d.NDPChange = st.arpT.Mark(), st.ndpT.Mark()
}

// replaceIn replaces the addresses of s in sp by by, noting it in t when there is one.
func replaceIn(t *listdiff.Tracker, sp span, s, by []netip.Addr) []netip.Addr {
	i, k := within(sp, s, itself)
	if t != nil {
		t.Replace(i, k, len(by))
	}
	return slices.Replace(s, i, k, by...)
}

// saveAnswered hands the answered addresses (those of ARP, then those of NDP) to
// cfg.Answered when they changed, with where; a.answered keeps them in a list of its
// own, rewritten in place. When both lists are told changed since the ones handed
// over (Desired.ARPChange, NDPChange), it is patched where they changed, not compared.
func (a *Agent) saveAnswered(d Desired) error {
	if a.cfg.Answered == nil {
		return nil
	}
	arpW, arpTold := toldSince(d.ARPChange, a.savedSeen[0])
	ndpW, ndpTold := toldSince(d.NDPChange, a.savedSeen[1])
	a.savedSeen = [2]uint64{d.ARPChange.To, d.NDPChange.To}
	arp, ndp := d.ARP, d.NDP
	if arpTold && ndpTold {
		if arpW.Empty() && ndpW.Empty() && a.saved {
			return nil
		}
		// The NDP addresses first: they follow the ARP ones, which the second patch
		// may move.
		a.patchAnswered(len(arp)-arpW.NewEnd+arpW.OldEnd, ndpW, ndp)
		a.patchAnswered(0, arpW, arp)
	} else {
		if a.saved && len(a.answered) == len(arp)+len(ndp) &&
			slices.Equal(a.answered[:len(arp)], arp) && slices.Equal(a.answered[len(arp):], ndp) {
			return nil
		}
		a.answered = append(append(a.answered[:0], arp...), ndp...)
		a.answeredT.Reset(len(a.answered))
	}
	a.saved = false
	if err := a.cfg.Answered(a.answered, a.answeredT.Mark()); err != nil {
		return err
	}
	a.saved = true
	return nil
}

// patchAnswered rewrites the saved list where w says the list by, which starts at
// offset in it, changed; an empty window is no edit (the tracker would count it).
func (a *Agent) patchAnswered(offset int, w listdiff.Window, by []netip.Addr) {
	if !w.Empty() {
		a.answered = slices.Replace(a.answered, offset+w.Start, offset+w.OldEnd, by[w.Start:w.NewEnd]...)
		a.answeredT.Replace(offset+w.Start, offset+w.OldEnd, w.NewEnd-w.Start)
	}
}

// toldSince is the window of c when it is a change from version seen.
func toldSince(c listdiff.Change, seen uint64) (listdiff.Window, bool) {
	return c.Window, seen != 0 && c.From == seen
}

// compute is Compute over in with the agent's answers of its last Compute, which it
// patches (answerState).
func (a *Agent) compute(in Inputs) Desired {
	in.answers = &a.answers
	return Compute(in)
}
