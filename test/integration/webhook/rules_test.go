package webhook

import (
	"strings"
	"testing"

	"github.com/loutres/juneau/test/framework"
)

// step is one action of a case: a manifest to apply, kubectl arguments, or a function.
type step struct {
	apply string
	args  []string
	fn    func(e *env)
}

func apply(manifest string) step { return step{apply: manifest} }

func kubectl(args ...string) step { return step{args: args} }

func do(fn func(e *env)) step { return step{fn: fn} }

func (s step) run(e *env) framework.KubectlResult {
	switch {
	case s.fn != nil:
		s.fn(e)
		return framework.KubectlResult{}
	case s.args != nil:
		return e.kubectl("", append([]string(nil), s.args...)...)
	}
	return e.kubectl(s.apply, "apply", "-f", "-")
}

// ruleCase: after setup, bad is refused with a message containing every want (the
// field path and the object in the way); then every good step succeeds.
type ruleCase struct {
	name  string
	setup []step
	bad   step
	want  []string
	good  []step
}

func runCases(t *testing.T, cp *framework.ControlPlane, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cp)
			e.forceDeletePodsAtEnd()
			for i, s := range tc.setup {
				if r := s.run(e); r.Err != nil {
					t.Fatalf("setup step %d: %v", i, r.Err)
				}
			}
			r := tc.bad.run(e)
			if r.Err == nil {
				t.Fatalf("accepted, want refused with %q\n%s", tc.want, r.Stdout)
			}
			t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
			for _, w := range tc.want {
				if w = e.expand(w); !strings.Contains(r.Stderr, w) {
					t.Errorf("the refusal lacks %q:\n%s", w, r.Stderr)
				}
			}
			for i, s := range tc.good {
				if r := s.run(e); r.Err != nil {
					t.Errorf("valid variant %d refused: %v", i, r.Err)
				}
			}
		})
	}
}

func TestRules(t *testing.T) {
	cp := framework.Shared(t)
	runningWebhook(t, cp)
	for _, kind := range []struct {
		name  string
		cases []ruleCase
	}{
		{"AddressPool", addressPoolCases()},
		{"ExternalNetwork", externalNetworkCases()},
		{"ElasticIP", elasticIPCases()},
		{"ElasticIPAttachment", attachmentCases()},
		{"Pod", podCases()},
		{"NetworkInterface", networkInterfaceCases()},
		{"ARPAdvertisement", advertisementCases()},
		{"BGPAdvertisement", bgpAdvertisementCases()},
		{"BGPPeer", bgpPeerCases()},
		{"AllocationClaim", claimCases()},
	} {
		t.Run(kind.name, func(t *testing.T) { runCases(t, cp, kind.cases) })
	}
}

