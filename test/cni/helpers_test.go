package cnitest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/netns"
)

// nodeAddrOnPtp is the gateway ptp gave the Pod (an address of the Node's host end).
func (f *fixture) nodeAddrOnPtp(res *current.Result) string {
	return res.IPs[0].Gateway.String()
}

func hasRule(t *testing.T, ns *netns.NS, from string, table, prio int) bool {
	t.Helper()
	rules, err := ns.Netlink().RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(rules, func(r netlink.Rule) bool {
		return r.Src != nil && r.Src.String() == from && r.Table == table && r.Priority == prio
	})
}

func rule(from string, table, prio int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Src = mustAddr(from).IPNet
	r.Table = table
	r.Priority = prio
	return r
}

func mustAddr(cidr string) *netlink.Addr {
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		panic(err)
	}
	return a
}

// execJuneau runs juneau alone with its configuration from the chain, extended by
// extra, from inside the Node namespace, and returns its stdout.
func (f *fixture) execJuneau(t *testing.T, command, containerID string, extra map[string]any) []byte {
	t.Helper()
	out, err := f.tryJuneau(command, containerID, extra)
	if err != nil {
		t.Fatalf("juneau %s: %v", command, err)
	}
	return out
}

func (f *fixture) tryJuneau(command, containerID string, extra map[string]any) ([]byte, error) {
	f.t.Helper()
	var list struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(f.conflist, &list); err != nil {
		f.t.Fatal(err)
	}
	conf := list.Plugins[len(list.Plugins)-1]
	conf["name"], conf["cniVersion"] = list.Name, "1.0.0"
	for k, v := range extra {
		conf[k] = v
	}
	b, err := json.Marshal(conf)
	if err != nil {
		f.t.Fatal(err)
	}
	plugin, err := invoke.FindInPath("juneau", f.rt.CNI.Path)
	if err != nil {
		f.t.Fatal(err)
	}
	if containerID == "" {
		containerID = f.conf.ContainerID
	}
	args := &invoke.Args{Command: command, ContainerID: containerID, NetNS: f.conf.NetNS, IfName: "eth0",
		PluginArgs: f.conf.Args, Path: strings.Join(f.rt.CNI.Path, ":")}
	var out []byte
	err = f.rt.in(func(ctx context.Context) error {
		var err error
		out, err = (&invoke.RawExec{}).ExecPlugin(ctx, plugin, b, args.AsEnv())
		return err
	})
	return out, err
}

func mustJSONResult(t *testing.T, r *current.Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
