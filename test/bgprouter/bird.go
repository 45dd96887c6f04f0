// Package bgprouter runs real BGP routers for tests: BIRD 2 (Debian bird2) and FRR's
// bgpd (Debian frr), each inside a network namespace the test made, with its own
// configuration, control socket and pid file in the test's temporary directory. The
// daemons are killed when the test ends, before their namespace goes away.
//
// Routers are configured passive: they accept the sessions juneau's nodes open and
// never dial, which is how docs/bgp.md tells operators to configure them.
package bgprouter

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Neighbor is one node the router accepts a session from.
type Neighbor struct {
	// Name of the session (a BIRD protocol name: letters, digits, underscores).
	Name string
	// Local is the router's address the node connects to.
	Local netip.Addr
	// Address of the node, and the AS the router expects from it.
	Address netip.Addr
	AS      uint32
	// Password is the TCP-MD5 password; empty: none.
	Password string
	// Multihop allows a node that is not directly connected (eBGP multihop).
	Multihop bool
	// TTLSecurity turns on GTSM (RFC 5082) for the session (BIRD only).
	TTLSecurity bool
	// Flood sends the node the routes of Config.Flood (BIRD only); otherwise the router
	// sends nothing.
	Flood bool
	// BFD runs BFD with the node at Config.BFD's timers (BIRD: `bfd on`; FRR:
	// `neighbor X bfd`, which needs zebra and bfdd, started then too).
	BFD bool
	// CheckControlPlane adds FRR's `neighbor X bfd check-control-plane-failure`: once
	// the node went through a graceful restart, FRR ignores its BFD failures when its
	// BFD shares fate with its control plane (the C bit clear, as the Node's is;
	// docs/bgp.md#bfd-and-graceful-restart). FRR only.
	CheckControlPlane bool
}

// Config is a router.
type Config struct {
	RouterID netip.Addr
	AS       uint32
	// Neighbors the router accepts.
	Neighbors []Neighbor
	// Accept, when valid, limits what the router takes from its neighbors to the /32s
	// inside this prefix, as docs/bgp.md recommends; otherwise it takes everything.
	Accept netip.Prefix
	// Accept6, when valid, opens the ipv6 channel of every session (IPv6 routes over
	// the IPv4 session, MP-BGP) and takes the /128s inside this prefix from it (BIRD
	// only).
	Accept6 netip.Prefix
	// Kernel makes the router install the routes it learned into its namespace's routing
	// table, so that it forwards to the nodes (FRR: zebra runs then).
	Kernel bool
	// Flood are routes BIRD sends to the neighbors marked Flood: /32s counted up from
	// 10.240.0.0 (blackhole routes of its own, never installed anywhere).
	Flood int
	// BFD are the BFD timers and behaviour of the neighbors marked BFD.
	BFD BFD
	// PreferOlder: of two equally good paths the older wins (BIRD's `prefer older`),
	// as FRR decides by default between eBGP paths, rather than the lower router ID.
	PreferOlder bool
}

// hasBFD reports whether a neighbor runs BFD.
func (c Config) hasBFD() bool {
	for _, n := range c.Neighbors {
		if n.BFD {
			return true
		}
	}
	return false
}

// FloodRoutes are the prefixes of Config.Flood.
func (c Config) FloodRoutes() []netip.Prefix {
	out := make([]netip.Prefix, c.Flood)
	for i := range out {
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(240 + i>>16), byte(i >> 8), byte(i)}), 32)
	}
	return out
}

// BIRD is a running BIRD 2 daemon.
type BIRD struct {
	t      testing.TB
	socket string
	proc   *netns.Process
	birdc  string
}

var birdConf = template.Must(template.New("bird.conf").Parse(`# written by the test
router id {{.RouterID}};
log stderr all;
timeformat route iso long ms;
timeformat protocol iso long ms;
protocol device { scan time 1; }
{{- if .Flood}}
protocol static flood {
	ipv4;
{{- range .FloodRoutes}}
	route {{.}} blackhole;
{{- end}}
}
{{- end}}
{{- if .HasBFD}}
protocol bfd {
	interface "*" {
		min rx interval {{.BFD.RxMillis}} ms;
		min tx interval {{.BFD.TxMillis}} ms;
		multiplier {{.BFD.Mult}};
	};
}
{{- end}}
{{- if .Kernel}}
protocol kernel {
	ipv4 { export all; };
}
{{- if .Accept6.IsValid}}
protocol kernel {
	ipv6 { export all; };
}
{{- end}}
{{- end}}
{{range .Neighbors}}
protocol bgp {{.Name}} {
	local {{.Local}} as {{$.AS}};
	neighbor {{.Address}} as {{.AS}};
	passive on;
	graceful restart on;
	error wait time 1, 10;
{{- if $.PreferOlder}}
	prefer older on;
{{- end}}
{{- if eq .AS $.AS}}
	direct;
{{- end}}
{{- if .Password}}
	password "{{.Password}}";
{{- end}}
{{- if .Multihop}}
	multihop;
{{- end}}
{{- if .TTLSecurity}}
	ttl security on;
{{- end}}
{{- if and .BFD $.BFD.Graceful}}
	bfd graceful;
{{- else if .BFD}}
	bfd on;
{{- end}}
	ipv4 {
{{- if $.Accept.IsValid}}
		import where net ~ [ {{$.Accept}}{32,32} ];
{{- else}}
		import all;
{{- end}}
{{- if .Flood}}
		export where proto = "flood";
{{- else}}
		export none;
{{- end}}
	};
{{- if $.Accept6.IsValid}}
	ipv6 {
		import where net ~ [ {{$.Accept6}}{128,128} ];
		export none;
	};
{{- end}}
}
{{end}}`))

