package cnitest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/wait"

	juneaucni "github.com/loutres/juneau/pkg/node/cni"
	"github.com/loutres/juneau/pkg/node/cniserver"
	"github.com/loutres/juneau/test/netns"
)

// TestPrimaryNICCarriesElasticIP: eth0 names an ElasticIP. The Pod sees only the
// ElasticIP, routes through 169.254.0.1, is reachable from the Node and from outside,
// and DEL gives the primary plugin back what it needs for its own teardown. It runs
// with the configuration list versions primary CNIs write (kindnet, Calico and flannel
// still write 0.3.1 or 0.4.0), as the chain must speak the list's version throughout.
func TestPrimaryNICCarriesElasticIP(t *testing.T) {
	for _, v := range []string{"1.0.0", "0.4.0", "0.3.1"} {
		t.Run("cniVersion="+v, func(t *testing.T) { testPrimaryNICCarriesElasticIP(t, v) })
	}
}

func testPrimaryNICCarriesElasticIP(t *testing.T, cniVersion string) {
	f := newFixtureWith(t, ChainOptions{WaitSeconds: 5, CNIVersion: cniVersion})
	f.withClient(eipWeb)
	f.agent.Set(podNS, podName, holding("eth0", eipWeb))
	f.requireSupports(cniVersion)

	raw, err := f.rt.AddRaw(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	res := f.requireEIPResult(raw, cniVersion)
	hostVeth := res.Interfaces[0].Name

	// Inside the Pod: only the ElasticIP, and the on-link default route.
	if got := addrs(t, f.pod, "eth0"); !reflect.DeepEqual(got, []netip.Prefix{netip.MustParsePrefix(eipWeb + "/32")}) {
		t.Errorf("eth0 addresses = %v, want only %s/32", got, eipWeb)
	}
	// Only the on-link default route leads anywhere; the /32's own prefix route (which
	// the kernel omits for a /32) is there for the primary plugin's CHECK.
	var others []netlink.Route
	defaults := 0
	for _, r := range routes(t, f.pod, "eth0", 0) {
		switch {
		case isOnLinkDefaultVia(r, "169.254.0.1"):
			defaults++
		case r.Dst.String() == eipWeb+"/32" && r.Gw == nil:
		default:
			others = append(others, r)
		}
	}
	if defaults != 1 || len(others) != 0 {
		t.Errorf("eth0 routes: %d default via 169.254.0.1 onlink (want 1), others %v (want none)", defaults, others)
	}
	// On the Node: <EIP>/32 to the Pod's host end.
	if r, ok := routeTo(t, f.node, eipWeb+"/32"); !ok || r.LinkIndex != f.node.Link(hostVeth).Attrs().Index {
		t.Errorf("node route to %s = %v (found %v), want dev %s", eipWeb, r, ok, hostVeth)
	}

	ping(t, f.node, eipWeb)       // the Node reaches the Pod
	ping(t, f.pod, nodeExtAddr)   // the Pod reaches the Node's other address via 169.254.0.1
	ping(t, f.client, eipWeb)     // outside → Node → Pod, replies from the ElasticIP
	ping(t, f.pod, "169.254.0.1") // the host end answers for the gateway
	if mac, ok := f.pod.Neighbour("eth0", "169.254.0.1"); !ok || mac.String() != f.node.MAC(hostVeth).String() {
		t.Errorf("gateway neighbour = %v (%v), want the host end's MAC %v", mac, ok, f.node.MAC(hostVeth))
	}

	// eth0 carries the ElasticIP: the Pod has no address of its own to report.
	plumbed, _ := f.agent.Reports()
	if len(plumbed) != 1 || len(plumbed[0].Interfaces) != 1 ||
		plumbed[0].Interfaces[0].HostInterface != hostVeth || plumbed[0].Interfaces[0].Address != eipWeb+"/32" ||
		plumbed[0].ContainerID != f.conf.ContainerID || plumbed[0].Pod != podName || len(plumbed[0].Addresses) != 0 {
		t.Errorf("plumbed reports = %+v, want eth0 %s/32 on %s and no Pod address", plumbed, eipWeb, hostVeth)
	}

	f.checkDetectsMissingEIP(cniVersion)

	// DEL twice; ptp's own DEL must find its address again to remove its masquerade rules.
	if !strings.Contains(natRules(t, f.node), "CNI-") {
		t.Fatal("ptp installed no masquerade rules; the DEL check below would prove nothing")
	}
	for i := range 2 {
		if err := f.rt.Del(f.conf); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if rules := natRules(t, f.node); strings.Contains(rules, "CNI-") {
		t.Errorf("masquerade rules left after DEL:\n%s", rules)
	}
	if linkExists(f.node, hostVeth) || linkExists(f.pod, "eth0") {
		t.Error("veth left after DEL")
	}
	if r, ok := routeTo(t, f.node, eipWeb+"/32"); ok {
		t.Errorf("node route left after DEL: %v", r)
	}
	if files := stateFiles(t, f.stateDir); len(files) != 0 {
		t.Errorf("state left after DEL: %v", files)
	}
	if _, unplumbed := f.agent.Reports(); len(unplumbed) != 1 || unplumbed[0].Interfaces[0].HostInterface != hostVeth {
		t.Errorf("unplumbed reports = %+v, want one for %s", unplumbed, hostVeth)
	}
}

// TestExtraNICCarriesElasticIP: an extra NIC ext0 with its own veth, policy routing so
// that replies from the ElasticIP leave through ext0, while eth0 keeps the cluster
// network.
func TestExtraNICCarriesElasticIP(t *testing.T) {
	f := newFixture(t, 5)
	f.withClient(eipGateway)
	f.agent.Set(podNS, podName, holding("ext0", eipGateway))

	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	// eth0 keeps its cluster address (still the Pod IP) and route.
	if len(res.IPs) != 1 || !netip.MustParsePrefix(podSubnet).Contains(netip.MustParseAddr(res.IPs[0].Address.IP.String())) {
		t.Fatalf("result ips = %v, want the Pod's cluster address", res.IPs)
	}
	if plumbed, _ := f.agent.Reports(); len(plumbed) != 1 || !slices.Equal(plumbed[0].Addresses, []string{res.IPs[0].Address.IP.String()}) {
		t.Errorf("plumbed reports = %+v, want the Pod's address %s (eth0 keeps it)", plumbed, res.IPs[0].Address.IP)
	}
	eth0 := addrs(t, f.pod, "eth0")
	if len(eth0) != 1 || eth0[0].String() != res.IPs[0].Address.String() {
		t.Errorf("eth0 addresses = %v, want %v", eth0, res.IPs[0].Address.String())
	}
	if !slices.ContainsFunc(routes(t, f.pod, "eth0", 0), func(r netlink.Route) bool {
		return (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.Equal(res.IPs[0].Gateway)
	}) {
		t.Errorf("eth0 lost its cluster default route: %v", routes(t, f.pod, "eth0", 0))
	}
	// ext0 and its host end are reported.
	n := len(res.Interfaces)
	if n != 4 || res.Interfaces[n-1].Name != "ext0" || res.Interfaces[n-1].Sandbox != f.pod.Path() ||
		!strings.HasPrefix(res.Interfaces[n-2].Name, "jn") || res.Interfaces[n-2].Sandbox != "" {
		t.Fatalf("result interfaces = %v, want the host end and ext0 appended", res.Interfaces)
	}
	hostEnd := res.Interfaces[n-2].Name

	// ext0: the ElasticIP, table T's default route, the rule.
	eip := netip.MustParseAddr(eipGateway)
	b := eip.As4()
	table := int(binary.BigEndian.Uint32(b[:]))
	if got := addrs(t, f.pod, "ext0"); len(got) != 1 || got[0].String() != eipGateway+"/32" {
		t.Errorf("ext0 addresses = %v, want %s/32", got, eipGateway)
	}
	rs := routes(t, f.pod, "ext0", table)
	if len(rs) != 1 || !isOnLinkDefaultVia(rs[0], "169.254.0.1") {
		t.Errorf("table %d routes = %v, want default via 169.254.0.1 dev ext0 onlink", table, rs)
	}
	if !hasRule(t, f.pod, eipGateway+"/32", table, 100) {
		t.Errorf("no rule from %s lookup %d priority 100", eipGateway, table)
	}
	if r, ok := routeTo(t, f.node, eipGateway+"/32"); !ok || r.LinkIndex != f.node.Link(hostEnd).Attrs().Index {
		t.Errorf("node route to %s = %v (found %v), want dev %s", eipGateway, r, ok, hostEnd)
	}

	// A client reaches the ElasticIP; the replies leave the Pod through ext0, not eth0.
	capExt := f.pod.Capture("ext0")
	capEth := f.pod.Capture("eth0")
	ping(t, f.client, eipGateway)
	isReply := func(fr netns.Frame) bool {
		p, ok := netns.ParseFrame(fr.Data)
		return ok && fr.Outgoing && p.Proto == netns.ProtoICMP &&
			p.Src == eip && p.Dst == netip.MustParseAddr(clientAddr)
	}
	if _, err := capExt.WaitFor(5*time.Second, isReply); err != nil {
		t.Errorf("no echo reply left through ext0: %v", err)
	}
	capEth.Stop()
	if slices.ContainsFunc(capEth.Frames(), isReply) {
		t.Error("an echo reply from the ElasticIP left through eth0")
	}
	ping(t, f.pod, f.nodeAddrOnPtp(res)) // eth0 still reaches the cluster side

	if err := f.rt.Check(f.conf); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	if err := f.pod.Netlink().RuleDel(rule(eipGateway+"/32", table, 100)); err != nil {
		t.Fatal(err)
	}
	if err := f.checkJuneau(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rule from %s/32 lookup %d priority 100 is missing", eipGateway, table)) {
		t.Errorf("juneau CHECK = %v, want it to name the missing rule", err)
	}

	for i := range 2 {
		if err := f.rt.Del(f.conf); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if linkExists(f.node, hostEnd) || linkExists(f.pod, "ext0") {
		t.Error("ext0's veth left after DEL")
	}
	if files := stateFiles(t, f.stateDir); len(files) != 0 {
		t.Errorf("state left after DEL: %v", files)
	}
}

// TestAddFailsWhileTheNICDoesNotHold: ADD waits, then fails naming the holder, so the
// runtime retries and the Pod does not start; the failed attempt cleans up with DEL.
func TestAddFailsWhileTheNICDoesNotHold(t *testing.T) {
	f := newFixture(t, 1)
	f.agent.Set(podNS, podName, cniserver.Interface{
		Interface: "eth0", ElasticIP: "web-eip",
		Waiting: `ElasticIP "web-eip" is used by NetworkInterface "old-web.eth0"`,
	})
	_, err := f.rt.Add(f.conf)
	if err == nil {
		t.Fatal("ADD succeeded although the NIC does not hold its ElasticIP")
	}
	e := cniError(t, err)
	if e.Code != cnitypes.ErrTryAgainLater || !strings.Contains(e.Msg, `eth0: ElasticIP "web-eip" is used by NetworkInterface "old-web.eth0"`) {
		t.Errorf("error = code %d %q, want code %d naming the holder", e.Code, e.Msg, cnitypes.ErrTryAgainLater)
	}
	if calls := f.agent.Calls(podNS, podName); calls < 2 {
		t.Errorf("the plugin asked %d times, want it to poll during the wait", calls)
	}
	if got := addrs(t, f.pod, "eth0"); len(got) != 1 || !netip.MustParsePrefix(podSubnet).Contains(got[0].Addr()) {
		t.Errorf("eth0 addresses after a failed ADD = %v, want the primary's untouched", got)
	}
	if err := f.rt.Del(f.conf); err != nil {
		t.Errorf("DEL after a failed ADD: %v", err)
	}

	// Without the node agent no Pod starts: juneau cannot tell whether it needs an
	// ElasticIP.
	f.agent.Stop()
	_, err = f.rt.Add(f.conf)
	if err == nil {
		t.Fatal("ADD succeeded without the node agent")
	}
	if e := cniError(t, err); e.Code != cnitypes.ErrTryAgainLater || !strings.Contains(e.Msg, "node agent at "+f.agent.Socket) {
		t.Errorf("error = code %d %q, want code %d naming the socket", e.Code, e.Msg, cnitypes.ErrTryAgainLater)
	}
	if err := f.rt.Del(f.conf); err != nil {
		t.Errorf("DEL without the node agent: %v", err)
	}
}

// TestAddSucceedsOnceTheNICHolds: the NIC starts holding during the wait.
func TestAddSucceedsOnceTheNICHolds(t *testing.T) {
	f := newFixture(t, 20)
	f.agent.Set(podNS, podName, cniserver.Interface{Interface: "eth0", ElasticIP: "web-eip", Waiting: "ElasticIP \"web-eip\" has no address yet"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		// Hand the address over once the plugin is seen waiting.
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return f.agent.Calls(podNS, podName) >= 2, nil
		})
		f.agent.Set(podNS, podName, holding("eth0", eipWeb))
	}()
	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if res.IPs[0].Address.String() != eipWeb+"/32" {
		t.Errorf("result ips = %v, want %s/32", res.IPs, eipWeb)
	}
	if calls := f.agent.Calls(podNS, podName); calls < 3 {
		t.Errorf("ADD returned after %d questions, want it to have waited", calls)
	}
}

// TestBridgedPrimaryIsRefused: on a bridged primary (the Pod's host end is a bridge
// port) eth0 cannot carry an ElasticIP; ADD says why instead of half-plumbing it.
func TestBridgedPrimaryIsRefused(t *testing.T) {
	f := newFixtureWith(t, ChainOptions{WaitSeconds: 5, Bridge: true})
	f.agent.Set(podNS, podName, holding("eth0", eipWeb))
	_, err := f.rt.Add(f.conf)
	if err == nil {
		t.Fatal("ADD succeeded on a bridged primary")
	}
	if msg := err.Error(); !strings.Contains(msg, `is a port of "cni0"`) || !strings.Contains(msg, "routed-veth") {
		t.Errorf("error %q does not explain the bridged primary", msg)
	}
	if got := addrs(t, f.pod, "eth0"); len(got) != 1 || !netip.MustParsePrefix(podSubnet).Contains(got[0].Addr()) {
		t.Errorf("eth0 addresses = %v, want the primary's untouched", got)
	}
	if err := f.rt.Del(f.conf); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

// TestDelAfterTheNamespaceIsGone: DEL succeeds when the runtime already destroyed the
// Pod's namespace, and nothing of the Pod is left on the Node.
func TestDelAfterTheNamespaceIsGone(t *testing.T) {
	f := newFixture(t, 5)
	path, destroy := plainNS(t)
	f.conf.NetNS = path
	f.agent.Set(podNS, podName, holding("eth0", eipWeb), holding("ext0", eipGateway))
	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	hostVeth, hostEnd := res.Interfaces[0].Name, juneaucni.HostVethName(f.conf.ContainerID, "ext0")
	if !linkExists(f.node, hostVeth) || !linkExists(f.node, hostEnd) {
		t.Fatalf("host ends %s, %s missing after ADD", hostVeth, hostEnd)
	}
	destroy()
	f.agent.Stop() // DEL never depends on the agent
	if err := f.rt.Del(f.conf); err != nil {
		t.Fatalf("DEL after the namespace is gone, with the agent down: %v", err)
	}
	if err := f.rt.Del(f.conf); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	// The kernel destroys a namespace asynchronously; its veths go with it.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, r1 := routeTo(t, f.node, eipWeb+"/32")
		_, r2 := routeTo(t, f.node, eipGateway+"/32")
		return !linkExists(f.node, hostVeth) && !linkExists(f.node, hostEnd) && !r1 && !r2, nil
	})
	if err != nil {
		t.Errorf("host ends or routes left after DEL: %v", err)
	}
	if files := stateFiles(t, f.stateDir); len(files) != 0 {
		t.Errorf("state left after DEL: %v", files)
	}
}

// TestHandoverKeepsTheNewHoldersRoute: the ElasticIP moves to a new Pod on the same
// Node before the old Pod is deleted; the old Pod's DEL must not take the new route.
func TestHandoverKeepsTheNewHoldersRoute(t *testing.T) {
	f := newFixture(t, 5)
	f.agent.Set(podNS, podName, holding("eth0", eipWeb))
	if _, err := f.rt.Add(f.conf); err != nil {
		t.Fatalf("ADD of the old Pod: %v", err)
	}
	newPod := netns.New(t, "pod2")
	f.agent.Set(podNS, "web2", holding("eth0", eipWeb))
	conf2 := PodConf(netns.UniqueName("ctr"), newPod.Path(), podNS, "web2", "uid-web2")
	res2, err := f.rt.Add(conf2)
	if err != nil {
		t.Fatalf("ADD of the new Pod: %v", err)
	}
	newHost := res2.Interfaces[0].Name
	if err := f.rt.Del(f.conf); err != nil {
		t.Fatalf("DEL of the old Pod: %v", err)
	}
	if r, ok := routeTo(t, f.node, eipWeb+"/32"); !ok || r.LinkIndex != f.node.Link(newHost).Attrs().Index {
		t.Errorf("node route to %s = %v (found %v), want it kept on the new Pod's %s", eipWeb, r, ok, newHost)
	}
	ping(t, f.node, eipWeb)
}

// TestNoDirectNICsPassesTheResultThrough: without direct NICs juneau prints the
// primary plugin's result unchanged and touches nothing.
func TestNoDirectNICsPassesTheResultThrough(t *testing.T) {
	f := newFixture(t, 5)
	res, err := f.rt.Add(f.conf)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if len(res.IPs) != 1 || !netip.MustParsePrefix(podSubnet).Contains(netip.MustParseAddr(res.IPs[0].Address.IP.String())) {
		t.Errorf("result ips = %v, want the Pod's cluster address", res.IPs)
	}
	if got := addrs(t, f.pod, "eth0"); len(got) != 1 || got[0].String() != res.IPs[0].Address.String() {
		t.Errorf("eth0 addresses = %v, want %s", got, res.IPs[0].Address.String())
	}
	if f.agent.Calls(podNS, podName) != 1 {
		t.Errorf("agent asked %d times, want once", f.agent.Calls(podNS, podName))
	}
	// The agent learns the Pod's address from the ADD, before the kubelet reports it.
	if plumbed, _ := f.agent.Reports(); len(plumbed) != 1 || len(plumbed[0].Interfaces) != 0 || plumbed[0].Pod != podName ||
		!slices.Equal(plumbed[0].Addresses, []string{res.IPs[0].Address.IP.String()}) {
		t.Errorf("plumbed reports = %+v, want one with the Pod's address %s and no NIC", plumbed, res.IPs[0].Address.IP)
	}

	// Byte for byte, through juneau alone: the output equals prevResult.
	res.CNIVersion = "1.0.0" // the version of the configuration, as the runtime passes it
	prev := mustJSONResult(t, res)
	out := f.execJuneau(t, "ADD", f.conf.ContainerID+"x", map[string]any{"prevResult": json.RawMessage(prev)})
	var got, want current.Result
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("juneau output %s: %v", out, err)
	}
	if err := json.Unmarshal(prev, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("juneau changed the result:\n got %s\nwant %s", out, prev)
	}
	if files := stateFiles(t, f.stateDir); len(files) != 0 {
		t.Errorf("state written without direct NICs: %v", files)
	}
	if err := f.rt.Del(f.conf); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

// TestStatusAndGC: STATUS reports the agent's socket; GC removes attachments the
// runtime no longer knows.
func TestStatusAndGC(t *testing.T) {
	f := newFixture(t, 5)
	f.agent.Set(podNS, podName, holding("ext0", eipGateway))
	if _, err := f.rt.Add(f.conf); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	hostEnd := juneaucni.HostVethName(f.conf.ContainerID, "ext0")
	if !linkExists(f.node, hostEnd) {
		t.Fatalf("host end %s missing", hostEnd)
	}
	f.execJuneau(t, "STATUS", "", map[string]any{"cniVersion": "1.1.0"})
	_, err := f.tryJuneau("STATUS", "", map[string]any{"cniVersion": "1.1.0", "agentSocket": "/nonexistent/juneau.sock"})
	if e := cniError(t, err); e.Code != cnitypes.ErrPluginNotAvailable {
		t.Errorf("STATUS without agent = %v, want code %d", e, cnitypes.ErrPluginNotAvailable)
	}

	// Another attachment of the network is still valid: GC keeps it.
	keep := map[string]any{"cniVersion": "1.1.0", "cni.dev/valid-attachments": []map[string]string{{"containerID": f.conf.ContainerID, "ifname": "eth0"}}}
	f.execJuneau(t, "GC", "", keep)
	if !linkExists(f.node, hostEnd) || len(stateFiles(t, f.stateDir)) != 1 {
		t.Fatal("GC removed a valid attachment")
	}
	f.execJuneau(t, "GC", "", map[string]any{"cniVersion": "1.1.0", "cni.dev/valid-attachments": []map[string]string{}})
	if linkExists(f.node, hostEnd) || len(stateFiles(t, f.stateDir)) != 0 {
		t.Error("GC left the stale attachment's host end or state")
	}
}
