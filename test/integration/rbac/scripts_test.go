package rbac

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/node/sysctl"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/require"
)

// The node DaemonSet's scripts run with the image's /bin/sh, awk, ip and coreutils; the
// tests run them with the host's (Debian's dash and mawk, like the image).

// nodeScripts writes the scripts of the juneau-node-scripts ConfigMap into a directory.
func nodeScripts(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"sh", "awk", "stat"} {
		require.Binary(t, bin)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := readManifests(t, filepath.Join(root, "manifests", "30-node.yaml"))
	cm := convert[corev1.ConfigMap](t, findObject(t, objs, "ConfigMap", "juneau-node-scripts"))
	dir := t.TempDir()
	for name, body := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// conflistEdit runs conflist.awk with op on input and returns its output and exit code.
func conflistEdit(t *testing.T, scripts, op, input string) (string, int) {
	t.Helper()
	cmd := exec.Command("awk", "-f", filepath.Join(scripts, "conflist.awk"),
		"-v", "op="+op, "-v", "type=juneau", "-v", `entry={"type": "juneau"}`, "-v", "want=cniVersion")
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("awk: %v %s", err, errOut.String())
	}
	return out.String(), code
}

const ptpConflist = `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    {"type": "ptp", "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.1.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// TestConflistEdit: the entry is appended to the top-level plugin list of any
// well-formed list, found again, and removed to give back the original bytes.
func TestConflistEdit(t *testing.T) {
	scripts := nodeScripts(t)
	for name, in := range map[string]string{
		"pretty":  ptpConflist,
		"compact": `{"cniVersion":"1.1.0","name":"kindnet","plugins":[{"type":"ptp","ipam":{"type":"host-local"}},{"type":"portmap"}]}` + "\n",
		"plugins not last, tricky strings": `{"cniVersion": "1.0.0", "plugins": [ {"type": "bridge", "note": "a \"]\" and a \\ { [ \"type\": \"juneau\"" } ],
  "name": "plugins ] [", "x": {"plugins": [1, 2]}}` + "\n",
		"empty list":         `{"cniVersion": "1.0.0", "name": "n", "plugins": []}` + "\n",
		"juneau only nested": `{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "ptp", "ipam": {"type": "juneau"}}]}` + "\n",
		"CRLF":               strings.ReplaceAll(ptpConflist, "\n", "\r\n"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, code := conflistEdit(t, scripts, "has", in); code != 1 {
				t.Fatalf("has on the original: exit %d, want 1", code)
			}
			added, code := conflistEdit(t, scripts, "add", in)
			if code != 0 {
				t.Fatalf("add: exit %d", code)
			}
			list, err := libcni.ConfListFromBytes([]byte(added))
			if err != nil {
				t.Fatalf("the result is no valid network configuration list: %v\n%s", err, added)
			}
			types := make([]string, len(list.Plugins))
			for i, p := range list.Plugins {
				types[i] = p.Network.Type
			}
			if types[len(types)-1] != "juneau" {
				t.Errorf("plugins after add: %v, want juneau last", types)
			}
			checkOnlyPluginAdded(t, in, added)
			if _, code := conflistEdit(t, scripts, "has", added); code != 0 {
				t.Errorf("has after add: exit %d, want 0", code)
			}
			if removed, code := conflistEdit(t, scripts, "remove", added); code != 0 || removed != in {
				t.Errorf("remove after add: exit %d\n%q\nwant the original\n%q", code, removed, in)
			}
		})
	}
	if v, _ := conflistEdit(t, scripts, "get", ptpConflist); strings.TrimSpace(v) != "1.0.0" {
		t.Errorf("cniVersion read as %q", v)
	}
	if _, code := conflistEdit(t, scripts, "has", `{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}`); code != 2 {
		t.Errorf("has on a single-plugin .conf: exit %d, want 2", code)
	}
	// A file still being written is neither accepted nor refused: exit 4, try again.
	for _, partial := range []string{"", " \n", ptpConflist[:len(ptpConflist)/2], `{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "ptp"}]`} {
		if _, code := conflistEdit(t, scripts, "has", partial); code != 4 {
			t.Errorf("has on %q: exit %d, want 4", partial, code)
		}
	}
}

// checkOnlyPluginAdded: apart from the new last plugin, the JSON is unchanged.
func checkOnlyPluginAdded(t *testing.T, before, after string) {
	t.Helper()
	var b, a map[string]any
	if err := json.Unmarshal([]byte(before), &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(after), &a); err != nil {
		t.Fatal(err)
	}
	plugins := a["plugins"].([]any)
	if last := plugins[len(plugins)-1].(map[string]any); len(last) != 1 || last["type"] != "juneau" {
		t.Errorf("added plugin %v, want {type: juneau}", last)
	}
	a["plugins"] = plugins[:len(plugins)-1]
	bj, _ := json.Marshal(b)
	aj, _ := json.Marshal(a)
	if !bytes.Equal(bj, aj) {
		t.Errorf("add changed more than the plugin list:\n%s\n%s", bj, aj)
	}
}

// cniDirs is a fake node: the image's binary, the CNI bin and net.d directories.
type cniDirs struct {
	scripts, bin, net string
	juneau            string
}

func newCNIDirs(t *testing.T) cniDirs {
	t.Helper()
	d := cniDirs{scripts: nodeScripts(t), bin: t.TempDir(), net: t.TempDir(), juneau: framework.JuneauBinary(t)}
	return d
}

func (d cniDirs) command(ctx context.Context, mode string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(d.scripts, "install-cni.sh"), mode)
	cmd.Env = append(os.Environ(), append([]string{
		"JUNEAU_BINARY=" + d.juneau, "CNI_BIN_DIR=" + d.bin, "CNI_NET_DIR=" + d.net, "CNI_CHECK_INTERVAL=1",
	}, env...)...)
	return cmd
}

func (d cniDirs) run(t *testing.T, mode string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := d.command(ctx, mode, env...).CombinedOutput()
	return string(out), err
}

func (d cniDirs) write(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.net, name), []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (d cniDirs) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.net, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func chained(content string) bool { return strings.Contains(content, `{"type": "juneau"}`) }

// TestInstallCNI: the binary is installed, the first configuration (as runtimes pick
// it) is chained once and keeps its mode, other files stay untouched, and uninstall
// gives the original back.
func TestInstallCNI(t *testing.T) {
	d := newCNIDirs(t)
	other := strings.Replace(ptpConflist, "k8s-pod-network", "other", 1)
	d.write(t, "10-ptp.conflist", ptpConflist, 0o600)
	d.write(t, "20-other.conflist", other, 0o644)
	d.write(t, "05-notes.txt", "not a configuration", 0o644)

	out, err := d.run(t, "install")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	info, err := os.Stat(filepath.Join(d.bin, "juneau"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v %v, want mode 0755", info, err)
	}
	first := d.read(t, "10-ptp.conflist")
	if !chained(first) || d.read(t, "20-other.conflist") != other {
		t.Fatalf("after install:\n%s\nthe second file:\n%s", first, d.read(t, "20-other.conflist"))
	}
	if info, _ := os.Stat(filepath.Join(d.net, "10-ptp.conflist")); info.Mode().Perm() != 0o600 {
		t.Errorf("the configuration's mode became %v, want 0600", info.Mode().Perm())
	}
	if out, err := d.run(t, "install"); err != nil || d.read(t, "10-ptp.conflist") != first {
		t.Errorf("a second install changed the configuration (%v %s):\n%s", err, out, d.read(t, "10-ptp.conflist"))
	}
	entries, _ := os.ReadDir(d.net)
	if len(entries) != 3 {
		t.Errorf("net.d holds %d files after install, want 3 (no temporary files left)", len(entries))
	}

	if out, err := d.run(t, "uninstall"); err != nil || d.read(t, "10-ptp.conflist") != ptpConflist {
		t.Errorf("uninstall (%v %s) left:\n%s", err, out, d.read(t, "10-ptp.conflist"))
	}
	if _, err := os.Stat(filepath.Join(d.bin, "juneau")); err != nil {
		t.Errorf("uninstall removed the binary (DELs of existing Pods still need it): %v", err)
	}
	// The DaemonSet's uninstall switch turns install into uninstall.
	d.write(t, "10-ptp.conflist", first, 0o600)
	if out, err := d.run(t, "install", "JUNEAU_CNI_UNINSTALL=true"); err != nil || chained(d.read(t, "10-ptp.conflist")) {
		t.Errorf("install with JUNEAU_CNI_UNINSTALL=true (%v %s) left:\n%s", err, out, d.read(t, "10-ptp.conflist"))
	}
	// CNI_CONF_NAME chooses the file.
	if out, err := d.run(t, "install", "CNI_CONF_NAME=20-other.conflist"); err != nil ||
		!chained(d.read(t, "20-other.conflist")) || chained(d.read(t, "10-ptp.conflist")) {
		t.Errorf("install with CNI_CONF_NAME (%v %s)", err, out)
	}
}

// TestInstallCNIRefuses: a configuration juneau cannot be chained into fails the init
// container with the reason, and is left as it was.
func TestInstallCNIRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ file, content, reason string }{
		"CNI version without chaining": {"10-calico.conflist", strings.Replace(ptpConflist, "1.0.0", "0.2.0", 1), `declares cniVersion "0.2.0"`},
		"single plugin":                {"10-bridge.conf", `{"cniVersion": "1.0.0", "name": "n", "type": "bridge"}`, `has no "plugins" list`},
	} {
		t.Run(name, func(t *testing.T) {
			d := newCNIDirs(t)
			d.write(t, tc.file, tc.content, 0o644)
			out, err := d.run(t, "install")
			if err == nil || !strings.Contains(out, tc.reason) {
				t.Errorf("install: %v\n%s\nwant a failure saying %q", err, out, tc.reason)
			}
			if got := d.read(t, tc.file); got != tc.content {
				t.Errorf("the configuration was changed:\n%s", got)
			}
			if out, err := d.run(t, "install", "JUNEAU_CNI_CHAIN=false"); err != nil {
				t.Errorf("install with JUNEAU_CNI_CHAIN=false: %v\n%s", err, out)
			}
		})
	}
}

// TestInstallCNIWaitsAndKeeps: install waits for the primary plugin's configuration
// to be complete;
// keep chains again after the primary plugin rewrites it, and stops on SIGTERM.
func TestInstallCNIWaitsAndKeeps(t *testing.T) {
	d := newCNIDirs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The primary plugin has created its file but not written it yet.
	d.write(t, "10-ptp.conflist", "", 0o644)
	install := d.command(ctx, "install")
	if err := install.Start(); err != nil {
		t.Fatal(err)
	}
	d.write(t, "10-ptp.conflist", ptpConflist, 0o644)
	if err := install.Wait(); err != nil {
		t.Fatalf("install: %v", err)
	}
	if !chained(d.read(t, "10-ptp.conflist")) {
		t.Fatal("install did not chain the configuration written while it waited")
	}

	keep := d.command(ctx, "keep")
	var out bytes.Buffer
	keep.Stdout, keep.Stderr = &out, &out
	if err := keep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- keep.Wait() }()
	d.write(t, "10-ptp.conflist", ptpConflist, 0o644) // the primary plugin restarts and rewrites it
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return chained(d.read(t, "10-ptp.conflist")), nil
	}); err != nil {
		t.Fatalf("keep did not chain the rewritten configuration: %v", err)
	}
	if err := keep.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("keep on SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("keep did not stop on SIGTERM")
	}
}

// TestKeepCNIStops: at SIGTERM keep-cni waits for the agent's verdict; it removes the
// entry on "uninstall" only, and keeps it on "restart" or when no verdict comes.
func TestKeepCNIStops(t *testing.T) {
	for name, tc := range map[string]struct {
		verdict string // written after the SIGTERM; empty: none
		kept    bool
	}{
		"uninstall": {verdict: "uninstall: DaemonSet juneau-node/juneau-node no longer exists\n"},
		"restart":   {verdict: "restart: DaemonSet juneau-node/juneau-node still exists\n", kept: true},
	} {
		t.Run(name, func(t *testing.T) {
			d := newCNIDirs(t)
			verdict := filepath.Join(t.TempDir(), "verdict")
			d.write(t, "10-ptp.conflist", ptpConflist, 0o644)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			keep := d.command(ctx, "keep", "JUNEAU_SHUTDOWN_VERDICT="+verdict)
			var out bytes.Buffer
			keep.Stdout, keep.Stderr = &out, &out
			if err := keep.Start(); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return chained(d.read(t, "10-ptp.conflist")), nil
			}); err != nil {
				t.Fatalf("keep did not chain: %v\n%s", err, out.String())
			}
			if err := keep.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			// The agent decides after the signal reached both containers.
			if err := os.WriteFile(verdict, []byte(tc.verdict), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := keep.Wait(); err != nil {
				t.Fatalf("keep on SIGTERM: %v\n%s", err, out.String())
			}
			if got := chained(d.read(t, "10-ptp.conflist")); got != tc.kept {
				t.Errorf("after %q: entry kept %v, want %v\n%s", tc.verdict, got, tc.kept, out.String())
			}
			if !tc.kept && d.read(t, "10-ptp.conflist") != ptpConflist {
				t.Errorf("the configuration is not back to its bytes before install:\n%s", d.read(t, "10-ptp.conflist"))
			}
		})
	}
}

// TestSetSysctls: the init container sets exactly what the agent's sysctl package asks
// for, on the interface the agent would choose.
func TestSetSysctls(t *testing.T) {
	scripts := nodeScripts(t)
	run := func(iface string, env ...string) (string, string) {
		root := t.TempDir()
		for _, s := range sysctl.ExternalInterface(iface) {
			p := filepath.Join(root, s.Key)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("7\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sh", filepath.Join(scripts, "set-sysctls.sh"))
		cmd.Env = append(os.Environ(), append([]string{"SYSCTL_ROOT=" + root}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("set-sysctls.sh %v: %v\n%s", env, err, out)
		}
		return root, string(out)
	}
	check := func(root, iface string, ipv6 bool) {
		t.Helper()
		set := map[string]bool{}
		for _, s := range sysctl.ExternalInterfaceFor(iface, ipv6) {
			set[s.Key] = true
		}
		for _, s := range sysctl.ExternalInterface(iface) {
			want := s.Value
			if s.OnlyIf != "" || !set[s.Key] {
				want = "7" // written only from OnlyIf; IPv6 ones left alone without IPv6
			}
			b, err := os.ReadFile(filepath.Join(root, s.Key))
			if err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("%s = %q %v, want %s", s.Key, b, err, want)
			}
		}
	}
	root, _ := run("eth0.100", "EXTERNAL_INTERFACE=eth0.100", "HOST_IP=192.0.2.1", "JUNEAU_IPV6=true")
	check(root, "eth0.100", true)
	root, _ = run("eth0.100", "EXTERNAL_INTERFACE=eth0.100", "HOST_IP=192.0.2.1", "JUNEAU_IPV6=false")
	check(root, "eth0.100", false)

	// The interface holding the Node's address: loopback's 127.0.0.1 here (read only);
	// its only IPv6 address, ::1, is not global, so the IPv6 settings are left alone.
	require.Binary(t, "ip")
	root, out := run("lo", "EXTERNAL_INTERFACE=", "HOST_IP=127.0.0.1")
	check(root, "lo", false)
	if !strings.Contains(out, "external interface lo") {
		t.Errorf("set-sysctls.sh output %q does not name lo", out)
	}
}
