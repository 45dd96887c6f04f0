package bgprouter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// FRR's daemons are not on PATH.
const (
	bgpdPath  = "/usr/lib/frr/bgpd"
	zebraPath = "/usr/lib/frr/zebra"
	bfddPath  = "/usr/lib/frr/bfdd"
	vtyshPath = "/usr/bin/vtysh"
)

// FRR is a running FRR bgpd. Without BFD or Config.Kernel it runs alone (no zebra: it
// learns routes and installs none). With Config.Kernel it runs with zebra, which
// installs the learned routes in the router's namespace. With a neighbor marked BFD it
// runs with zebra and bfdd, as FRR's BFD needs: bgpd asks zebra for BFD sessions and
// zebra relays to bfdd.
type FRR struct {
	t      testing.TB
	vtyDir string
	proc   *netns.Process
	// zebra runs with BFD or Kernel, bfdd with BFD only.
	zebra, bfdd *netns.Process
}

var frrConf = template.Must(template.New("bgpd.conf").Parse(`! written by the test
frr defaults traditional
log stdout informational
{{- if .Accept.IsValid}}
ip prefix-list juneau-in seq 10 permit {{.Accept}} ge 32 le 32
route-map juneau-in permit 10
 match ip address prefix-list juneau-in
{{- end}}
router bgp {{.AS}}
 bgp router-id {{.RouterID}}
{{- if not .Accept.IsValid}}
 no bgp ebgp-requires-policy
{{- end}}
 bgp graceful-restart
{{- range .Neighbors}}
 neighbor {{.Address}} remote-as {{.AS}}
 neighbor {{.Address}} passive
 neighbor {{.Address}} update-source {{.Local}}
{{- if .Password}}
 neighbor {{.Address}} password {{.Password}}
{{- end}}
{{- if .Multihop}}
 neighbor {{.Address}} ebgp-multihop
{{- end}}
{{- if .BFD}}
 neighbor {{.Address}} bfd
 neighbor {{.Address}} bfd profile juneau
{{- if .CheckControlPlane}}
 neighbor {{.Address}} bfd check-control-plane-failure
{{- end}}
{{- end}}
{{- end}}
 address-family ipv4 unicast
{{- range .Neighbors}}
  neighbor {{.Address}} activate
{{- if $.Accept.IsValid}}
  neighbor {{.Address}} route-map juneau-in in
{{- end}}
{{- end}}
 exit-address-family
`))

// bfddConf is bfdd's configuration: the profile the BGP neighbors marked BFD use.
var bfddConf = template.Must(template.New("bfdd.conf").Parse(`! written by the test
frr defaults traditional
log stdout informational
bfd
 profile juneau
  receive-interval {{.BFD.RxMillis}}
  transmit-interval {{.BFD.TxMillis}}
  detect-multiplier {{.BFD.Mult}}
 exit
exit
`))

// writeConf renders tmpl with cfg into dir/name.
func writeConf(t testing.TB, dir, name string, tmpl *template.Template, cfg Config) string {
	t.Helper()
	conf := filepath.Join(dir, name)
	f, err := os.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tmpl.Execute(f, templateData{cfg}); err != nil {
		t.Fatal(err)
	}
	return conf
}