func addressPoolCases() []ruleCase {
	return []ruleCase{
		{name: "entry format", bad: apply(poolY("$P-a", "arp", "10.225.$O.1/24")),
			want: []string{"spec.addresses[0]", `"10.225.$O.0/24"`},
			good: []step{apply(poolY("$P-a", "arp", "10.225.$O.0/24"))}},
		{name: "overlap with another pool", setup: []step{apply(poolY("$P-a", "arp", "10.225.$O.0/25"))},
			bad:  apply(poolY("$P-b", "bgp", "10.225.$O.200", "10.225.$O.100-10.225.$O.130")),
			want: []string{"spec.addresses[1]", `AddressPool "$P-a"`},
			good: []step{apply(poolY("$P-b", "bgp", "10.225.$O.200", "10.225.$O.128-10.225.$O.130"))}},
		{name: "Node address inside", setup: []step{do(func(e *env) { e.node("$P-node", "10.225.$O.9") })},
			bad:  apply(poolY("$P-a", "arp", "10.225.$O.0/24")),
			want: []string{"spec.addresses[0]", `10.225.$O.9 of Node "$P-node"`},
			good: []step{apply(poolY("$P-a", "arp", "10.225.$O.16/28"))}},
		{name: "append-only", setup: []step{apply(poolY("$P-a", "arp", "10.225.$O.0/28", "10.225.$O.16/28"))},
			bad:  apply(poolY("$P-a", "arp", "10.225.$O.16/28", "10.225.$O.0/28")),
			want: []string{"spec.addresses[0]", "appended"},
			good: []step{apply(poolY("$P-a", "arp", "10.225.$O.0/28", "10.225.$O.16/28", "10.225.$O.32/28"))}},
		{name: "one family per pool", bad: apply(poolY("$P-a", "arp", "fd00:225:$O::/64", "10.225.$O.0/24")),
			want: []string{"spec.addresses[1]", `is IPv4 but spec.addresses[0] "fd00:225:$O::/64" is IPv6`},
			good: []step{apply(poolY("$P-a", "arp", "fd00:225:$O::/64") + poolY("$P-b", "arp", "10.225.$O.0/24"))}},
		{name: "IPv6 overlap with another pool", setup: []step{apply(poolY("$P-a", "arp", "fd00:225:$O::/64"))},
			bad:  apply(poolY("$P-b", "arp", "fd00:225:$O::5-fd00:225:$O::9")),
			want: []string{"spec.addresses[0]", `AddressPool "$P-a"`},
			good: []step{apply(poolY("$P-b", "arp", "fd00:225:$O:1::5-fd00:225:$O:1::9"))}},
		{name: "IPv6 bgp pool, one family", bad: apply(poolY("$P-a", "bgp", "fd00:225:$O::/64", "10.225.$O.0/24")),
			want: []string{"spec.addresses[1]", `is IPv4 but spec.addresses[0] "fd00:225:$O::/64" is IPv6`},
			good: []step{apply(poolY("$P-a", "bgp", "fd00:225:$O::/64"))}},
		{name: "advertiseMode immutable", setup: []step{apply(poolY("$P-a", "arp", "10.225.$O.0/28"))},
			bad:  apply(poolY("$P-a", "bgp", "10.225.$O.0/28")),
			want: []string{"spec.advertiseMode", "immutable"},
			good: []step{kubectl("label", "addresspool", "$P-a", "tier=gold")}},
	}
}

func externalNetworkCases() []ruleCase {
	return []ruleCase{
		{name: "pool name format", bad: apply(netY("$P-net", "arp", "Bad_Pool")),
			want: []string{"spec.addressPools[0]", "Bad_Pool"}},
		{name: "pool exists", bad: apply(netY("$P-net", "arp", "$P-missing")),
			want: []string{"spec.addressPools[0]", `AddressPool "$P-missing" does not exist`},
			good: []step{apply(poolY("$P-missing", "arp", "10.225.$O.0/24") + netY("$P-net", "arp", "$P-missing"))}},
		{name: "pool mode matches type", setup: []step{apply(poolY("$P-b", "bgp", "10.225.$O.0/24"))},
			bad:  apply(netY("$P-net", "arp", "$P-b")),
			want: []string{"spec.addressPools[0]", `AddressPool "$P-b" has advertiseMode "bgp"`},
			good: []step{apply(netY("$P-net", "bgp", "$P-b"))}},
		{name: "one network per pool", setup: []step{apply(arpNet())},
			bad:  apply(netY("$P-other", "arp", "$P-pool")),
			want: []string{"spec.addressPools[0]", `ExternalNetwork "$P-net"`},
			good: []step{apply(poolY("$P-pool2", "arp", "10.226.$O.0/24") + netY("$P-other", "arp", "$P-pool2"))}},
		{name: "append-only", setup: []step{apply(arpNet() + poolY("$P-pool2", "arp", "10.226.$O.0/24"))},
			bad:  apply(netY("$P-net", "arp", "$P-pool2", "$P-pool")),
			want: []string{"spec.addressPools"},
			good: []step{apply(netY("$P-net", "arp", "$P-pool", "$P-pool2"))}},
		{name: "type immutable", setup: []step{apply(arpNet())},
			bad:  apply(netY("$P-net", "bgp", "$P-pool")),
			want: []string{"spec.type", "immutable"}},
		{name: "deletion while ElasticIPs use it", setup: []step{apply(arpNet() + eipY("b-eip", "$P-net", "") + eipY("a-eip", "$P-net", ""))},
			bad:  kubectl("delete", "externalnetwork", "$P-net"),
			want: []string{`ElasticIPs "$NS/a-eip", "$NS/b-eip"`, "spec.externalNetwork"},
			good: []step{kubectl("delete", "elasticip", "a-eip", "b-eip"), kubectl("delete", "externalnetwork", "$P-net")}},
	}
}

