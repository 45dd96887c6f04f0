package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cnitypes "github.com/containernetworking/cni/pkg/types"
)

// pluginEnv makes the test binary act as the plugin (Main), so these tests go through
// skel's dispatch, where version negotiation happens before any command function runs.
const pluginEnv = "JUNEAU_CNI_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(pluginEnv) != "" {
		os.Exit(Main("test"))
	}
	os.Exit(m.Run())
}

// execPlugin runs the plugin as a runtime would, with stdin as the network
// configuration and cniArgs as CNI_ARGS. It returns stdout and, on a non-zero exit, the
// CNI error the plugin printed.
func execPlugin(t *testing.T, command, stdin, cniArgs string) ([]byte, *cnitypes.Error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CNI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, pluginEnv+"=1", "CNI_COMMAND="+command, "CNI_CONTAINERID=ctr1",
		"CNI_NETNS=/var/run/netns/none", "CNI_IFNAME=eth0", "CNI_PATH="+t.TempDir(), "CNI_ARGS="+cniArgs)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("run the plugin: %v", err)
	}
	e := &cnitypes.Error{}
	if jerr := json.Unmarshal(stdout.Bytes(), e); jerr != nil {
		t.Fatalf("%s exited %v without a CNI error on stdout (%v): %s\nstderr: %s", command, err, jerr, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), e
}

// pluginConf is the plugin's configuration in cniVersion (none if empty), with a state
// directory of its own.
func pluginConf(t *testing.T, cniVersion, extra string) string {
	t.Helper()
	v := ""
	if cniVersion != "" {
		v = `"cniVersion":"` + cniVersion + `",`
	}
	return `{` + v + `"name":"k8s","type":"juneau","stateDir":"` + filepath.Join(t.TempDir(), "state") + `"` + extra + `}`
}

func TestVersionCommand(t *testing.T) {
	out, e := execPlugin(t, "VERSION", `{"cniVersion":"1.1.0"}`, "")
	if e != nil {
		t.Fatalf("VERSION: %v", e)
	}
	var info struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("VERSION output %s: %v", out, err)
	}
	if strings.Join(info.SupportedVersions, ",") != strings.Join(supported(), ",") {
		t.Errorf("VERSION lists %v, want %v", info.SupportedVersions, supported())
	}
}

// TestUnsupportedVersionsRejected: ADD and DEL of a configuration in a version the
// plugin does not speak fail with code 1 and say which version was asked for and which
// are supported.
func TestUnsupportedVersionsRejected(t *testing.T) {
	wantSupported := `plugin supports ["0.3.0" "0.3.1" "0.4.0" "1.0.0" "1.1.0"]`
	for _, tc := range []struct{ conf, reported string }{
		{"", "0.1.0"}, // no cniVersion means 0.1.0
		{"0.1.0", "0.1.0"},
		{"0.2.0", "0.2.0"},
		{"1.2.0", "1.2.0"},
	} {
		for _, command := range []string{"ADD", "DEL"} {
			_, e := execPlugin(t, command, pluginConf(t, tc.conf, ""), "")
			if e == nil {
				t.Errorf("%s with cniVersion %q succeeded", command, tc.conf)
				continue
			}
			if e.Code != cnitypes.ErrIncompatibleCNIVersion || e.Msg != "incompatible CNI versions" ||
				!strings.Contains(e.Details, `config is "`+tc.reported+`"`) || !strings.Contains(e.Details, wantSupported) {
				t.Errorf("%s with cniVersion %q: %v (code %d), want code %d naming %q and %s",
					command, tc.conf, e, e.Code, cnitypes.ErrIncompatibleCNIVersion, tc.reported, wantSupported)
			}
		}
	}
}

// TestCommandsPerVersion: CHECK needs 0.4.0, GC and STATUS need 1.1.0; from those
// versions on the command itself runs.
func TestCommandsPerVersion(t *testing.T) {
	for _, tc := range []struct {
		command, version string
		wantCode         uint // 0: success
		wantMsg          string
	}{
		{"CHECK", "0.3.0", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow CHECK"},
		{"CHECK", "0.3.1", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow CHECK"},
		{"CHECK", "0.4.0", 0, ""}, // no state: nothing was plumbed, nothing to verify
		{"CHECK", "1.0.0", 0, ""},
		{"GC", "0.4.0", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow GC"},
		{"GC", "1.0.0", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow GC"},
		{"STATUS", "0.4.0", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow STATUS"},
		{"STATUS", "1.0.0", cnitypes.ErrIncompatibleCNIVersion, "config version does not allow STATUS"},
		// The command ran: the agent's socket does not exist.
		{"STATUS", "1.1.0", cnitypes.ErrPluginNotAvailable, "juneau node agent not reachable"},
		{"DEL", "0.3.0", 0, ""}, // no state: nothing to undo
	} {
		extra := `,"agentSocket":"` + filepath.Join(t.TempDir(), "none.sock") + `"`
		_, e := execPlugin(t, tc.command, pluginConf(t, tc.version, extra), "")
		switch {
		case tc.wantCode == 0 && e != nil:
			t.Errorf("%s %s: %v, want success", tc.command, tc.version, e)
		case tc.wantCode != 0 && (e == nil || e.Code != tc.wantCode || !strings.Contains(e.Msg, tc.wantMsg)):
			t.Errorf("%s %s: %v, want code %d %q", tc.command, tc.version, e, tc.wantCode, tc.wantMsg)
		}
	}
}

// TestAddPassThroughPerVersion: ADD for a sandbox that is not a Kubernetes Pod prints
// the primary's result in the configuration's version, through the real plugin.
func TestAddPassThroughPerVersion(t *testing.T) {
	for _, v := range supported() {
		prev := dualStackPrevResult(v)
		out, e := execPlugin(t, "ADD", pluginConf(t, v, `,"prevResult":`+prev), "IgnoreUnknown=1")
		if e != nil {
			t.Errorf("ADD %s: %v", v, e)
			continue
		}
		if !jsonEqual(t, out, []byte(prev)) {
			t.Errorf("ADD %s printed\n%s\nwant\n%s", v, out, prev)
		}
	}
	// A prevResult newer than the configuration is a decoding failure, naming the version.
	_, e := execPlugin(t, "ADD", pluginConf(t, "0.4.0", `,"prevResult":`+dualStackPrevResult("1.0.0")), "")
	if e == nil || e.Code != cnitypes.ErrDecodingFailure || !strings.Contains(e.Msg, `cniVersion "0.4.0"`) {
		t.Errorf("ADD 0.4.0 with a 1.0.0 prevResult: %v, want code %d naming the version", e, cnitypes.ErrDecodingFailure)
	}
}
