package netns

import "testing"

// LAN is an external network in small: a client and two Nodes on one bridge. The
// bridge is br0 in Bridge; the client's eth0 hangs on its port pcli, the Nodes'
// ext0 on pn1 and pn2.
type LAN struct {
	Bridge, Client, Node1, Node2 *NS
}

// NewLAN builds a LAN whose client and Nodes hold the addresses given (CIDR). The
// namespaces' names end in suffix.
func NewLAN(t testing.TB, suffix, clientCIDR, node1CIDR, node2CIDR string) *LAN {
	t.Helper()
	l := &LAN{
		Bridge: New(t, "lan"+suffix), Client: New(t, "cli"+suffix),
		Node1: New(t, "n1"+suffix), Node2: New(t, "n2"+suffix),
	}
	l.Bridge.Bridge("br0")
	for _, p := range []struct {
		port string
		end  *NS
		dev  string
	}{{"pcli", l.Client, "eth0"}, {"pn1", l.Node1, "ext0"}, {"pn2", l.Node2, "ext0"}} {
		Veth(l.Bridge, p.port, p.end, p.dev)
		l.Bridge.SetMaster(p.port, "br0")
	}
	l.Client.Addr("eth0", clientCIDR)
	l.Node1.Addr("ext0", node1CIDR)
	l.Node2.Addr("ext0", node2CIDR)
	return l
}