func elasticIPCases() []ruleCase {
	return []ruleCase{
		{name: "network exists", bad: apply(eipY("e", "$P-none", "")),
			want: []string{"spec.externalNetwork", `ExternalNetwork "$P-none" does not exist`},
			good: []step{apply(arpNet() + eipY("e", "$P-net", ""))}},
		{name: "requestedIP format", setup: []step{apply(arpNet())},
			bad:  apply(eipY("e", "$P-net", "10.225.$O.07")),
			want: []string{"spec.requestedIP"}},
		{name: "requestedIP inside the pools", setup: []step{apply(poolY("$P-pool", "arp", "10.225.$O.0/28") + netY("$P-net", "arp", "$P-pool"))},
			bad:  apply(eipY("e", "$P-net", "10.225.$O.100")),
			want: []string{"spec.requestedIP", `ExternalNetwork "$P-net"`},
			good: []step{apply(eipY("e", "$P-net", "10.225.$O.5"))}},
		{name: "requestedIP already reserved", setup: []step{apply(arpNet() + claimY("10.225.$O.5", "$P-pool", "elsewhere", "holder", "uid-holder"))},
			bad:  apply(eipY("e", "$P-net", "10.225.$O.5")),
			want: []string{"spec.requestedIP", "reserved by an ElasticIP of another namespace"},
			good: []step{apply(eipY("e", "$P-net", "10.225.$O.6"))}},
		{name: "requestedIP of the ElasticIP's family", setup: []step{apply(dualNet())},
			bad:  apply(eipY("e", "$P-net", "fd00:225:$O::5")),
			want: []string{"spec.requestedIP", "is an IPv6 address but spec.ipFamily is IPv4"},
			good: []step{apply(eip6Y("e", "$P-net", "fd00:225:$O::5"))}},
		{name: "IPv6 requestedIP already reserved", setup: []step{apply(dualNet() + claimY("fd00:225:$O::5", "$P-pool6", "elsewhere", "holder", "uid-holder"))},
			bad:  apply(eip6Y("e", "$P-net", "fd00:225:$O::5")),
			want: []string{"spec.requestedIP", "reserved by an ElasticIP of another namespace", `AllocationClaim "fd00-225-$O--5"`},
			good: []step{apply(eip6Y("e", "$P-net", "fd00:225:$O::6"))}},
		{name: "ipFamily immutable", setup: []step{apply(dualNet() + eipY("e", "$P-net", ""))},
			bad:  apply(eip6Y("e", "$P-net", "")),
			want: []string{"spec.ipFamily", "immutable"}},
		{name: "externalNetwork immutable", setup: []step{apply(arpNet() + eipY("e", "$P-net", ""))},
			bad:  apply(eipY("e", "$P-other", "")),
			want: []string{"spec.externalNetwork", "immutable"}},
		{name: "deletion while attached", setup: []step{apply(arpNet() + eipY("e", "$P-net", "") + podY("web", nil, nil) + attY("web-nat", "e", "web.eth0"))},
			bad:  kubectl("delete", "elasticip", "e"),
			want: []string{`ElasticIPAttachment "web-nat"`, "spec.elasticIPRef.name"},
			good: []step{kubectl("delete", "elasticipattachment", "web-nat"), kubectl("delete", "elasticip", "e")}},
	}
}

