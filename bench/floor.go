package main

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/netns"
)

// bareMapNAT programs the floor of juneau's design into ns: stateless 1:1 NAT with two
// maps and no other rule, the least nftables can do to translate an address by map
// lookup:
//
//	table ip floor {
//	    map eip2vpc { type ipv4_addr : ipv4_addr }
//	    map vpc2eip { type ipv4_addr : ipv4_addr }
//	    chain prerouting  { type filter hook prerouting priority raw; ip daddr set ip daddr map @eip2vpc notrack }
//	    chain postrouting { type filter hook postrouting priority srcnat + 10; ip saddr set ip saddr map @vpc2eip }
//	}
//
// It has none of what juneau adds around it (ICMP error quotes, bandwidth limits,
// anti-spoofing, cluster ranges kept untranslated, the external interface).
func bareMapNAT(e *env, ns *netns.NS, mappings []nft.Mapping) {
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		e.Fatal(err)
	}
	t := c.AddTable(&nftables.Table{Name: "floor", Family: nftables.TableFamilyIPv4})
	m := func(name string) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeIPAddr}
	}
	eip2vpc, vpc2eip := m("eip2vpc"), m("vpc2eip")
	var in, out []nftables.SetElement
	for _, mp := range mappings {
		e4, p4 := mp.ElasticIP.As4(), mp.PodIP.As4()
		in = append(in, nftables.SetElement{Key: e4[:], Val: p4[:]})
		out = append(out, nftables.SetElement{Key: p4[:], Val: e4[:]})
	}
	for _, s := range []*nftables.Set{eip2vpc, vpc2eip} {
		if err := c.AddSet(s, nil); err != nil {
			e.Fatal(err)
		}
	}
	accept := nftables.ChainPolicyAccept
	rewrite := func(hook *nftables.ChainHook, prio int32, set *nftables.Set, off uint32, notrack bool) {
		ch := c.AddChain(&nftables.Chain{Name: set.Name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook,
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(prio)), Policy: &accept})
		exprs := []expr.Any{
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: unix.NFT_REG32_00, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
			&expr.Lookup{SourceRegister: unix.NFT_REG32_00, DestRegister: unix.NFT_REG32_00, IsDestRegSet: true, SetName: set.Name, SetID: set.ID},
			&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: unix.NFT_REG32_00, Base: expr.PayloadBaseNetworkHeader,
				Offset: off, Len: 4, CsumType: expr.CsumTypeInet, CsumOffset: 10, CsumFlags: unix.NFT_PAYLOAD_L4CSUM_PSEUDOHDR},
		}
		if notrack {
			exprs = append(exprs, &expr.Notrack{})
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	rewrite(nftables.ChainHookPrerouting, nft.PriorityPrerouting, eip2vpc, 16, true)
	rewrite(nftables.ChainHookPostrouting, nft.PriorityPostrouting, vpc2eip, 12, false)
	if err := c.Flush(); err != nil {
		e.Fatalf("programming the bare map NAT: %v", err)
	}
	// Elements in batches of their own, each small enough for the default socket buffer.
	for _, s := range []struct {
		set   *nftables.Set
		elems []nftables.SetElement
	}{{eip2vpc, in}, {vpc2eip, out}} {
		for len(s.elems) > 0 {
			n := min(len(s.elems), 2000) // one message stays under 64 KiB
			if err := c.SetAddElements(s.set, s.elems[:n]); err != nil {
				e.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				e.Fatalf("adding elements to %s: %v", s.set.Name, err)
			}
			s.elems = s.elems[n:]
		}
	}
}

// loadConntrack makes connection tracking active in ns, as it is on every Kubernetes
// node (kube-proxy and network policies use it): a rule matching on conntrack state
// registers conntrack's hooks in the namespace. The rule sits in the output hook, which
// forwarded packets never traverse, so the only cost a forwarded packet sees is
// conntrack's own.
func loadConntrack(e *env, ns *netns.NS) {
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		e.Fatal(err)
	}
	// inet: conntrack for IPv4 and IPv6 (the IPv6 rows, 3n and 3o).
	t := c.AddTable(&nftables.Table{Name: "conntrack", Family: nftables.TableFamilyINet})
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityFilter, Policy: &accept})
	// ct state invalid drop
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Ct{Register: unix.NFT_REG32_00, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: unix.NFT_REG32_00, DestRegister: unix.NFT_REG32_00, Len: 4,
			Mask: []byte{1, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}}, // NF_CT_STATE_INVALID_BIT, host order
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG32_00, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		e.Fatalf("loading conntrack: %v", err)
	}
}

// registerNATHooks registers the kernel's NAT hooks in ns, as every node where kube-proxy
// or a masquerading CNI runs has them: an empty NAT chain, in the output hook like the
// rule of loadConntrack. The kernel registers its NAT hooks for all four hook points at
// the first NAT chain of a family, and every packet then passes them (an untracked one
// returns at once). juneau's own NAT chains (in-cluster clients) register them too.
func registerNATHooks(e *env, ns *netns.NS) {
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()))
	if err != nil {
		e.Fatal(err)
	}
	t := c.AddTable(&nftables.Table{Name: "nat-hooks", Family: nftables.TableFamilyIPv4})
	accept := nftables.ChainPolicyAccept
	c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	if err := c.Flush(); err != nil {
		e.Fatalf("registering NAT hooks: %v", err)
	}
}
