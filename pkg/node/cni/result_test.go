package cni

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

func prevResult(t *testing.T) *current.Result {
	t.Helper()
	r, err := current.NewResult([]byte(ptpPrevResult))
	if err != nil {
		t.Fatal(err)
	}
	res, err := current.GetResult(r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRewriteResultPrimary(t *testing.T) {
	prev := prevResult(t)
	before := mustJSON(t, prev)
	plans, err := buildPlan("c1", "eth0", nicsOf("eth0", "10.225.51.6/32"))
	if err != nil {
		t.Fatal(err)
	}
	plans[0].HostInterface = "veth1a2b3c4d"
	res, err := rewriteResult(prev, "eth0", "/var/run/netns/pod", []plumbed{{nicPlan: plans[0]}})
	if err != nil {
		t.Fatalf("rewriteResult: %v", err)
	}
	if mustJSON(t, prev) != before {
		t.Error("rewriteResult modified prevResult")
	}
	if len(res.IPs) != 1 {
		t.Fatalf("ips = %v, want only the ElasticIP", res.IPs)
	}
	ip := res.IPs[0]
	if ip.Address.String() != "10.225.51.6/32" || ip.Gateway.String() != "169.254.0.1" || ip.Interface == nil || *ip.Interface != 1 {
		t.Errorf("ip = %v, want 10.225.51.6/32 gw 169.254.0.1 on interface 1", ip)
	}
	if len(res.Routes) != 1 || res.Routes[0].Dst.String() != "0.0.0.0/0" || res.Routes[0].GW.String() != "169.254.0.1" || res.Routes[0].Table != nil {
		t.Errorf("routes = %v, want only default via 169.254.0.1", res.Routes)
	}
	if !reflect.DeepEqual(res.Interfaces, prev.Interfaces) || !reflect.DeepEqual(res.DNS, prev.DNS) {
		t.Errorf("interfaces or DNS changed: %v %v", res.Interfaces, res.DNS)
	}
}

func TestRewriteResultExtra(t *testing.T) {
	prev := prevResult(t)
	plans, err := buildPlan("c1", "eth0", nicsOf("ext0", "10.225.51.7/32"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rewriteResult(prev, "eth0", "/var/run/netns/pod",
		[]plumbed{{nicPlan: plans[0], PodMAC: "aa:00:00:00:00:02", HostMAC: "aa:00:00:00:00:01"}})
	if err != nil {
		t.Fatalf("rewriteResult: %v", err)
	}
	if len(res.Interfaces) != 4 {
		t.Fatalf("interfaces = %v, want 4", res.Interfaces)
	}
	host, pod := res.Interfaces[2], res.Interfaces[3]
	if host.Name != HostVethName("c1", "ext0") || host.Sandbox != "" || host.Mac != "aa:00:00:00:00:01" {
		t.Errorf("host interface = %v", host)
	}
	if pod.Name != "ext0" || pod.Sandbox != "/var/run/netns/pod" || pod.Mac != "aa:00:00:00:00:02" {
		t.Errorf("pod interface = %v", pod)
	}
	// eth0 keeps its cluster address and routes: it stays the Pod IP.
	if !reflect.DeepEqual(res.IPs, prev.IPs) || !reflect.DeepEqual(res.Routes, prev.Routes) {
		t.Errorf("ips %v / routes %v changed, want the primary's %v / %v", res.IPs, res.Routes, prev.IPs, prev.Routes)
	}
}

func TestRewriteResultNeedsPrimaryInterface(t *testing.T) {
	prev := prevResult(t)
	plans, err := buildPlan("c1", "net1", nicsOf("net1", "10.225.51.6/32"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rewriteResult(prev, "net1", "/var/run/netns/pod", []plumbed{{nicPlan: plans[0]}}); err == nil {
		t.Error("no error for a result without the primary interface")
	}
}

func TestStateRoundTrip(t *testing.T) {
	store := stateStore{dir: t.TempDir()}
	if st, err := store.load("c1", "eth0"); err != nil || st != nil {
		t.Fatalf("load of a missing state = %v, %v", st, err)
	}
	plans, err := buildPlan("c1", "eth0", append(nicsOf("eth0", "10.225.51.6/32"), nicsOf("ext0", "10.225.51.7/32")...))
	if err != nil {
		t.Fatal(err)
	}
	st := &attachmentState{Network: "k8s", ContainerID: "c1", IfName: "eth0", Namespace: "ns", Pod: "web", UID: "u"}
	for _, p := range plans {
		st.NICs = append(st.NICs, p.state())
	}
	st.NICs[0].ReplacedAddresses = []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")}
	if err := store.save(st); err != nil {
		t.Fatalf("save: %v", err)
	}
	got, err := store.load("c1", "eth0")
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("load = %+v, %v; want %+v", got, err, st)
	}
	if back := got.NICs[1].plan(); !reflect.DeepEqual(back, plans[1]) {
		t.Errorf("plan from state = %+v, want %+v", back, plans[1])
	}
	all, err := store.list()
	if err != nil || len(all) != 1 {
		t.Errorf("list = %v, %v", all, err)
	}
	if err := store.remove("c1", "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := store.remove("c1", "eth0"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if st, _ := store.load("c1", "eth0"); st != nil {
		t.Error("state still there after remove")
	}
	if _, err := store.path("../x", "eth0"); err == nil {
		t.Error("a container ID with a slash names a state file")
	}
}

func TestPlumbedInterface(t *testing.T) {
	plans, err := buildPlan("c1", "eth0", nicsOf("ext0", "10.225.51.7/32"))
	if err != nil {
		t.Fatal(err)
	}
	pi := plans[0].state().plumbedInterface()
	if pi.Address != "10.225.51.7/32" || pi.HostInterface != HostVethName("c1", "ext0") ||
		len(pi.Routes) != 1 || pi.Routes[0].Gateway != "169.254.0.1" || pi.Routes[0].Table != 0x0ae13307 ||
		len(pi.Rules) != 1 || pi.Rules[0].Priority != 100 {
		t.Errorf("plumbedInterface = %+v", pi)
	}
}

const dualStackResult6 = `{
  "cniVersion": "1.0.0",
  "interfaces": [
    {"name": "veth1a2b3c4d", "mac": "aa:bb:cc:00:00:01"},
    {"name": "eth0", "mac": "aa:bb:cc:00:00:02", "sandbox": "/var/run/netns/pod"}
  ],
  "ips": [{"interface": 1, "address": "10.244.1.5/24", "gateway": "10.244.1.1"},
          {"interface": 1, "address": "fd00:10:244:1::5/64", "gateway": "fd00:10:244:1::1"}],
  "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.1.1"}, {"dst": "::/0", "gw": "fd00:10:244:1::1"}]
}`

// TestRewriteResultIPv6: an IPv6 ElasticIP on eth0 of a dual-stack Pod replaces the
// IPv6 Pod IP in its place, behind fe80::1, and the IPv6 routes; the IPv4 address and
// routes stay, so the Pod's first IP keeps its family.
func TestRewriteResultIPv6(t *testing.T) {
	r, err := current.NewResult([]byte(dualStackResult6))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := current.GetResult(r)
	if err != nil {
		t.Fatal(err)
	}
	plans, err := buildPlan("c1", "eth0", nicsOf("eth0", "2001:db8::6/128"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rewriteResult(prev, "eth0", "/var/run/netns/pod", []plumbed{{nicPlan: plans[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 2 || res.IPs[0].Address.String() != "10.244.1.5/24" ||
		res.IPs[1].Address.String() != "2001:db8::6/128" || res.IPs[1].Gateway.String() != "fe80::1" {
		t.Errorf("ips = %v, want the IPv4 Pod IP, then the ElasticIP via fe80::1", res.IPs)
	}
	if len(res.Routes) != 2 || res.Routes[0].Dst.String() != "0.0.0.0/0" || res.Routes[1].Dst.String() != "::/0" || res.Routes[1].GW.String() != "fe80::1" {
		t.Errorf("routes = %v", res.Routes)
	}
}
