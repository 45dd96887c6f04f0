package nft

import (
	"context"
	"maps"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/loutres/juneau/test/nftlist"
)

// TestListedByNft: with every feature in both tables (NAT mappings with and
// without a limit, direct NICs with a limit, other nodes' in-cluster
// mappings, the fast path by interface index), the distribution's nft lists
// the ruleset, each table, and each chain, map and set by its name, without
// an error or a word on standard error; the rules read as nft's own syntax,
// the ICMP error rules included (README.md, "Reading the table with nft");
// and nft reads its listing back (`nft -c`), all but the quote rewrites,
// which no nft syntax can state.
func TestListedByNft(t *testing.T) {
	tp := newTopology(t, topologyOptions{ipv6: true})
	tp.state.Mappings = append(tp.state.Mappings,
		mbw("10.225.51.8", "10.244.1.8", 5), mbw("2001:db8:51::8", "fd00:10:244:1::8", 5))
	tp.state.Direct = []DirectNIC{dnbw(directHost, directEIP, 100), dnbw(directHost, "2001:db8:51::6", 100)}
	tp.state.InCluster = append(append([]Mapping(nil), tp.state.Mappings...),
		m("10.225.51.7", "10.244.2.7"), m("2001:db8:51::7", "fd00:10:244:2::7"))
	tp.sync(t)
	if tp.prog.ix.s.extIndex == 0 {
		t.Fatal("the external interface's index is unknown: no fast path by index to list")
	}

	ruleset := nftlist.InNS(t, tp.node, "list", "ruleset")
	for _, f := range families {
		table := nftlist.InNS(t, tp.node, "list", "table", f.name, TableName)
		if !strings.HasPrefix(table, "table "+f.name+" "+TableName+" {") || !strings.Contains(ruleset, table) {
			t.Errorf("nft list table %s %s differs from its part of the ruleset:\n%s", f.name, TableName, table)
		}
		lines := ruleLines(table)
		for _, want := range wantListed[f.name] {
			if !lines[want] {
				t.Errorf("table %s %s: no line %q in\n%s", f.name, TableName, want, table)
			}
		}
		rs := buildRuleset(tp.prog.ix.s, f)
		for _, c := range rs.chains {
			if out := nftlist.InNS(t, tp.node, "list", "chain", f.name, TableName, c.Name); !strings.Contains(out, "\tchain "+c.Name+" {\n") {
				t.Errorf("nft list chain %s %s %s:\n%s", f.name, TableName, c.Name, out)
			}
		}
		for _, s := range rs.sets.all() {
			kind := "set"
			if s.IsMap {
				kind = "map"
			}
			if out := nftlist.InNS(t, tp.node, "list", kind, f.name, TableName, s.Name); !strings.Contains(out, "\t"+kind+" "+s.Name+" {\n") {
				t.Errorf("nft list %s %s %s %s:\n%s", kind, f.name, TableName, s.Name, out)
			}
		}
	}

	// Read back, as `nft -f` of a saved listing would, on an empty ruleset
	// (-c: checked, never committed). nft 1.0.6 gives a raw payload such as
	// @th,160,32 the type integer and refuses it beside an address in a map
	// key: those rules, and only those, are left out.
	var kept []string
	quoteRewrites := 0
	for line := range strings.Lines(ruleset) {
		if strings.Contains(line, "@th,") && (strings.Contains(line, "map @"+MapEIP2VPCQuoted) || strings.Contains(line, "map @"+MapVPC2EIPQuoted)) {
			quoteRewrites++
			continue
		}
		kept = append(kept, line)
	}
	if want := 2*3 + 2*4; quoteRewrites != want { // quoteRules, quoteRules6
		t.Errorf("%d quote rewrites left out of the read-back, want %d", quoteRewrites, want)
	}
	nftlist.InNS(t, tp.node, "-c", "-f", writeTemp(t, "listed.nft", "flush ruleset\n"+strings.Join(kept, "")))

	// The IPv6 limit chains' names give their ElasticIPs back.
	limits, err := tp.prog.KernelLimits(context.Background())
	want := map[netip.Addr]int32{addr("10.225.51.8"): 5, addr("2001:db8:51::8"): 5, addr(directEIP): 100, addr("2001:db8:51::6"): 100}
	if err != nil || !maps.Equal(limits, want) {
		t.Errorf("KernelLimits = %v, %v; want %v", limits, err, want)
	}
}

