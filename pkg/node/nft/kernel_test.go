package nft

import (
	"encoding/binary"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/netns"
)

// generation returns the nftables ruleset generation of a namespace: it grows
// by exactly one per committed transaction.
func generation(t testing.TB, ns *netns.NS) uint32 {
	t.Helper()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatalf("netlink: %v", err)
	}
	defer c.Close()
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	msgs, err := c.Execute(req)
	if err != nil {
		t.Fatalf("GETGEN: %v", err)
	}
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			t.Fatal(err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32()
			}
		}
	}
	t.Fatal("GETGEN reply without a generation")
	return 0
}

// kernelElements reads the elements of one of our sets of the ip table in a
// namespace.
func kernelElements(t testing.TB, ns *netns.NS, set string) []nftables.SetElement {
	t.Helper()
	return kernelElementsOf(t, ns, fam4, set)
}

// kernelElementsOf reads the elements of one of our sets of a family's table.
func kernelElementsOf(t testing.TB, ns *netns.NS, f *family, set string) []nftables.SetElement {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.FD()), nftables.WithSockOptions(raiseBuffers))
	if err != nil {
		t.Fatal(err)
	}
	elems, err := c.GetSetElements(&nftables.Set{Table: newTable(f), Name: set})
	if err != nil {
		t.Fatalf("read %s: %v", set, err)
	}
	return elems
}
