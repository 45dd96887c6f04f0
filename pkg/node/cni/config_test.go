package cni

import (
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/pkg/node/cniserver"
)

const ptpPrevResult = `{
  "cniVersion": "1.0.0",
  "interfaces": [
    {"name": "veth1a2b3c4d", "mac": "aa:bb:cc:00:00:01"},
    {"name": "eth0", "mac": "aa:bb:cc:00:00:02", "sandbox": "/var/run/netns/pod"}
  ],
  "ips": [{"interface": 1, "address": "10.244.1.5/24", "gateway": "10.244.1.1"}],
  "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.1.1"}],
  "dns": {"nameservers": ["10.96.0.10"]}
}`

func TestParseConfigDefaults(t *testing.T) {
	conf, err := parseConfig([]byte(`{"cniVersion":"1.0.0","name":"k8s","type":"juneau","prevResult":` + ptpPrevResult + `}`))
	if err != nil {
		t.Fatalf("parseConfig: %v", err)
	}
	if conf.AgentSocket != cniserver.DefaultSocket {
		t.Errorf("AgentSocket = %q, want %q", conf.AgentSocket, cniserver.DefaultSocket)
	}
	if conf.StateDir != DefaultStateDir {
		t.Errorf("StateDir = %q, want %q", conf.StateDir, DefaultStateDir)
	}
	if conf.Wait() != DefaultWait {
		t.Errorf("Wait = %v, want %v", conf.Wait(), DefaultWait)
	}
	if conf.prev == nil || len(conf.prev.IPs) != 1 || conf.prev.IPs[0].Address.String() != "10.244.1.5/24" {
		t.Errorf("prevResult not parsed: %+v", conf.prev)
	}
}

func TestParseConfigOverrides(t *testing.T) {
	conf, err := parseConfig([]byte(`{"cniVersion":"1.0.0","name":"k8s","type":"juneau",
		"agentSocket":"/tmp/a.sock","waitSeconds":0.5,"stateDir":"/tmp/st","logFile":"/tmp/l","logVerbosity":4}`))
	if err != nil {
		t.Fatalf("parseConfig: %v", err)
	}
	if conf.AgentSocket != "/tmp/a.sock" || conf.StateDir != "/tmp/st" || conf.LogFile != "/tmp/l" || conf.LogVerbosity != 4 {
		t.Errorf("overrides lost: %+v", conf)
	}
	if conf.Wait() != 500*time.Millisecond {
		t.Errorf("Wait = %v, want 500ms", conf.Wait())
	}
	if conf.prev != nil {
		t.Errorf("prev = %+v without prevResult", conf.prev)
	}
	zero, err := parseConfig([]byte(`{"cniVersion":"1.0.0","type":"juneau","waitSeconds":0}`))
	if err != nil || zero.Wait() != 0 {
		t.Errorf("waitSeconds 0: wait %v, err %v; want 0 (ask once)", zero.Wait(), err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":      `{`,
		"negative wait": `{"cniVersion":"1.0.0","type":"juneau","waitSeconds":-1}`,
	} {
		if _, err := parseConfig([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A damaged prevResult fails ADD only (DEL must still clean up).
	for name, in := range map[string]string{
		"bad prevResult":   `{"cniVersion":"1.0.0","type":"juneau","prevResult":{"ips":[{"address":"nope"}]}}`,
		"version mismatch": `{"cniVersion":"1.0.0","type":"juneau","prevResult":{"cniVersion":"9.9.9"}}`,
	} {
		conf, err := parseConfig([]byte(in))
		if err != nil {
			t.Errorf("%s: %v, want the configuration to parse", name, err)
			continue
		}
		if conf.prevErr == nil || conf.prev != nil {
			t.Errorf("%s: prevErr %v, prev %v; want only prevErr", name, conf.prevErr, conf.prev)
		}
	}
}

func TestParsePodArgs(t *testing.T) {
	cases := []struct {
		args    string
		want    podRef
		wantErr string
	}{
		{"IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1",
			podRef{Namespace: "ns1", Name: "web", UID: "u-1"}, ""},
		{"K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web", podRef{Namespace: "ns1", Name: "web"}, ""},
		{"", podRef{}, errNotAPod.Error()},
		{"IgnoreUnknown=1", podRef{}, errNotAPod.Error()},
		{"K8S_POD_NAME=web", podRef{}, "without K8S_POD_NAMESPACE"},
		{"K8S_POD_NAME", podRef{}, "malformed pair"},
	}
	for _, tc := range cases {
		got, err := parsePodArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePodArgs(%q) err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parsePodArgs(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}