func attachmentCases() []ruleCase {
	base := apply(arpNet() + eipY("e", "$P-net", "") + eipY("e2", "$P-net", "") + podY("web", nil, nil) + podY("api", nil, nil))
	return []ruleCase{
		{name: "ElasticIP exists", setup: []step{base},
			bad:  apply(attY("att", "missing", "web.eth0")),
			want: []string{"spec.elasticIPRef.name", `ElasticIP "missing" does not exist`},
			good: []step{apply(attY("att", "e", "web.eth0"))}},
		{name: "same namespace", setup: []step{base},
			bad:  apply(attY("att", "other/e", "web.eth0")),
			want: []string{"spec.elasticIPRef.name", "same namespace"}},
		{name: "NetworkInterface exists", setup: []step{base},
			bad:  apply(attY("att", "e", "ghost.eth0")),
			want: []string{"spec.targetRef.networkInterfaceName", `NetworkInterface "ghost.eth0" does not exist`, `Pod "ghost"`},
			good: []step{apply(nicY("ghost", "eth0", "uid-ghost", "") + attY("att", "e", "ghost.eth0"))}},
		{name: "ElasticIP used directly by a NetworkInterface", setup: []step{base, apply(nicY("db", "eth0", "uid-db", "e"))},
			bad:  apply(attY("att", "e", "web.eth0")),
			want: []string{"spec.elasticIPRef.name", `NetworkInterface "db.eth0"`},
			good: []step{apply(attY("att", "e2", "web.eth0"))}},
		{name: "ElasticIP named by a Pod whose NIC is pending", setup: []step{base, apply(directPod("db", "e"))},
			bad:  apply(attY("att", "e", "web.eth0")),
			want: []string{"spec.elasticIPRef.name", `Pod "db"`}},
		{name: "NetworkInterface carries an ElasticIP directly", setup: []step{base, apply(nicY("gw", "eth0", "uid-gw", "e2"))},
			bad:  apply(attY("att", "e", "gw.eth0")),
			want: []string{"spec.targetRef.networkInterfaceName", `NetworkInterface "gw.eth0" carries ElasticIP "e2" directly`}},
		{name: "one attachment per ElasticIP", setup: []step{base, apply(attY("first", "e", "api.eth0"))},
			bad:  apply(attY("second", "e", "web.eth0")),
			want: []string{"spec.elasticIPRef.name", `ElasticIPAttachment "first"`},
			good: []step{apply(attY("second", "e2", "web.eth0"))}},
		{name: "one attachment per NetworkInterface", setup: []step{base, apply(attY("first", "e", "api.eth0"))},
			bad:  apply(attY("second", "e2", "api.eth0")),
			want: []string{"spec.targetRef.networkInterfaceName", `ElasticIPAttachment "first"`}},
		{name: "immutable", setup: []step{base, apply(attY("att", "e", "web.eth0"))},
			bad:  apply(attY("att", "e2", "web.eth0")),
			want: []string{"spec"},
			good: []step{kubectl("label", "elasticipattachment", "att", "tier=gold")}},
	}
}

