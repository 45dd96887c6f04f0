package bgprouter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	vtyshPath = "/usr/bin/vtysh"
)

// FRR is a running FRR bgpd (without zebra: it learns routes and installs none).
type FRR struct {
	t      testing.TB
	vtyDir string
	proc   *netns.Process
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

// StartFRR writes the configuration and starts bgpd in ns; it returns once bgpd
// answers vtysh.
func StartFRR(t testing.TB, ns *netns.NS, cfg Config) *FRR {
	t.Helper()
	require.File(t, bgpdPath)
	require.File(t, vtyshPath)
	dir := t.TempDir()
	conf := filepath.Join(dir, "bgpd.conf")
	f, err := os.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := frrConf.Execute(f, cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := &FRR{t: t, vtyDir: dir}
	// -S: stay root (no frr user needed to reach the test's directory); -Z: no zebra;
	// -P 0: no vty TCP port; the vty socket and pid file live in dir.
	r.proc = ns.Start(bgpdPath, "-S", "-Z", "-P", "0", "-f", conf, "-i", filepath.Join(dir, "bgpd.pid"), "--vty_socket", dir)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if r.proc.Exited() {
			return false, fmt.Errorf("bgpd exited:\n%s", r.proc.Output())
		}
		_, err := r.Command("show bgp summary")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("bgpd did not start: %v\n%s", err, r.proc.Output())
	}
	return r
}

// Command runs one vtysh command against this bgpd.
func (r *FRR) Command(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, vtyshPath, "--vty_socket", r.vtyDir, "-d", "bgpd", "-c", command).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh -c %q: %w: %s", command, err, out)
	}
	return string(out), nil
}

// Log is what bgpd printed so far.
func (r *FRR) Log() string { return r.proc.Output() }

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
