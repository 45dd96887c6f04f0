package nft

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Addresses of the two-node topology for in-cluster clients, besides those
// of topology_test.go (node A is nodeIP, the target Pod T is podIP behind
// it with the ElasticIP elasticIP).
const (
	nodeBIP    = "10.225.51.3"
	samePodIP  = "10.244.1.6" // Pod C, on node A beside T
	podBGW     = "10.244.2.1"
	otherPodIP = "10.244.2.7" // Pod D, on node B
	movedPodIP = "10.244.2.5" // T re-created on node B
)

// clusterTopology is two nodes on the external segment, each routing the
// other's Pod range through it, an external client, and Pods:
//
//	client .100 ──┐
//	node A .2 ────┼── segment ── node B .3
//	 ├─ T 10.244.1.5 (ElasticIP 10.225.51.5)   ├─ D 10.244.2.7
//	 └─ C 10.244.1.6                           └─ (T2 10.244.2.5, when T moves)
//
// Each node masquerades its Pods' traffic to outside its own Pod range, as
// the reference ptp plugin with ipMasq does (and as the e2e harness runs),
// so a Pod of another node reaches T from its node's address, by Pod IP as
// through the ElasticIP.
type clusterTopology struct {
	client, nodeA, nodeB *netns.NS
	target, same, other  *netns.NS
	progA, progB         *Programmer
	stateA, stateB       DesiredState
}

func newClusterTopology(t *testing.T) *clusterTopology {
	t.Helper()
	require.Root(t)
	require.Binary(t, "nft")
	require.Binary(t, "conntrack")
	seg := netns.New(t, "seg")
	seg.Bridge("br0")
	tp := &clusterTopology{client: netns.New(t, "cli"), nodeA: netns.New(t, "nodea"), nodeB: netns.New(t, "nodeb")}
	for i, n := range []struct {
		ns   *netns.NS
		dev  string
		addr string
	}{{tp.client, "eth0", clientIP}, {tp.nodeA, extIf, nodeIP}, {tp.nodeB, extIf, nodeBIP}} {
		port := fmt.Sprintf("p%d", i)
		netns.Veth(n.ns, n.dev, seg, port)
		seg.SetMaster(port, "br0")
		n.ns.Addr(n.dev, n.addr+"/24")
	}
	for _, n := range []*netns.NS{tp.nodeA, tp.nodeB} {
		n.Sysctl("net/ipv4/ip_forward", "1")
		n.MustDo(func() error { return sysctl.New().Apply(sysctl.ExternalInterface(extIf)) })
	}
	tp.nodeA.Route("10.244.2.0/24", nodeBIP, extIf)
	tp.nodeB.Route("10.244.1.0/24", nodeIP, extIf)
	// The node answering ARP for the ElasticIP is pkg/node/arp's business.
	tp.client.Neigh("eth0", elasticIP, tp.nodeA.MAC(extIf))

	tp.target = addPod(t, tp.nodeA, "vpod", podIP, podGW)
	tp.same = addPod(t, tp.nodeA, "vsame", samePodIP, podGW)
	tp.other = addPod(t, tp.nodeB, "vother", otherPodIP, podBGW)
	masqueradeLikePTP(t, tp.nodeA, "10.244.1.0/24")
	masqueradeLikePTP(t, tp.nodeB, "10.244.2.0/24")

	cfg := Config{ExternalInterface: extIf, ClusterCIDRs: prefixes("10.244.0.0/16", "10.96.0.0/12", nodeIP+"/32", nodeBIP+"/32")}
	eip := Mapping{ElasticIP: addr(elasticIP), PodIP: addr(podIP)}
	tp.stateA = DesiredState{Config: cfg, Mappings: []Mapping{eip}, InCluster: []Mapping{eip}}
	tp.stateB = DesiredState{Config: cfg, InCluster: []Mapping{eip}}
	tp.progA = NewProgrammer(Options{NetNS: tp.nodeA.FD()})
	tp.progB = NewProgrammer(Options{NetNS: tp.nodeB.FD()})
	return tp
}