func podCases() []ruleCase {
	base := apply(arpNet() + eipY("e", "$P-net", "") + eipY("e2", "$P-net", ""))
	return []ruleCase{
		{name: "annotation grammar",
			bad:  apply(podY("web", []string{`juneau.loutres.me/networks: '[{"interface":"ext0","elasticIP":"e"},{"interface":"ext0"}]'`}, nil)),
			want: []string{"metadata.annotations[juneau.loutres.me/networks][1].interface"},
			good: []step{apply(podY("web", []string{`juneau.loutres.me/networks: '[{"interface":"ext0","elasticIP":"e"}]'`}, nil))}},
		{name: "compatibility annotation grammar",
			bad:  apply(podY("web", []string{`network.alibabacloud.com/pod-with-eip: "yes"`}, nil)),
			want: []string{"metadata.annotations[network.alibabacloud.com/pod-with-eip]"},
			good: []step{apply(podY("web", []string{`network.alibabacloud.com/pod-with-eip: "true"`}, nil))}},
		{name: "ElasticIP attached by NAT", setup: []step{base, apply(podY("api", nil, nil) + attY("api-nat", "e", "api.eth0"))},
			bad:  apply(directPod("web", "e")),
			want: []string{"metadata.annotations[juneau.loutres.me/elastic-ip]", `ElasticIPAttachment "api-nat"`},
			good: []step{apply(directPod("web", "e2"))}},
		{name: "ElasticIP held by a running Pod", setup: []step{base, apply(directPod("old", "e")),
			do(func(e *env) { e.mustApply(nicY("old", "eth0", e.podUID("old"), "e")) })},
			bad:  apply(directPod("web", "e")),
			want: []string{"metadata.annotations[juneau.loutres.me/elastic-ip]", `NetworkInterface "old.eth0" of running Pod "old"`},
			// Once the holder is Terminating, the new Pod is accepted and waits.
			good: []step{kubectl("delete", "pod", "old", "--wait=false"), apply(directPod("web", "e"))}},
		{name: "direct-use annotation added to an existing Pod", setup: []step{base, apply(podY("web", nil, nil))},
			bad: kubectl("annotate", "pod", "web", "juneau.loutres.me/elastic-ip=e"),
			want: []string{"metadata.annotations[juneau.loutres.me/elastic-ip]", "cannot be added to an existing Pod",
				"delete the Pod and create it again"},
			good: []step{kubectl("annotate", "pod", "web", "example.com/note=x")}},
		{name: "direct-use annotation changed on an existing Pod", setup: []step{base, apply(directPod("web", "e"))},
			bad:  kubectl("annotate", "--overwrite", "pod", "web", "juneau.loutres.me/elastic-ip=e2"),
			want: []string{"metadata.annotations[juneau.loutres.me/elastic-ip]", "cannot be changed on an existing Pod"},
			good: []step{kubectl("annotate", "pod", "web", "juneau.loutres.me/eip-bandwidth=100")}},
		// The Pod left without any juneau annotation still reaches the webhook.
		{name: "direct-use annotation removed from an existing Pod", setup: []step{base, apply(directPod("web", "e"))},
			bad:  kubectl("annotate", "pod", "web", "juneau.loutres.me/elastic-ip-"),
			want: []string{"metadata.annotations[juneau.loutres.me/elastic-ip]", "cannot be removed from an existing Pod"},
			good: []step{kubectl("label", "pod", "web", "tier=gold")}},
		{name: "same allocationIdentity takes over", setup: []step{base,
			apply(podY("launcher-a", []string{"juneau.loutres.me/elastic-ip: e"}, []string{"kubevirt.io: virt-launcher", "vm.kubevirt.io/name: vm1"})),
			do(func(e *env) {
				e.mustApply(nicY("launcher-a", "eth0", e.podUID("launcher-a"), "e") + "  allocationIdentity: vmi.vm1\n")
			})},
			bad:  apply(podY("other-vm", []string{"juneau.loutres.me/elastic-ip: e"}, []string{"kubevirt.io: virt-launcher", "vm.kubevirt.io/name: vm2"})),
			want: []string{`Pod "launcher-a"`},
			good: []step{apply(podY("launcher-b", []string{"juneau.loutres.me/elastic-ip: e"}, []string{"kubevirt.io: virt-launcher", "vm.kubevirt.io/name: vm1"}))}},
	}
}

func networkInterfaceCases() []ruleCase {
	return []ruleCase{
		{name: "named after Pod and interface",
			bad:  apply(strings.Replace(nicY("web", "eth0", "uid-web", ""), "name: web.eth0", "name: web.eth1", 1)),
			want: []string{"metadata.name", `"web.eth0"`},
			// A NIC naming a taken ElasticIP is accepted: it waits Pending.
			good: []step{apply(nicY("holder", "eth0", "uid-holder", "e") + nicY("web", "eth0", "uid-web", "e"))}},
		{name: "elasticIP immutable", setup: []step{apply(nicY("web", "eth0", "uid-web", "e"))},
			bad:  apply(nicY("web", "eth0", "uid-web", "e2")),
			want: []string{"elasticIP", "immutable"}},
	}
}

