package cnitest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/loutres/juneau/test/netns"
)

// ChainOptions shape the network configuration list Chain returns.
type ChainOptions struct {
	// Name of the network; unique per test keeps iptables chains and caches apart.
	Name string
	// CNIVersion of the list, "1.0.0" when empty.
	CNIVersion string
	// Subnet host-local allocates Pod IPs from, e.g. "10.244.1.0/24".
	Subnet string
	// Subnet6, when set, makes the Pods dual-stack: host-local allocates an IPv6
	// address from it too (a second range) and routes ::/0.
	Subnet6 string
	// IPAMDataDir is host-local's lease directory (a temporary directory in tests).
	IPAMDataDir string
	// AgentSocket, StateDir, LogFile, WaitSeconds configure juneau (WaitSeconds 0:
	// the plugin's default).
	AgentSocket string
	StateDir    string
	LogFile     string
	WaitSeconds float64
	// WithoutJuneau leaves juneau out of the chain (the primary alone).
	WithoutJuneau bool
	// Bridge makes the reference bridge plugin (bridge "cni0", gateway, ipMasq) the
	// primary instead of ptp; its directory is BridgePlugin(t).
	Bridge bool
}

// Chain is the network configuration list real clusters in the tests use: ptp with
// ipMasq (as clusters masquerade Pod egress) and host-local IPAM, then juneau:
//
//	{"cniVersion":"1.0.0","name":"<name>","plugins":[
//	  {"type":"ptp","ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.1.0/24"}]],
//	   "routes":[{"dst":"0.0.0.0/0"}],"dataDir":"<dir>"}},
//	  {"type":"juneau","agentSocket":"<socket>","waitSeconds":<s>,"stateDir":"<dir>","logFile":"<file>","logVerbosity":4}]}
func Chain(o ChainOptions) []byte {
	if o.CNIVersion == "" {
		o.CNIVersion = "1.0.0"
	}
	ranges := [][]map[string]string{{{"subnet": o.Subnet}}}
	routes := []map[string]string{{"dst": "0.0.0.0/0"}}
	if o.Subnet6 != "" {
		ranges = append(ranges, []map[string]string{{"subnet": o.Subnet6}})
		routes = append(routes, map[string]string{"dst": "::/0"})
	}
	plugins := []map[string]any{{
		"type":   "ptp",
		"ipMasq": true,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  ranges,
			"routes":  routes,
			"dataDir": o.IPAMDataDir,
		},
	}}
	if o.Bridge {
		plugins[0]["type"] = "bridge"
		plugins[0]["bridge"] = "cni0"
		plugins[0]["isGateway"] = true
	}
	if !o.WithoutJuneau {
		juneau := map[string]any{
			"type":         "juneau",
			"agentSocket":  o.AgentSocket,
			"stateDir":     o.StateDir,
			"logFile":      o.LogFile,
			"logVerbosity": 4,
		}
		if o.WaitSeconds > 0 {
			juneau["waitSeconds"] = o.WaitSeconds
		}
		plugins = append(plugins, juneau)
	}
	b, err := json.Marshal(map[string]any{"cniVersion": o.CNIVersion, "name": o.Name, "plugins": plugins})
	if err != nil {
		panic(fmt.Sprintf("marshal conflist: %v", err))
	}
	return b
}

// Runtime runs a network configuration list through libcni from inside a Node
// namespace, as a container runtime on that Node would: the plugins' processes start
// in the Node namespace and see it as their host.
type Runtime struct {
	Node *netns.NS
	CNI  *libcni.CNIConfig
	List *libcni.NetworkConfigList
}

// NewRuntime parses conflist and looks plugins up in path (Plugins(t)).
func NewRuntime(t testing.TB, node *netns.NS, path []string, conflist []byte) *Runtime {
	t.Helper()
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		t.Fatalf("parse conflist: %v\n%s", err, conflist)
	}
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: testLog{t}}, PluginDecoder: version.PluginDecoder{}}
	return &Runtime{Node: node, CNI: libcni.NewCNIConfigWithCacheDir(path, t.TempDir(), exec), List: list}
}

// testLog passes what plugins write to stderr to the test log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// callTimeout bounds one runtime call (juneau's ADD may wait for the agent).
const callTimeout = time.Minute

func (r *Runtime) in(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// Plugins are exec'ed from the thread Do locked into the Node namespace, so they
	// start there.
	return r.Node.Do(func() error { return fn(ctx) })
}

// Add runs ADD through the chain and returns the final result, converted to the 1.0
// form whatever the list's version.
func (r *Runtime) Add(rt *libcni.RuntimeConf) (*current.Result, error) {
	res, err := r.AddRaw(rt)
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(res)
}

// AddRaw runs ADD through the chain and returns the final result as the runtime
// received it, in the list's version.
func (r *Runtime) AddRaw(rt *libcni.RuntimeConf) (cnitypes.Result, error) {
	var res cnitypes.Result
	err := r.in(func(ctx context.Context) error {
		var err error
		res, err = r.CNI.AddNetworkList(ctx, r.List, rt)
		return err
	})
	return res, err
}

// Del runs DEL through the chain (libcni passes the cached result as prevResult).
func (r *Runtime) Del(rt *libcni.RuntimeConf) error {
	return r.in(func(ctx context.Context) error { return r.CNI.DelNetworkList(ctx, r.List, rt) })
}

// Check runs CHECK through the chain.
func (r *Runtime) Check(rt *libcni.RuntimeConf) error {
	return r.in(func(ctx context.Context) error { return r.CNI.CheckNetworkList(ctx, r.List, rt) })
}

// PodConf is the runtime configuration of a Kubernetes Pod's eth0, with the CNI_ARGS
// kubelet's runtimes pass.
func PodConf(containerID, netnsPath, namespace, pod, uid string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: containerID,
		NetNS:       netnsPath,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", namespace},
			{"K8S_POD_NAME", pod},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID},
			{"K8S_POD_UID", uid},
		},
	}
}
