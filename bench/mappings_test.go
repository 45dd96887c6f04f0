package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestBenchMappings(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10000} {
		m := benchMappings(n)
		if len(m) != n {
			t.Fatalf("n=%d: got %d mappings", n, len(m))
		}
		eips, pods := map[netip.Addr]bool{}, map[netip.Addr]bool{}
		used := -1
		for i, x := range m {
			if eips[x.ElasticIP] || pods[x.PodIP] {
				t.Fatalf("n=%d: mapping %d (%v) repeats an address", n, i, x)
			}
			eips[x.ElasticIP], pods[x.PodIP] = true, true
			if x.ElasticIP == elasticIP {
				used = i
				if x.PodIP != podIP {
					t.Errorf("n=%d: the used ElasticIP maps to %v", n, x.PodIP)
				}
			} else if netip.MustParsePrefix("10.225.51.0/24").Contains(x.ElasticIP) || netip.MustParsePrefix("10.244.1.0/24").Contains(x.PodIP) ||
				!netip.MustParsePrefix("10.244.0.0/16").Contains(x.PodIP) {
				t.Errorf("n=%d: filler mapping %v collides with the topology's addresses", n, x)
			}
		}
		if used != n/2 && !(n == 1 && used == 0) {
			t.Errorf("n=%d: used mapping at %d, want the middle (%d)", n, used, n/2)
		}
	}
}

func TestIPTablesRestore(t *testing.T) {
	m := benchMappings(3)
	got := iptablesRestore(m)
	want := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A PREROUTING -d 10.225.52.0/32 -j DNAT --to-destination 10.244.100.0\n" +
		"-A PREROUTING -d 10.225.51.5/32 -j DNAT --to-destination 10.244.1.5\n" +
		"-A PREROUTING -d 10.225.52.1/32 -j DNAT --to-destination 10.244.100.1\n" +
		"-A POSTROUTING -s 10.244.100.0/32 -o ext0 -j SNAT --to-source 10.225.52.0\n" +
		"-A POSTROUTING -s 10.244.1.5/32 -o ext0 -j SNAT --to-source 10.225.51.5\n" +
		"-A POSTROUTING -s 10.244.100.1/32 -o ext0 -j SNAT --to-source 10.225.52.1\n" +
		"COMMIT\n"
	if got != want {
		t.Errorf("iptablesRestore:\n%s\nwant:\n%s", got, want)
	}
	change := iptablesChange(m, 2, netip.MustParseAddr("10.244.200.9"))
	wantChange := "*nat\n-R PREROUTING 3 -d 10.225.52.1/32 -j DNAT --to-destination 10.244.200.9\n" +
		"-R POSTROUTING 3 -s 10.244.200.9/32 -o ext0 -j SNAT --to-source 10.225.52.1\nCOMMIT\n"
	if change != wantChange {
		t.Errorf("iptablesChange:\n%s\nwant:\n%s", change, wantChange)
	}
	if !strings.HasSuffix(emptyNAT, "COMMIT\n") {
		t.Error("emptyNAT does not commit")
	}
}

func TestScaledMappingsAreDistinct(t *testing.T) {
	ms := scaledMappings(100000)
	seen := map[netip.Addr]bool{}
	for _, m := range ms {
		if seen[m.ElasticIP] || seen[m.PodIP] {
			t.Fatalf("%v reused", m)
		}
		seen[m.ElasticIP], seen[m.PodIP] = true, true
	}
	if last := ms[len(ms)-1]; last.ElasticIP.String() != "10.231.134.160" || last.PodIP.String() != "10.237.134.160" {
		t.Errorf("last mapping %v", last)
	}
}
