package cnitest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Addresses of the topology: the Node's address on the external side, an external
// client, and the ElasticIPs. Pods get 10.244.1.0/24 from host-local.
const (
	nodeExtAddr = "10.225.51.2"
	clientAddr  = "10.225.51.100"
	eipWeb      = "10.225.51.6"
	eipGateway  = "10.225.51.7"
	podSubnet   = "10.244.1.0/24"
	podNS       = "ns1"
	podName     = "web"
)

// fixture is one Node namespace with the ptp → juneau chain, an empty Pod namespace and
// a fake node agent.
type fixture struct {
	t        *testing.T
	node     *netns.NS
	pod      *netns.NS
	client   *netns.NS
	agent    *FakeAgent
	rt       *Runtime
	conf     *libcni.RuntimeConf
	stateDir string
	conflist []byte
}

func newFixture(t *testing.T, waitSeconds float64) *fixture {
	t.Helper()
	return newFixtureWith(t, ChainOptions{WaitSeconds: waitSeconds})
}

// newFixtureWith completes o (name, subnet, directories, agent socket) and builds the
// fixture around the chain.
func newFixtureWith(t *testing.T, o ChainOptions) *fixture {
	t.Helper()
	require.Root(t)
	require.Binary(t, "iptables") // ptp's ipMasq
	require.Binary(t, "ping")
	path := Plugins(t)
	if o.Bridge {
		path = append(path, BridgePlugin(t))
	}
	f := &fixture{t: t}
	f.node = netns.New(t, "node")
	f.pod = netns.New(t, "pod")
	f.agent = StartFakeAgent(t)
	dir := t.TempDir()
	f.stateDir = filepath.Join(dir, "state")
	logFile := filepath.Join(dir, "juneau.log")
	o.Name, o.Subnet, o.IPAMDataDir = netns.UniqueName("jtest"), podSubnet, filepath.Join(dir, "ipam")
	if o.Subnet6 != "" {
		// The Node routes IPv6 between its Pods and outside.
		f.node.Sysctl("net/ipv6/conf/all/forwarding", "1")
	}
	o.AgentSocket, o.StateDir, o.LogFile = f.agent.Socket, f.stateDir, logFile
	f.conflist = Chain(o)
	f.rt = NewRuntime(t, f.node, path, f.conflist)
	f.conf = PodConf(netns.UniqueName("ctr"), f.pod.Path(), podNS, podName, "uid-web")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("juneau plugin log:\n%s", b)
		}
	})
	return f
}

// withClient adds an external client namespace linked to the Node ("ext" on the Node,
// 10.225.51.2/24) that reaches the given ElasticIPs through the Node.
func (f *fixture) withClient(eips ...string) {
	f.t.Helper()
	f.client = netns.New(f.t, "cli")
	netns.Veth(f.node, "ext", f.client, "c0")
	f.node.Addr("ext", nodeExtAddr+"/24")
	f.client.Addr("c0", clientAddr+"/24")
	for _, eip := range eips {
		f.client.Route(eip+"/32", nodeExtAddr, "c0")
	}
}

// holding is a direct NIC that holds its ElasticIP.
func holding(iface, eip string) cniserver.Interface {
	return cniserver.Interface{Interface: iface, ElasticIP: iface + "-eip", Holds: true, Address: eip + "/32"}
}

// checkJuneau runs CHECK on juneau alone with the runtime's cached result, as libcni
// does for each plugin of the chain.
func (f *fixture) checkJuneau() error {
	f.t.Helper()
	var list struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(f.conflist, &list); err != nil {
		f.t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(list.Plugins[len(list.Plugins)-1], &conf); err != nil {
		f.t.Fatal(err)
	}
	conf["name"], conf["cniVersion"] = list.Name, list.CNIVersion
	b, _ := json.Marshal(conf)
	net, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.rt.in(func(ctx context.Context) error { return f.rt.CNI.CheckNetwork(ctx, net, f.conf) })
}

// addrs lists the IPv4 addresses of dev in ns.
func addrs(t *testing.T, ns *netns.NS, dev string) []netip.Prefix {
	t.Helper()
	return addrsOf(t, ns, dev, unix.AF_INET)
}

// addrsOf lists the addresses of a family of dev in ns, IPv6 link-local ones left out.
func addrsOf(t *testing.T, ns *netns.NS, dev string, family int) []netip.Prefix {
	t.Helper()
	list, err := ns.Netlink().AddrList(ns.Link(dev), family)
	if err != nil {
		t.Fatalf("%s: addresses of %s: %v", ns.Name, dev, err)
	}
	var out []netip.Prefix
	for _, a := range list {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if !ip.IsLinkLocalUnicast() {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out
}

// routes lists the IPv4 routes of dev in table (0: main) in ns.
func routes(t *testing.T, ns *netns.NS, dev string, table int) []netlink.Route {
	t.Helper()
	return routesOf(t, ns, dev, table, unix.AF_INET)
}

// routesOf lists the routes of a family of dev in table (0: main) in ns.
func routesOf(t *testing.T, ns *netns.NS, dev string, table, family int) []netlink.Route {
	t.Helper()
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	list, err := ns.Netlink().RouteListFiltered(family,
		&netlink.Route{LinkIndex: ns.Link(dev).Attrs().Index, Table: table}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("%s: routes of %s: %v", ns.Name, dev, err)
	}
	return list
}

// isOnLinkDefaultVia reports whether r is "default via gw onlink".
func isOnLinkDefaultVia(r netlink.Route, gw string) bool {
	isDefault := r.Dst == nil || r.Dst.String() == "0.0.0.0/0"
	return isDefault && r.Gw.Equal(net.ParseIP(gw)) && r.Flags&int(netlink.FLAG_ONLINK) != 0
}

// routeTo returns the Node's route to dst, if any.
func routeTo(t *testing.T, ns *netns.NS, dst string) (netlink.Route, bool) {
	t.Helper()
	_, ipn, _ := net.ParseCIDR(dst)
	list, err := ns.Netlink().RouteListFiltered(unix.AF_INET, &netlink.Route{Dst: ipn}, netlink.RT_FILTER_DST)
	if err != nil {
		t.Fatalf("%s: route to %s: %v", ns.Name, dst, err)
	}
	if len(list) == 0 {
		return netlink.Route{}, false
	}
	return list[0], true
}

func linkExists(ns *netns.NS, name string) bool {
	_, err := ns.Netlink().LinkByName(name)
	return err == nil
}

func ping(t *testing.T, from *netns.NS, dst string) {
	t.Helper()
	from.MustRun("ping", "-c", "1", "-W", "2", dst)
}

// cniError returns the CNI error a failed call ended with.
func cniError(t *testing.T, err error) *cnitypes.Error {
	t.Helper()
	var e *cnitypes.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	return e
}

func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// natRules returns the Node's iptables nat rules.
func natRules(t *testing.T, ns *netns.NS) string {
	t.Helper()
	return ns.MustRun("iptables", "-t", "nat", "-S")
}

// plainNS creates a namespace holding no file descriptor of it, so deleting it
// destroys it for real (with the veths inside), as when a runtime tears a sandbox
// down. It returns the bind-mount path and a delete function; cleanup deletes it if
// the test did not.
func plainNS(t *testing.T) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), netns.UniqueName("jnplain"))
	if err := netns.Create(path); err != nil {
		t.Fatalf("creating network namespace %s: %v", path, err)
	}
	del := func() {
		if err := netns.Delete(path); err != nil {
			t.Errorf("deleting network namespace %s: %v", path, err)
		}
	}
	t.Cleanup(del)
	return path, del
}