// wantListed are rules as nft 1.0.6 lists them, counters left out: the
// common path, the ICMP error handling with its raw quote offsets, the
// anti-spoofing, limit and in-cluster rules.
var wantListed = map[string][]string{
	"ip": {
		`iif "ext0" meta l4proto != icmp ip daddr set ip daddr map @eip2vpc_unlimited notrack accept`,
		`meta l4proto != icmp ip daddr set ip daddr map @eip2vpc_unlimited notrack accept`,
		`iifname @direct_ifaces iifname . ip saddr != @direct_allowed counter drop`,
		`ip daddr @eip2vpc goto eip_dnat`,
		`icmp type @icmp_errors jump dnat_icmp_error`,
		`ip daddr set ip daddr map @eip2vpc notrack`,
		`@th,64,8 0x45 @th,136,8 0x11 @th,112,16 & 0x1fff == 0x0 @th,272,16 != 0x0 @th,160,32 set ip daddr . @th,160,32 map @eip2vpc_quoted @th,160,32 set @th,160,32`,
		`@th,64,8 0x45 @th,136,8 0x6 @th,112,16 & 0x1fff == 0x0 @th,160,32 set ip daddr . @th,160,32 map @eip2vpc_quoted @th,160,32 set @th,160,32`,
		`@th,160,32 set ip daddr . @th,160,32 map @eip2vpc_quoted return`,
		`ip saddr @vpc2eip ip daddr != 10.96.0.0-10.111.255.255 ip daddr != 10.225.51.2 ip daddr != 10.244.0.0-10.244.255.255 notrack accept`,
		`oif "ext0" meta l4proto != icmp ip daddr != 10.96.0.0-10.111.255.255 ip daddr != 10.225.51.2 ip daddr != 10.244.0.0-10.244.255.255 ip saddr set ip saddr map @vpc2eip accept`,
		`oifname "ext0" ip saddr @vpc2eip ip daddr != 10.96.0.0-10.111.255.255 ip daddr != 10.225.51.2 ip daddr != 10.244.0.0-10.244.255.255 goto eip_snat`,
		`icmp type @icmp_errors jump snat_icmp_error`,
		`ip saddr set ip saddr map @vpc2eip`,
		`@th,192,32 set ip saddr . @th,192,32 map @vpc2eip_quoted return`,
		`ip saddr @cluster_cidrs dnat to ip daddr map @cluster_eip2vpc`,
		`ct status dnat snat to ip saddr . ip daddr map @vpc2eip_quoted`,
		`ip saddr != @cluster_cidrs limit rate over 625000 bytes/second counter drop`,
	},
	"ip6": {
		`iif "ext0" meta l4proto != ipv6-icmp ip6 daddr set ip6 daddr map @eip2vpc_unlimited @nh,16,16 set @nh,16,16 notrack accept`,
		`iifname @direct_ifaces ip6 saddr != fe80::/10 ip6 saddr != :: iifname . ip6 saddr != @direct_allowed counter drop`,
		`icmpv6 type 133-137 counter drop`,
		`icmpv6 type @icmp_errors jump dnat_icmp_error`,
		`ip6 daddr set ip6 daddr map @eip2vpc @nh,16,16 set @nh,16,16 notrack`,
		`@th,112,8 0x11 @th,432,16 != 0x0 @th,128,128 set ip6 daddr . @th,128,128 map @eip2vpc_quoted return`,
		`@th,128,128 set ip6 daddr . @th,128,128 map @eip2vpc_quoted return`,
		`ip6 saddr @vpc2eip ip6 daddr != 2001:db8:51::2 ip6 daddr != fd00:10:96::-fd00:10:96::ffff ip6 daddr != fd00:10:244::-fd00:10:244:ffff:ffff:ffff:ffff:ffff notrack accept`,
		`oif "ext0" meta l4proto != ipv6-icmp ip6 daddr != 2001:db8:51::2 ip6 daddr != fd00:10:96::-fd00:10:96::ffff ip6 daddr != fd00:10:244::-fd00:10:244:ffff:ffff:ffff:ffff:ffff ip6 saddr set ip6 saddr map @vpc2eip @nh,16,16 set @nh,16,16 accept`,
		`icmpv6 type @icmp_errors jump snat_icmp_error`,
		`@th,256,128 set ip6 saddr . @th,256,128 map @vpc2eip_quoted return`,
		`ct status dnat snat to ip6 saddr . ip6 daddr map @vpc2eip_quoted`,
		`ip6 daddr != @cluster_cidrs limit rate over 625000 bytes/second counter drop`,
	},
}

var counterValues = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// ruleLines are the lines of a listing, trimmed, with counter values left
// out.
func ruleLines(listing string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(listing) {
		out[counterValues.ReplaceAllString(strings.TrimSpace(line), "counter")] = true
	}
	return out
}