func (tp *clusterTopology) sync(t *testing.T) {
	t.Helper()
	for _, s := range []struct {
		p  *Programmer
		st DesiredState
	}{{tp.progA, tp.stateA}, {tp.progB, tp.stateB}} {
		if err := s.p.Sync(context.Background(), s.st); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
}

// addPod adds a Pod behind node with a veth of its own: the Pod holds ip/32
// and routes everything through gw, an address of the node's end.
func addPod(t *testing.T, node *netns.NS, hostDev, ip, gw string) *netns.NS {
	t.Helper()
	pod := netns.New(t, "pod")
	netns.Veth(node, hostDev, pod, "eth0")
	node.Addr(hostDev, gw+"/32")
	node.Route(ip+"/32", "", hostDev)
	pod.Addr("eth0", ip+"/32")
	pod.Route(gw+"/32", "", "eth0")
	pod.Route("default", gw, "eth0")
	return pod
}

// masqueradeLikePTP installs what the reference ptp plugin with ipMasq
// does: traffic from the node's Pods to anywhere outside the node's own Pod
// range is masqueraded.
func masqueradeLikePTP(t *testing.T, node *netns.NS, podRange string) {
	t.Helper()
	rules := fmt.Sprintf(`table ip cnisim {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[1]s ip daddr != %[1]s counter masquerade
	}
}`, podRange)
	node.MustRun("nft", "-f", writeTemp(t, "cnisim.nft", rules))
}

// echoFrom sends one ICMP echo request from ns to dst and returns the source
// of the matching echo reply.
func echoFrom(t *testing.T, ns *netns.NS, dst string) string {
	t.Helper()
	var c *icmp.PacketConn
	ns.MustDo(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	defer c.Close()
	id := rand.N(1 << 16)
	req, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: 1, Data: []byte("juneau")}}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo(req, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
		t.Fatalf("echo request from %s to %s: %v", ns.Name, dst, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("echo reply from %s to %s: %v", dst, ns.Name, err)
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue // the echo request itself, when ns is the target
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == 1 {
			return from.String()
		}
	}
}

// podIPStream exchanges datagrams between a client and a server by Pod IP,
// one at a time, until stopped: the flow that must not notice anything.
type podIPStream struct {
	stop                chan struct{}
	done                sync.WaitGroup
	answered, failed    int
	firstErr            error
	clientPort, srvPort int
}

func startPodIPStream(t *testing.T, server, client *netns.NS, serverIP string, port int) *podIPStream {
	t.Helper()
	s := &podIPStream{stop: make(chan struct{}), srvPort: port}
	var srv, cl *net.UDPConn
	server.MustDo(func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	client.MustDo(func() (err error) {
		cl, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(serverIP), Port: port})
		return err
	})
	s.clientPort = cl.LocalAddr().(*net.UDPAddr).Port
	s.done.Go(func() {
		buf := make([]byte, 100)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP(buf[:n], from)
		}
	})
	s.done.Go(func() {
		defer srv.Close()
		defer cl.Close()
		buf := make([]byte, 100)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			msg := fmt.Sprintf("%d", i)
			_ = cl.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := cl.Write([]byte(msg)); err != nil {
				s.fail(err)
				continue
			}
			n, err := cl.Read(buf)
			if err != nil || string(buf[:n]) != msg {
				s.fail(fmt.Errorf("answer %q: %v", buf[:n], err))
				continue
			}
			s.answered++
			time.Sleep(5 * time.Millisecond) // a steady trickle, not a flood
		}
	})
	return s
}

func (s *podIPStream) fail(err error) {
	s.failed++
	if s.firstErr == nil {
		s.firstErr = err
	}
}

// finish stops the stream and fails the test unless every datagram was
// answered.
func (s *podIPStream) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	s.done.Wait()
	if s.failed > 0 || s.answered == 0 {
		t.Errorf("Pod-IP flow: %d answered, %d failed (first: %v)", s.answered, s.failed, s.firstErr)
	}
}

// conntrackLines returns the lines of `conntrack -L args...` in ns.
func conntrackLines(t *testing.T, ns *netns.NS, args ...string) []string {
	t.Helper()
	out, err := ns.Output("conntrack", append([]string{"-L"}, args...)...)
	if err != nil {
		t.Fatalf("conntrack -L %v in %s: %v\n%s", args, ns.Name, err, out)
	}
	var l []string
	for _, s := range lines(out) {
		if strings.HasPrefix(s, "conntrack v") || s == "" {
			continue // the summary on stderr
		}
		l = append(l, s)
	}
	return l
}