func advertisementCases() []ruleCase {
	base := []step{apply(arpNet() + poolY("$P-bgp", "bgp", "10.226.$O.0/24") + netY("$P-bgpnet", "bgp", "$P-bgp")),
		do(func(e *env) { e.node("$P-n1", "10.227.$O.1"); e.node("$P-n2", "10.227.$O.2") })}
	return []ruleCase{
		{name: "network of type arp", setup: base,
			bad:  apply(adY("$P-ad", "$P-bgpnet", "10.226.$O.5", "$P-n1")),
			want: []string{"spec.externalNetwork", `ExternalNetwork "$P-bgpnet" has type "bgp"`},
			good: []step{apply(adY("$P-ad", "$P-net", "10.225.$O.5", "$P-n1"))}},
		{name: "network exists", setup: base,
			bad:  apply(adY("$P-ad", "$P-none", "10.225.$O.5", "$P-n1")),
			want: []string{"spec.externalNetwork", `ExternalNetwork "$P-none" does not exist`}},
		{name: "address inside the pools", setup: base,
			bad:  apply(adY("$P-ad", "$P-net", "10.228.$O.5", "$P-n1")),
			want: []string{"spec.address", `ExternalNetwork "$P-net"`}},
		{name: "Node exists", setup: base,
			bad:  apply(adY("$P-ad", "$P-net", "10.225.$O.5", "$P-ghost")),
			want: []string{"spec.nodeName", `Node "$P-ghost" does not exist`}},
		{name: "not a Node address", setup: append(base, do(func(e *env) { e.node("$P-late", "10.225.$O.9") })),
			bad:  apply(adY("$P-ad", "$P-net", "10.225.$O.9", "$P-n1")),
			want: []string{"spec.address", `Node "$P-late"`}},
		{name: "one advertisement per address", setup: append(base, apply(adY("$P-first", "$P-net", "10.225.$O.5", "$P-n1"))),
			bad:  apply(adY("$P-second", "$P-net", "10.225.$O.5", "$P-n2")),
			want: []string{"spec.address", `ARPAdvertisement "$P-first"`},
			good: []step{apply(adY("$P-second", "$P-net", "10.225.$O.6", "$P-n2"))}},
		{name: "only nodeName changes", setup: append(base, apply(adY("$P-ad", "$P-net", "10.225.$O.5", "$P-n1"))),
			bad:  apply(adY("$P-ad", "$P-net", "10.225.$O.6", "$P-n1")),
			want: []string{"spec.address", "immutable"},
			good: []step{apply(adY("$P-ad", "$P-net", "10.225.$O.5", "$P-n2"))}},
	}
}