// StartBIRD writes the configuration and starts bird in ns; it returns once BIRD
// answers on its control socket.
func StartBIRD(t testing.TB, ns *netns.NS, cfg Config) *BIRD {
	t.Helper()
	require.Binary(t, "bird")
	dir := t.TempDir()
	conf := filepath.Join(dir, "bird.conf")
	f, err := os.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := birdConf.Execute(f, templateData{cfg}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := &BIRD{t: t, socket: filepath.Join(dir, "bird.ctl"), birdc: require.Binary(t, "birdc")}
	// -f: foreground, so the test owns the process; -s and -P keep the control socket
	// and pid file out of /run.
	b.proc = ns.Start("bird", "-f", "-c", conf, "-s", b.socket, "-P", filepath.Join(dir, "bird.pid"))
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		if b.proc.Exited() {
			return false, fmt.Errorf("bird exited:\n%s", b.proc.Output())
		}
		_, err := b.Command("show", "status")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("BIRD did not start: %v\n%s", err, b.proc.Output())
	}
	return b
}

// Command runs birdc against this BIRD and returns its output. birdc talks to the
// control socket, which belongs to no network namespace.
func (b *BIRD) Command(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.birdc, append([]string{"-s", b.socket}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Log is what BIRD printed so far.
func (b *BIRD) Log() string { return b.proc.Output() }

// Socket is BIRD's control socket, for birdc -s.
func (b *BIRD) Socket() string { return b.socket }

// Route is one route of BIRD's table.
type Route struct {
	Prefix   string
	Via      string
	Protocol string
	// Since is the time BIRD shows for the route (when it last changed).
	Since string
}

// sinceJitter is how far apart BIRD may print the same stamp of one route: it keeps
// the stamp on its monotonic clock and adds, when printing, the wall-clock offset it
// sampled in that round of its event loop, so two listings of an untouched route
// differ by a millisecond, and on a loaded machine by up to 11 ms (seen: two tests of
// one run failed with a margin of 5 ms). A route dropped and learned again is stamped
// when a new session brings it again: after a new connection and OPEN exchange,
// seconds later in these tests' restarts.
const sinceJitter = 25 * time.Millisecond

// SameSince reports whether two listings of a route show the same stamp, that is the
// route was not replaced in between (see sinceJitter).
func SameSince(a, b Route) bool {
	const layout = "2006-01-02 15:04:05.000"
	ta, errA := time.Parse(layout, a.Since)
	tb, errB := time.Parse(layout, b.Since)
	if errA != nil || errB != nil {
		return a.Since == b.Since
	}
	d := ta.Sub(tb)
	return d <= sinceJitter && d >= -sinceJitter
}

// routeLine matches the first line of a route in `show route` output, e.g.
// "10.225.53.7/32       unicast [node_a 2030-01-02 03:04:05.123] * (100) [AS64513i]".
var (
	routeLine = regexp.MustCompile(`^(\d+\.\d+\.\d+\.\d+/\d+|[0-9a-f:]+:[0-9a-f:]*/\d+)\s+\S+\s+\[(\S+) ([^\]]+)\]`)
	viaLine   = regexp.MustCompile(`^\s+via (\S+)`)
)

// Routes returns BIRD's table (`show route`).
func (b *BIRD) Routes() (map[string]Route, error) {
	out, err := b.Command("show", "route")
	if err != nil {
		return nil, err
	}
	return parseRoutes(out), nil
}

func parseRoutes(out string) map[string]Route {
	routes := map[string]Route{}
	var last string
	for _, line := range strings.Split(out, "\n") {
		if m := routeLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			routes[last] = Route{Prefix: m[1], Protocol: m[2], Since: m[3]}
			continue
		}
		if m := viaLine.FindStringSubmatch(line); m != nil && last != "" {
			r := routes[last]
			r.Via = m[1]
			routes[last] = r
		}
	}
	return routes
}

// WaitRoutes polls until BIRD's table holds exactly want, prefix → next hop, and
// returns the table.
func (b *BIRD) WaitRoutes(timeout time.Duration, want map[string]string) map[string]Route {
	b.t.Helper()
	var routes map[string]Route
	got, err := pollTable(timeout, want, func() (map[string]string, error) {
		var err error
		routes, err = b.Routes()
		vias := map[string]string{}
		for prefix, r := range routes {
			vias[prefix] = r.Via
		}
		return vias, err
	})
	if err != nil {
		b.t.Fatalf("BIRD routes %v, want %v: %v", got, want, err)
	}
	return routes
}

// pollTable reads a router's table (prefix → next hop) until it equals want.
func pollTable(timeout time.Duration, want map[string]string, read func() (map[string]string, error)) (map[string]string, error) {
	var got map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		if got, err = read(); err != nil {
			return false, err
		}
		return maps.Equal(got, want), nil
	})
	return got, err
}

// Protocol returns `show protocols all <name>`.
func (b *BIRD) Protocol(name string) (string, error) {
	return b.Command("show", "protocols", "all", name)
}

// Established reports whether the session name is Established.
func (b *BIRD) Established(name string) (bool, error) {
	out, err := b.Protocol(name)
	return strings.Contains(out, "BGP state:          Established"), err
}

// WaitEstablished polls until the session name is Established.
func (b *BIRD) WaitEstablished(name string, timeout time.Duration) {
	b.t.Helper()
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		out, err = b.Protocol(name)
		return strings.Contains(out, "BGP state:          Established"), err
	})
	if err != nil {
		b.t.Fatalf("BIRD session %s not Established: %v\n%s", name, err, out)
	}
}