// TestInClusterClients: with the ElasticIP E of Pod T on node A known to
// both nodes, a Pod beside T, a Pod of node B, T itself (hairpin) and both
// nodes reach T through E over TCP, UDP and ICMP echo, and every answer
// comes from E. T sees what it sees when addressed by its Pod IP: the
// client's Pod IP beside it, node B's address for node B (whose Pods are
// masqueraded by the primary CNI, by Pod IP as through E), and its own
// ElasticIP when it reaches itself (a node sees its address towards the
// ElasticIP, the external interface's). Meanwhile a flow by Pod IP is not
// disturbed and its connection is not translated, and the external path
// stays out of conntrack on both nodes.
func TestInClusterClients(t *testing.T) {
	tp := newClusterTopology(t)
	tp.sync(t)
	stream := startPodIPStream(t, tp.target, tp.same, podIP, 7700)

	clients := []struct {
		name string
		ns   *netns.NS
		// seen is the client address T sees through the ElasticIP, byPodIP
		// the one it sees by its Pod IP ("": not applicable).
		seen, byPodIP string
	}{
		{"Pod on the same node", tp.same, samePodIP, samePodIP},
		{"Pod on the other node", tp.other, nodeBIP, nodeBIP},
		{"the target itself", tp.target, elasticIP, ""},
		// Node A picks its source address for the ElasticIP's route (the
		// external interface) before the translation, and for the Pod IP's
		// route the address of the Pod's veth.
		{"node A", tp.nodeA, nodeIP, podGW},
		{"node B", tp.nodeB, nodeBIP, nodeBIP},
	}
	for i, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			if saw := tcpExchange(t, tp.target, c.ns, 8000+i, elasticIP); saw != c.seen {
				t.Errorf("TCP: T saw %s, want %s", saw, c.seen)
			}
			saw, from := udpExchange(t, tp.target, c.ns, 5300+i, elasticIP)
			if saw != c.seen || from != elasticIP {
				t.Errorf("UDP: T saw %s (want %s), the answer came from %s (want %s)", saw, c.seen, from, elasticIP)
			}
			if from := echoFrom(t, c.ns, elasticIP); from != elasticIP {
				t.Errorf("ICMP echo answered by %s, want %s", from, elasticIP)
			}
			if c.byPodIP != "" {
				if saw := tcpExchange(t, tp.target, c.ns, 8100+i, podIP); saw != c.byPodIP {
					t.Errorf("TCP by Pod IP: T saw %s, want %s", saw, c.byPodIP)
				}
			}
		})
	}

	t.Run("external client, untracked", func(t *testing.T) {
		if saw := tcpExchange(t, tp.target, tp.client, 8200, elasticIP); saw != clientIP {
			t.Errorf("TCP: T saw %s, want the client %s", saw, clientIP)
		}
		if saw, from := udpExchange(t, tp.target, tp.client, 5400, elasticIP); saw != clientIP || from != elasticIP {
			t.Errorf("UDP: T saw %s, answer from %s", saw, from)
		}
		if from := echoFrom(t, tp.client, elasticIP); from != elasticIP {
			t.Errorf("ICMP echo answered by %s", from)
		}
		for _, n := range []*netns.NS{tp.nodeA, tp.nodeB} {
			for _, l := range conntrackLines(t, n) {
				if strings.Contains(l, "="+clientIP+" ") {
					t.Errorf("%s tracked an external flow: %s", n.Name, l)
				}
			}
		}
	})

	stream.finish(t)
	t.Run("Pod-IP flow not translated", func(t *testing.T) {
		tuple := fmt.Sprintf("src=%s dst=%s sport=%d dport=%d", samePodIP, podIP, stream.clientPort, stream.srvPort)
		reply := fmt.Sprintf("src=%s dst=%s sport=%d dport=%d", podIP, samePodIP, stream.srvPort, stream.clientPort)
		var found bool
		for _, l := range conntrackLines(t, tp.nodeA, "-p", "udp") {
			if strings.Contains(l, tuple) {
				found = true
				if !strings.Contains(l, reply) {
					t.Errorf("Pod-IP flow translated: %s", l)
				}
			}
		}
		if !found {
			t.Errorf("no conntrack entry %s on node A", tuple)
		}
		for _, nat := range []string{"--src-nat", "--dst-nat"} {
			for _, l := range conntrackLines(t, tp.nodeA, nat) {
				if strings.Contains(l, tuple) {
					t.Errorf("Pod-IP flow listed by conntrack %s: %s", nat, l)
				}
			}
		}
		// The flows through the ElasticIP, by contrast, were translated at
		// their origin.
		if l := conntrackLines(t, tp.nodeA, "--dst-nat", "-d", elasticIP); len(l) == 0 {
			t.Error("node A has no translated connection to the ElasticIP")
		}
		if l := conntrackLines(t, tp.nodeB, "--dst-nat", "-d", elasticIP); len(l) == 0 {
			t.Error("node B has no translated connection to the ElasticIP")
		}
	})
}

