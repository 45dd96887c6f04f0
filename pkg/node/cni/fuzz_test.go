package cni

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
)

// maxErrorBytes bounds every error the plugin's parsers return: the runtime puts the
// message into the Pod's events and logs, whatever the input.
const maxErrorBytes = 1024

// fuzzEIP is the ElasticIP FuzzPluginInput plumbs on the primary NIC.
var fuzzEIP = netip.MustParsePrefix("10.225.51.6/32")

// FuzzPluginInput feeds what a runtime hands the plugin — the network configuration on
// stdin (with the primary plugin's prevResult), CNI_ARGS, CNI_IFNAME and
// CNI_CONTAINERID — to everything ADD computes from it before touching a kernel: the
// configuration, the Pod, the state file's path and the result written back. Nothing
// panics; errors are bounded in size; an accepted configuration has sane settings; the
// Pod named by CNI_ARGS survives a round trip; the state file stays in its directory;
// and the result, passed through or rewritten, is printable in the configuration's
// version and parses back to what juneau meant.
func FuzzPluginInput(f *testing.F) {
	for _, v := range pluginVersions().SupportedVersions() {
		f.Add([]byte(`{"cniVersion":"`+v+`","name":"k8s","type":"juneau","prevResult":`+prevResultFor(f, v)+`}`),
			"IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=9c0e", "eth0", "abc123")
	}
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"k8s","type":"juneau","waitSeconds":0.5,"agentSocket":"/tmp/a.sock"}`), "", "eth0", "c")
	f.Fuzz(func(t *testing.T, stdin []byte, args, ifName, containerID string) {
		conf, err := parseConfig(stdin)
		checkBounded(t, "parseConfig", err)
		if err == nil {
			checkConfig(t, conf)
		}
		pod, err := parsePodArgs(args)
		checkBounded(t, "parsePodArgs", err)
		if err == nil {
			checkPod(t, args, pod)
		}
		checkStatePath(t, containerID, ifName)
		if err == nil && conf != nil && conf.prev != nil && slices.Contains(pluginVersions().SupportedVersions(), conf.CNIVersion) {
			checkResults(t, conf, ifName)
		}
	})
}

// prevResultFor is the result ptp writes, in cniVersion v.
func prevResultFor(tb testing.TB, v string) string {
	tb.Helper()
	res, err := current.NewResultFromResult(mustResult(tb, ptpPrevResult))
	if err != nil {
		tb.Fatal(err)
	}
	out, err := res.GetAsVersion(v)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func mustResult(tb testing.TB, s string) cnitypes.Result {
	tb.Helper()
	r, err := current.NewResult([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func checkBounded(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && len(err.Error()) > maxErrorBytes {
		t.Fatalf("%s: error of %d bytes (at most %d): %.200s…", what, len(err.Error()), maxErrorBytes, err)
	}
}

func checkConfig(t *testing.T, conf *Config) {
	t.Helper()
	if conf.AgentSocket == "" || conf.StateDir == "" {
		t.Fatalf("accepted configuration without socket or state directory: %+v", conf)
	}
	if w := conf.Wait(); w < 0 || w > MaxWait {
		t.Fatalf("accepted waitSeconds %v: wait %v, want 0 to %v", *conf.WaitSeconds, w, MaxWait)
	}
	if conf.prev != nil && conf.prevErr != nil {
		t.Fatalf("prevResult both read and refused: %v", conf.prevErr)
	}
	checkBounded(t, "prevResult", conf.prevErr)
}

// checkPod: the Pod named by CNI_ARGS is named again when its arguments are written the
// way a runtime writes them.
func checkPod(t *testing.T, args string, pod podRef) {
	t.Helper()
	if pod.Name == "" || pod.Namespace == "" {
		t.Fatalf("parsePodArgs(%q) = %+v without name or namespace", args, pod)
	}
	again := "K8S_POD_NAMESPACE=" + pod.Namespace + ";K8S_POD_NAME=" + pod.Name
	if pod.UID != "" {
		again += ";K8S_POD_UID=" + string(pod.UID)
	}
	if back, err := parsePodArgs(again); err != nil || back != pod {
		t.Fatalf("parsePodArgs(%q) = %+v, but %q gives %+v, %v", args, pod, again, back, err)
	}
}

// checkStatePath: whatever the runtime passes, the state file is a file of the state
// directory named after container and interface, or refused.
func checkStatePath(t *testing.T, containerID, ifName string) {
	t.Helper()
	const dir = "/var/lib/cni/juneau"
	p, err := stateStore{dir: dir}.path(containerID, ifName)
	checkBounded(t, "state path", err)
	if err != nil {
		return
	}
	if filepath.Dir(p) != dir || filepath.Base(p) != containerID+"-"+ifName+".json" {
		t.Fatalf("state of container %q interface %q at %q, outside %s", containerID, ifName, p, dir)
	}
}

// checkResults: the primary plugin's result passed through, and rewritten with the
// ElasticIP on CNI_IFNAME, converts to the configuration's version and back.
func checkResults(t *testing.T, conf *Config, ifName string) {
	t.Helper()
	pass := roundTrip(t, conf.prev, conf.CNIVersion)
	if len(pass.IPs) != len(conf.prev.IPs) || len(pass.Interfaces) != len(conf.prev.Interfaces) || len(pass.Routes) != len(conf.prev.Routes) {
		t.Fatalf("passing the primary result through in %s changed it: %+v → %+v", conf.CNIVersion, conf.prev, pass)
	}
	nic := plumbed{nicPlan: nicPlan{Interface: ifName, Address: fuzzEIP, Primary: true,
		Routes: []route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: directnic.Gateway(netip.MustParseAddr("10.225.51.5")), OnLink: true}}}}
	res, err := rewriteResult(conf.prev, ifName, "/var/run/netns/pod", []plumbed{nic})
	checkBounded(t, "rewriteResult", err)
	if err != nil {
		return
	}
	back := roundTrip(t, res, conf.CNIVersion)
	if len(back.IPs) == 0 || back.IPs[0].Address.String() != fuzzEIP.String() || back.IPs[0].Interface == nil ||
		*back.IPs[0].Interface >= len(back.Interfaces) || back.Interfaces[*back.IPs[0].Interface].Name != ifName {
		t.Fatalf("rewritten result in %s does not give %s to %q first: %+v", conf.CNIVersion, fuzzEIP, ifName, back)
	}
	for _, ip := range back.IPs[1:] {
		if ip.Address.IP.To4() != nil && ip.Interface != nil && *ip.Interface == *back.IPs[0].Interface {
			t.Fatalf("rewritten result keeps IPv4 %v on %q besides the ElasticIP", ip.Address, ifName)
		}
	}
}

// roundTrip prints res as the plugin does and reads it back as the runtime does.
func roundTrip(t *testing.T, res *current.Result, cniVersion string) *current.Result {
	t.Helper()
	out, err := resultAs(res, cniVersion)
	if err != nil {
		t.Fatalf("cannot write the result in cniVersion %q: %v", cniVersion, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("cannot encode the result in cniVersion %q: %v", cniVersion, err)
	}
	read, err := version.NewResult(cniVersion, b)
	if err != nil {
		t.Fatalf("the result written in cniVersion %q does not parse back: %v\n%s", cniVersion, err, b)
	}
	back, err := current.NewResultFromResult(read)
	if err != nil {
		t.Fatalf("the result written in cniVersion %q does not convert back: %v\n%s", cniVersion, err, b)
	}
	return back
}
