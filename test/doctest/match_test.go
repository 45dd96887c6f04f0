package doctest

import (
	"strings"
	"testing"
)

func TestParseMarkers(t *testing.T) {
	page := strings.Split(`# Title
## Install

<!-- doctest: run stage=install dir=.. <ns>=default -->
`+"```sh"+`
kubectl apply -k my-juneau/ -n <ns>
`+"```"+`

1. A list item:

   <!-- doctest: skip an illustration -->
   `+"```"+`
   a -> b
   `+"```"+`

`+"```yaml"+`
unmarked: true
`+"```", "\n")
	blocks, err := Parse("p.md", page)
	if err == nil || !strings.Contains(err.Error(), "p.md:16: a fenced block without") {
		t.Fatalf("error %v, want the unmarked block at line 16 named", err)
	}
	if len(blocks) != 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	b := blocks[0]
	if b.Directive != Run || b.Stage() != StageInstall || b.Args["dir"] != ".." || b.Placeholders["<ns>"] != "default" ||
		b.Section != "Install" || b.Line != 5 || b.Body != "kubectl apply -k my-juneau/ -n <ns>\n" {
		t.Errorf("block %+v", b)
	}
	if s := blocks[1]; s.Directive != Skip || s.Reason != "an illustration" || s.Body != "a -> b\n" {
		t.Errorf("indented block %+v", s)
	}
	for _, bad := range []string{"<!-- doctest: frobnicate -->", "<!-- doctest: skip -->", "<!-- doctest: run colour=blue -->",
		"<!-- doctest: write -->", "<!-- doctest: run stage=later -->", `<!-- doctest: run "unterminated -->`} {
		if _, err := Parse("p.md", []string{bad, "```", "x", "```"}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestCommands(t *testing.T) {
	cmds := Commands(`$ kubectl get eip \
    -n default
NAME   PHASE
a      Attached

$ kubectl get nic
NAME
`)
	if len(cmds) != 2 || cmds[0].Line != "kubectl get eip \n    -n default" || len(cmds[0].Output) != 2 || cmds[1].Output[0] != "NAME" {
		t.Fatalf("%#v", cmds)
	}
}

func TestMatchTables(t *testing.T) {
	got := `NAME        EXTERNALNETWORK   ADDRESS       ATTACHMENTKIND        ATTACHMENT         PHASE       ALLOCATED   ATTACHED
nginx-eip   ext-net           10.225.51.6   ElasticIPAttachment   nginx-eip-attach   Attached    True        True
web-eip     ext-net           10.225.51.5                                            Available   True        False
`
	want := []string{
		"NAME        EXTERNALNETWORK   ADDRESS       ATTACHMENTKIND        ATTACHMENT         PHASE      ALLOCATED   ATTACHED",
		"nginx-eip   ext-net           10.225.51.5   ElasticIPAttachment   nginx-eip-attach   Attached   True        True",
	}
	bound := Bindings{}
	fresh, err := Match(want, got, []string{"ADDRESS"}, bound)
	if err != nil {
		t.Fatal(err)
	}
	if fresh["10.225.51.5"] != "10.225.51.6" {
		t.Errorf("bindings %v", fresh)
	}
	if _, err := Match(want, got, nil, bound); err == nil || !strings.Contains(err.Error(), `column ADDRESS: "10.225.51.6" printed, the page shows "10.225.51.5"`) {
		t.Errorf("without vary: %v", err)
	}
	// An empty cell is told apart from the next column's value.
	empty := []string{
		"NAME      EXTERNALNETWORK   ADDRESS       ATTACHMENTKIND   ATTACHMENT   PHASE       ALLOCATED   ATTACHED",
		"web-eip   ext-net           10.225.51.5                                Available   True        False",
	}
	if _, err := Match(empty, got, nil, bound); err != nil {
		t.Errorf("empty cells: %v", err)
	}
	empty[1] = strings.Replace(empty[1], "Available", "Attached ", 1)
	if _, err := Match(empty, got, nil, bound); err == nil {
		t.Error("a wrong phase matched")
	}
	if _, err := Match([]string{"NAME   PHASE", "x      Attached"}, got, nil, bound); err == nil {
		t.Error("other columns matched")
	}
	// A varying column keeps its shape: an address is not a blank.
	if _, err := Match([]string{want[0], "web-eip     ext-net           10.225.51.5   ElasticIPAttachment   nginx-eip-attach   Available   True        False"},
		got, []string{"ATTACHMENTKIND", "ATTACHMENT"}, bound); err == nil || !strings.Contains(err.Error(), "blank") {
		t.Errorf("shape: %v", err)
	}
}

func TestMatchSeveralTables(t *testing.T) {
	got := `NAME                                     MODE   TOTAL   ALLOCATED   AVAILABLE   READY   AGE
addresspool.juneau.loutres.me/ext-pool   arp    95      2           93          True    3s

NAME                                        TYPE   POOLS          READY   AGE
externalnetwork.juneau.loutres.me/ext-net   arp    ["ext-pool"]   True    3s
`
	want := strings.Split(`NAME                                     MODE   TOTAL   ALLOCATED   AVAILABLE   READY   AGE
addresspool.juneau.loutres.me/ext-pool   arp    95      0           95          True    10s

NAME                                        TYPE   POOLS          READY   AGE
externalnetwork.juneau.loutres.me/ext-net   arp    ["ext-pool"]   True    10s`, "\n")
	if _, err := Match(want, got, []string{"ALLOCATED", "AVAILABLE"}, Bindings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Match(want, got, nil, Bindings{}); err == nil {
		t.Error("counts matched without vary")
	}
	if _, err := Match(want[:3], got, []string{"ALLOCATED", "AVAILABLE"}, Bindings{}); err == nil {
		t.Error("one table matched two")
	}
}

func TestMatchLines(t *testing.T) {
	got := `Status:
  Conditions:
    Message:               address "10.225.51.6" reserved from AddressPool "ext-pool"
    Reason:                Allocated
Events:
  Type    Reason     Age   From               Message
  ----    ------     ----  ----               -------
  Normal  Allocated  12s   juneau-controller  address "10.225.51.6" reserved from AddressPool "ext-pool"
`
	bound := Bindings{"10.225.51.5": "10.225.51.6"}
	want := []string{
		"  Conditions:",
		`    Message:   address "10.225.51.5" reserved from AddressPool "ext-pool"`,
		"...",
		"  Type    Reason     From               Message",
		`  Normal  Allocated  juneau-controller  address "10.225.51.5" reserved from AddressPool "ext-pool"`,
	}
	if _, err := Match(want, got, nil, bound); err != nil {
		t.Fatal(err)
	}
	if _, err := Match([]string{want[4], want[1]}, got, nil, bound); err == nil {
		t.Error("lines out of order matched")
	}
}

func TestSubstitute(t *testing.T) {
	b := Bindings{"10.225.51.5": "10.225.51.9", "node-a": "node-b", "10.244.1.5/32": "10.244.2.3/32"}
	for in, want := range map[string]string{
		"curl http://10.225.51.5/":              "curl http://10.225.51.9/",
		"10.225.51.50 and 110.225.51.5":         "10.225.51.50 and 110.225.51.5",
		"on node-a. And node-ab, xnode-a":       "on node-b. And node-ab, xnode-a",
		"nginx.eth0   node-a   10.244.1.5/32":   "nginx.eth0   node-b   10.244.2.3/32",
		`address "10.225.51.5" reserved`:        `address "10.225.51.9" reserved`,
		"ip neigh show 10.225.51.5 dev eth0":    "ip neigh show 10.225.51.9 dev eth0",
		"10.225.51.5.in-addr is not an address": "10.225.51.5.in-addr is not an address",
	} {
		if got := b.Substitute(in); got != want {
			t.Errorf("Substitute(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchLinesVary(t *testing.T) {
	bound := Bindings{}
	fresh, err := Match([]string{"answering ARP on interface eth0 with 02:00:00:00:00:0a"},
		"answering ARP on interface eth0 with 5e:1f:22:33:44:55\n", []string{"mac"}, bound)
	if err != nil || fresh["02:00:00:00:00:0a"] != "5e:1f:22:33:44:55" {
		t.Fatalf("%v %v", fresh, err)
	}
	bound["02:00:00:00:00:0a"] = "5e:1f:22:33:44:55"
	want := []string{"10.225.51.20 dev eth0 lladdr 02:00:00:00:00:0a"}
	if _, err := Match(want, "10.225.51.20 dev eth0 lladdr 5e:1f:22:33:44:55 STALE\n", []string{"mac"}, bound); err != nil {
		t.Errorf("the bound MAC: %v", err)
	}
	if _, err := Match(want, "10.225.51.20 dev eth0 lladdr 5e:1f:22:33:44:66 STALE\n", []string{"mac"}, bound); err == nil {
		t.Error("another MAC matched a bound one")
	}
	route := []string{"10.225.53.5/32 unicast [node_a 2030-01-02 03:04:05.123] * (100) [AS64513i]"}
	for _, printed := range []string{"2026-12-02 17:40:01.512]", "2026-12-02 17:41:09.007]"} {
		if _, err := Match(route, "10.225.53.5/32       unicast [node_a "+printed+" * (100) [AS64513i]\n", []string{"time"}, bound); err != nil {
			t.Errorf("time %s: %v", printed, err)
		}
	}
	if _, err := Match(route, "10.225.53.5/32 unicast [node_a 2026-12-02 17:40:01.512] * (100) [AS64513i]\n", nil, bound); err == nil {
		t.Error("another time matched without vary=time")
	}
	if _, err := Match([]string{"juneau_address_pool_available_addresses{pool=\"ext-pool\"} 93"},
		"juneau_address_pool_available_addresses{pool=\"ext-pool\"} 91\n", []string{"number"}, Bindings{}); err != nil {
		t.Errorf("number: %v", err)
	}
}

// TestMatchSwappedNodes: the page shows web on node-b and gw on node-a; the scheduler
// did the opposite. Each page value binds to its own printed value.
func TestMatchSwappedNodes(t *testing.T) {
	bound := Bindings{}
	fresh, err := Match([]string{"NAME       NODE", "web.eth0   node-b"}, "NAME       NODE\nweb.eth0   node-a\n", []string{"NODE"}, bound)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fresh {
		bound[k] = v
	}
	if _, err := Match([]string{"NAME      NODE", "gw.ext0   node-a"}, "NAME      NODE\ngw.ext0   node-b\n", []string{"NODE"}, bound); err != nil {
		t.Errorf("swapped: %v", err)
	}
	if _, err := Match([]string{"NAME       NODE", "web.eth0   node-b"}, "NAME       NODE\nweb.eth0   node-b\n", []string{"NODE"}, bound); err == nil {
		t.Error("web matched on another Node than the one bound before")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Gratuitous ARP (`spec.gratuitousARP`)":                  "gratuitous-arp-specgratuitousarp",
		"AddressPool or ExternalNetwork not `Ready`":             "addresspool-or-externalnetwork-not-ready",
		"1. Describe the external network (administrator, once)": "1-describe-the-external-network-administrator-once",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestForgetRebinds: web6 was placed on its own; the page shows it on node-a, which an
// earlier block bound to the Node of gw. rebind=NODE lets node-a stand for web6's Node.
func TestForgetRebinds(t *testing.T) {
	bound := Bindings{"node-b": "node-a", "node-a": "node-b"}
	want := []string{"NAME        NODE", "web6.eth0   node-a"}
	got := "NAME        NODE\nweb6.eth0   node-a\n"
	if _, err := Match(want, got, []string{"NODE"}, bound); err == nil {
		t.Fatal("node-a matched although bound to node-b")
	}
	bound.Forget(want, []string{"NODE"})
	if _, ok := bound["node-a"]; ok {
		t.Errorf("node-a still bound: %v", bound)
	}
	if bound["node-b"] != "node-a" {
		t.Errorf("node-b forgotten: %v", bound)
	}
	if _, err := Match(want, got, []string{"NODE"}, bound); err != nil {
		t.Errorf("after Forget: %v", err)
	}
	bound.Forget([]string{"not a table"}, []string{"NODE"})
}

// TestSubstituteSwapped: two values bound to each other are each replaced once.
func TestSubstituteSwapped(t *testing.T) {
	b := Bindings{"node-a": "node-b", "node-b": "node-a", "10.225.51.5": "10.225.51.50"}
	if got, want := b.Substitute("node-a then node-b, 10.225.51.5."), "node-b then node-a, 10.225.51.50."; got != want {
		t.Errorf("Substitute = %q, want %q", got, want)
	}
}