// udpNamed answers every datagram on port with name until the test ends.
func udpNamed(t *testing.T, ns *netns.NS, port int, name string) {
	t.Helper()
	var c *net.UDPConn
	ns.MustDo(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	var wg sync.WaitGroup
	t.Cleanup(func() { c.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 100)
		for {
			_, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDP([]byte(name), from)
		}
	})
}

// ask sends a datagram on c and returns the answer and its source.
func ask(c *net.UDPConn) (string, string, error) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("?")); err != nil {
		return "", "", err
	}
	buf := make([]byte, 100)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		return "", "", err
	}
	return string(buf[:n]), from.IP.String(), nil
}

// TestInClusterClientsFollowAMove: T's ElasticIP moves to a Pod T2 on node
// B (the Pod re-created there). A UDP client that keeps one socket, whose
// connection node A translated to T, reaches T2 after the sync: the
// clean-up running beside the syncs deleted the connection-tracking entries
// translated for the old Pod IP.
// New connections from both nodes, and the external client, reach T2 too.
func TestInClusterClientsFollowAMove(t *testing.T) {
	tp := newClusterTopology(t)
	tp.sync(t)
	// The agent runs the clean-up beside its syncs.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, p := range []*Programmer{tp.progA, tp.progB} {
		wg.Go(func() { _ = p.RunFlowCleanup(ctx) })
	}
	moved := addPod(t, tp.nodeB, "vmoved", movedPodIP, podBGW)
	const port = 5500
	udpNamed(t, tp.target, port, "T")
	udpNamed(t, moved, port, "T2")
	var c *net.UDPConn
	tp.same.MustDo(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(elasticIP), Port: port})
		return err
	})
	defer c.Close()
	if got, from, err := ask(c); err != nil || got != "T" || from != elasticIP {
		t.Fatalf("before the move: %q from %s, %v; want T from %s", got, from, err, elasticIP)
	}

	// The move, as the agents compute it: node A loses its mapping, node B
	// gains it, both learn the new Pod IP.
	eip := Mapping{ElasticIP: addr(elasticIP), PodIP: addr(movedPodIP)}
	tp.stateA.Mappings, tp.stateA.InCluster = nil, []Mapping{eip}
	tp.stateB.Mappings, tp.stateB.InCluster = []Mapping{eip}, []Mapping{eip}
	tp.sync(t)
	if st := tp.progA.LastSync(); st.Full || st.InClusterRemoved != 1 || st.InClusterAdded != 1 {
		t.Errorf("node A sync stats = %+v, want one in-cluster mapping re-pointed incrementally", st)
	}
	tp.client.Neigh("eth0", elasticIP, tp.nodeB.MAC(extIf))

	var got, from string
	var err error
	if werr := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, from, err = ask(c)
		return err == nil && got == "T2", nil
	}); werr != nil || from != elasticIP {
		t.Fatalf("after the move the same socket got %q from %s (%v), want T2 from %s", got, from, err, elasticIP)
	}
	for _, c := range []struct {
		name string
		ns   *netns.NS
	}{{"Pod on node A", tp.same}, {"Pod on node B", tp.other}, {"node A", tp.nodeA}, {"node B", tp.nodeB}, {"external client", tp.client}} {
		if echo := echoFrom(t, c.ns, elasticIP); echo != elasticIP {
			t.Errorf("%s: echo answered by %s", c.name, echo)
		}
		saw, from := udpExchange(t, moved, c.ns, port+1, elasticIP)
		if from != elasticIP || saw == "" {
			t.Errorf("%s: UDP to the moved Pod answered from %s (T2 saw %s)", c.name, from, saw)
		}
	}
	if l := conntrackLines(t, tp.nodeB, "-s", clientIP); len(l) != 0 {
		t.Errorf("node B tracked the external client: %v", l)
	}
}