// bgpAdvertisementCases: the rules of ARPAdvertisements, for bgp networks.
func bgpAdvertisementCases() []ruleCase {
	base := []step{apply(arpNet() + poolY("$P-bgp", "bgp", "10.226.$O.0/24") + netY("$P-bgpnet", "bgp", "$P-bgp")),
		do(func(e *env) { e.node("$P-n1", "10.227.$O.1"); e.node("$P-n2", "10.227.$O.2") })}
	return []ruleCase{
		{name: "network of type bgp", setup: base,
			bad:  apply(bgpAdY("$P-ad", "$P-net", "10.225.$O.5", "$P-n1")),
			want: []string{"spec.externalNetwork", `ExternalNetwork "$P-net" has type "arp": only networks of type "bgp" are announced by BGP`},
			good: []step{apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.5", "$P-n1"))}},
		{name: "address inside the pools", setup: base,
			bad:  apply(bgpAdY("$P-ad", "$P-bgpnet", "10.225.$O.5", "$P-n1")),
			want: []string{"spec.address", `is not inside the AddressPools of ExternalNetwork "$P-bgpnet" ("$P-bgp")`}},
		{name: "Node exists", setup: base,
			bad:  apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.5", "$P-ghost")),
			want: []string{"spec.nodeName", `Node "$P-ghost" does not exist`}},
		{name: "not a Node address", setup: append(base, do(func(e *env) { e.node("$P-late", "10.226.$O.9") })),
			bad:  apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.9", "$P-n1")),
			want: []string{"spec.address", `Node "$P-late"`}},
		{name: "one advertisement per address", setup: append(base, apply(bgpAdY("$P-first", "$P-bgpnet", "10.226.$O.5", "$P-n1"))),
			bad:  apply(bgpAdY("$P-second", "$P-bgpnet", "10.226.$O.5", "$P-n2")),
			want: []string{"spec.address", `BGPAdvertisement "$P-first"`},
			good: []step{apply(bgpAdY("$P-second", "$P-bgpnet", "10.226.$O.6", "$P-n2"))}},
		{name: "only nodeName changes", setup: append(base, apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.5", "$P-n1"))),
			bad:  apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.6", "$P-n1")),
			want: []string{"spec.address", "immutable"},
			good: []step{apply(bgpAdY("$P-ad", "$P-bgpnet", "10.226.$O.5", "$P-n2"))}},
	}
}

// bgpPeerCases: the schema and validation rules of docs/bgp.md#bgppeer, and one
// BGPPeer per router address on any Node.
func bgpPeerCases() []ruleCase {
	return []ruleCase{
		{name: "AS numbers",
			bad:  apply(bgpPeerY("$P-tor", "10.225.$O.255", "", "myASN: 64513", "peerASN: 23456")),
			want: []string{"spec.peerASN", "AS_TRANS"},
			good: []step{apply(bgpPeerY("$P-tor", "10.225.$O.1", "", "myASN: 64513", "peerASN: 64512"))}},
		{name: "loopback router",
			bad:  apply(bgpPeerY("$P-tor", "127.0.0.1", "", "myASN: 64513", "peerASN: 64512")),
			want: []string{"spec.peerAddress", "loopback"}},
		{name: "BFD intervals of whole milliseconds",
			bad:  apply(bgpPeerY("$P-tor", "10.225.$O.1", "", "myASN: 64513", "peerASN: 64512", "bfd: {minRxInterval: 300500us}")),
			want: []string{"spec.bfd.minRxInterval", "whole number of milliseconds"},
			good: []step{apply(bgpPeerY("$P-tor", "10.225.$O.1", "", "myASN: 64513", "peerASN: 64512", "bfd: {minRxInterval: 301ms}"))}},
		{name: "selector",
			bad:  apply(bgpPeerY("$P-tor", "10.225.$O.1", "matchExpressions: [{key: rack, operator: In}]", "myASN: 64513", "peerASN: 64512")),
			want: []string{"spec.nodeSelector"}},
		{name: "one session per router address and Node",
			setup: []step{apply(bgpPeerY("$P-a", "10.225.$O.1", "matchLabels: {rack: a}", "myASN: 64513", "peerASN: 64512"))},
			bad:   apply(bgpPeerY("$P-b", "10.225.$O.1", "matchExpressions: [{key: rack, operator: In, values: [a, b]}]", "myASN: 64513", "peerASN: 64512")),
			want:  []string{"spec.peerAddress", `BGPPeer "$P-a" has the same peerAddress and a nodeSelector that can select the same Nodes`},
			good: []step{
				apply(bgpPeerY("$P-b", "10.225.$O.1", "matchLabels: {rack: b}", "myASN: 64513", "peerASN: 64512")),
				apply(bgpPeerY("$P-c", "10.225.$O.2", "", "myASN: 64513", "peerASN: 64512")),
			}},
		{name: "a selector widened onto another's Nodes",
			setup: []step{apply(bgpPeerY("$P-a", "10.225.$O.1", "matchLabels: {rack: a}", "myASN: 64513", "peerASN: 64512") +
				bgpPeerY("$P-b", "10.225.$O.1", "matchLabels: {rack: b}", "myASN: 64513", "peerASN: 64512"))},
			bad:  kubectl("patch", "bgppeer", "$P-b", "--type=json", `-p=[{"op":"remove","path":"/spec/nodeSelector"}]`),
			want: []string{"spec.peerAddress", `BGPPeer "$P-a"`},
			good: []step{kubectl("patch", "bgppeer", "$P-b", "--type=merge", `-p={"spec":{"holdTime":"30s"}}`)}},
	}
}

func claimCases() []ruleCase {
	return []ruleCase{
		{name: "pool exists",
			bad:  apply(claimY("10.225.$O.5", "$P-none", "$NS", "e", "uid-e")),
			want: []string{"spec.addressPool", `AddressPool "$P-none" does not exist`},
			good: []step{apply(poolY("$P-none", "arp", "10.225.$O.0/24") + claimY("10.225.$O.5", "$P-none", "$NS", "e", "uid-e"))}},
		{name: "address inside the pool", setup: []step{apply(poolY("$P-pool", "arp", "10.225.$O.0/28"))},
			bad:  apply(claimY("10.225.$O.100", "$P-pool", "$NS", "e", "uid-e")),
			want: []string{"spec.address", `AddressPool "$P-pool"`}},
		{name: "named after the address", setup: []step{apply(poolY("$P-pool", "arp", "10.225.$O.0/28"))},
			bad:  apply(strings.Replace(claimY("10.225.$O.5", "$P-pool", "$NS", "e", "uid-e"), "name: 10.225.$O.5", "name: $P-claim", 1)),
			want: []string{"metadata.name", `"10.225.$O.5"`}},
		{name: "spec immutable", setup: []step{apply(poolY("$P-pool", "arp", "10.225.$O.0/28") + claimY("10.225.$O.5", "$P-pool", "$NS", "e", "uid-e"))},
			bad:  apply(claimY("10.225.$O.5", "$P-pool", "$NS", "e", "uid-other")),
			want: []string{"spec"}},
	}
}