// StartFRR writes the configuration and starts bgpd in ns (with zebra when a neighbor
// runs BFD or cfg.Kernel is set, and bfdd when a neighbor runs BFD); it returns once
// every daemon answers vtysh.
func StartFRR(t testing.TB, ns *netns.NS, cfg Config) *FRR {
	t.Helper()
	require.File(t, bgpdPath)
	require.File(t, vtyshPath)
	withZebra := cfg.hasBFD() || cfg.Kernel
	dir := t.TempDir()
	if withZebra {
		dir = frrDir(t)
	}
	r := &FRR{t: t, vtyDir: dir}
	// Common flags: bgpd stays root (-S: no frr user needed to reach the test's
	// directory); zebra and bfdd have no such flag and refuse to run as a user outside
	// the vty group, so they run as frr, the user the package made, in a directory of
	// its own. -P 0: no vty TCP port; the vty sockets, zebra's API socket and pid files
	// live in dir, so routers of several tests never meet.
	common := func(daemon string) []string {
		user := []string{"-u", "frr", "-g", "frr"}
		if daemon == "bgpd" {
			user = []string{"-S"}
		}
		return append(user, "-P", "0", "-i", filepath.Join(dir, daemon+".pid"), "--vty_socket", dir)
	}
	zserv := filepath.Join(dir, "zserv.api")
	bgpdArgs := append(common("bgpd"), "-f", writeConf(t, dir, "bgpd.conf", frrConf, cfg))
	if withZebra {
		require.File(t, zebraPath)
		// zebra first, serving its API, then bfdd and bgpd: a daemon that finds no zebra
		// retries only seconds later, and bgpd asks for no BFD session meanwhile.
		r.zebra = ns.Start(zebraPath, append(common("zebra"), "-z", zserv, "-f", writeConf(t, dir, "zebra.conf", zebraConf, cfg))...)
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			if r.zebra.Exited() {
				return false, fmt.Errorf("zebra exited:\n%s", r.zebra.Output())
			}
			_, err := os.Stat(zserv)
			return err == nil, nil
		}); err != nil {
			t.Fatalf("zebra did not start: %v\n%s", err, r.zebra.Output())
		}
		if cfg.hasBFD() {
			require.File(t, bfddPath)
			r.bfdd = ns.Start(bfddPath, append(common("bfdd"), "-z", zserv, "--bfdctl", filepath.Join(dir, "bfdd.sock"),
				"-f", writeConf(t, dir, "bfdd.conf", bfddConf, cfg))...)
		}
		bgpdArgs = append(bgpdArgs, "-z", zserv)
	} else {
		bgpdArgs = append(bgpdArgs, "-Z") // no zebra
	}
	r.proc = ns.Start(bgpdPath, bgpdArgs...)
	daemons := map[string]*netns.Process{"bgpd": r.proc, "zebra": r.zebra, "bfdd": r.bfdd}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for name, p := range daemons {
			if p == nil {
				continue
			}
			if p.Exited() {
				return false, fmt.Errorf("%s exited:\n%s", name, p.Output())
			}
			if _, err := r.daemonCommand(name, "show version"); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("FRR did not start: %v\n%s", err, r.Log())
	}
	return r
}

// frrDir is a directory the frr user owns, removed when the test ends.
func frrDir(t testing.TB) string {
	t.Helper()
	u, err := user.Lookup("frr")
	if err != nil {
		require.Unmet(t, "needs the frr user of Debian's frr package: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "juneau-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// zebraConf is zebra's configuration: nothing but its log.
var zebraConf = template.Must(template.New("zebra.conf").Parse(`! written by the test
frr defaults traditional
log stdout informational
`))

// Command runs one vtysh command against this bgpd.
func (r *FRR) Command(command string) (string, error) { return r.daemonCommand("bgpd", command) }

// daemonCommand runs one vtysh command against one of the daemons.
func (r *FRR) daemonCommand(daemon, command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, vtyshPath, "--vty_socket", r.vtyDir, "-d", daemon, "-c", command).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh -d %s -c %q: %w: %s", daemon, command, err, out)
	}
	return string(out), nil
}

// Log is what bgpd printed so far, and zebra and bfdd when they run.
func (r *FRR) Log() string {
	out := r.proc.Output()
	for name, p := range map[string]*netns.Process{"zebra": r.zebra, "bfdd": r.bfdd} {
		if p != nil {
			out += "\n--- " + name + ":\n" + p.Output()
		}
	}
	return out
}

// Routes returns bgpd's IPv4 unicast table: prefix → next hop of the best path.
func (r *FRR) Routes() (map[string]string, error) {
	out, err := r.Command("show bgp ipv4 unicast json")
	if err != nil {
		return nil, err
	}
	var table struct {
		Routes map[string][]struct {
			Valid    bool `json:"valid"`
			Bestpath bool `json:"bestpath"`
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		return nil, fmt.Errorf("decoding %q: %w", out, err)
	}
	routes := map[string]string{}
	for prefix, paths := range table.Routes {
		for _, p := range paths {
			if p.Valid && p.Bestpath && len(p.Nexthops) > 0 {
				routes[prefix] = p.Nexthops[0].IP
			}
		}
	}
	return routes, nil
}

// WaitRoutes polls until bgpd's table holds exactly want, prefix → next hop.
func (r *FRR) WaitRoutes(timeout time.Duration, want map[string]string) {
	r.t.Helper()
	if got, err := pollTable(timeout, want, r.Routes); err != nil {
		r.t.Fatalf("FRR routes %v, want %v: %v\n%s", got, want, err, r.Log())
	}
}

// NeighborState is bgpd's state of the session with addr ("Established", "Active",
// ...), from `show bgp neighbors <addr> json`.
func (r *FRR) NeighborState(addr string) (string, error) {
	out, err := r.Command("show bgp neighbors " + addr + " json")
	if err != nil {
		return "", err
	}
	var neighbors map[string]struct {
		State string `json:"bgpState"`
	}
	if err := json.Unmarshal([]byte(out), &neighbors); err != nil {
		return "", fmt.Errorf("decoding %q: %w", out, err)
	}
	n, ok := neighbors[addr]
	if !ok {
		return "", fmt.Errorf("no neighbor %s in %q", addr, out)
	}
	return n.State, nil
}
