package cni

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// supported lists the versions the plugin must speak, oldest first.
func supported() []string { return []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} }

// ipVersion is the ips[].version member the 0.3/0.4 result form carries and the 1.0
// form dropped.
func ipVersion(cniVersion, v string) string {
	if strings.HasPrefix(cniVersion, "0.") {
		return `"version":"` + v + `",`
	}
	return ""
}

// dualStackPrevResult is a ptp-like dual-stack result written in cniVersion.
func dualStackPrevResult(cniVersion string) string {
	return fmt.Sprintf(`{"cniVersion":%q,
	  "interfaces":[{"name":"veth1a2b3c4d","mac":"aa:bb:cc:00:00:01"},
	                {"name":"eth0","mac":"aa:bb:cc:00:00:02","sandbox":"/var/run/netns/pod"}],
	  "ips":[{%s"interface":1,"address":"10.244.1.5/24","gateway":"10.244.1.1"},
	         {%s"interface":1,"address":"fd00:10:244:1::5/64","gateway":"fd00:10:244:1::1"}],
	  "routes":[{"dst":"0.0.0.0/0","gw":"10.244.1.1"},{"dst":"::/0","gw":"fd00:10:244:1::1"}],
	  "dns":{"nameservers":["10.96.0.10"]}}`,
		cniVersion, ipVersion(cniVersion, "4"), ipVersion(cniVersion, "6"))
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestResultRoundTripPerVersion: for every supported version the primary's result in
// that version is read, rewritten (eth0 and an extra NIC carry ElasticIPs) and written
// back in the same version, byte for byte what a runtime of that version expects: the
// ElasticIP is the only IPv4 address of eth0, with ips[].version where the version has
// it, and the IPv6 address, route and DNS of the primary stay.
func TestResultRoundTripPerVersion(t *testing.T) {
	for _, v := range supported() {
		t.Run(v, func(t *testing.T) {
			conf, err := parseConfig([]byte(`{"cniVersion":"` + v + `","name":"k8s","type":"juneau","prevResult":` +
				dualStackPrevResult(v) + `}`))
			if err != nil || conf.prevErr != nil || conf.prev == nil {
				t.Fatalf("parseConfig: %v, prevErr %v, prev %v", err, conf.prevErr, conf.prev)
			}
			plans, err := buildPlan("c1", "eth0", append(nicsOf("eth0", "10.225.51.6/32"), nicsOf("ext0", "10.225.51.7/32")...))
			if err != nil {
				t.Fatal(err)
			}
			plans[0].HostInterface = "veth1a2b3c4d"
			res, err := rewriteResult(conf.prev, "eth0", "/var/run/netns/pod", []plumbed{{nicPlan: plans[0]},
				{nicPlan: plans[1], PodMAC: "aa:00:00:00:00:02", HostMAC: "aa:00:00:00:00:01"}})
			if err != nil {
				t.Fatalf("rewriteResult: %v", err)
			}
			out, err := resultAs(res, conf.CNIVersion)
			if err != nil {
				t.Fatalf("resultAs: %v", err)
			}
			got, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`{"cniVersion":%q,
			  "interfaces":[{"name":"veth1a2b3c4d","mac":"aa:bb:cc:00:00:01"},
			                {"name":"eth0","mac":"aa:bb:cc:00:00:02","sandbox":"/var/run/netns/pod"},
			                {"name":%q,"mac":"aa:00:00:00:00:01"},
			                {"name":"ext0","mac":"aa:00:00:00:00:02","sandbox":"/var/run/netns/pod"}],
			  "ips":[{%s"interface":1,"address":"10.225.51.6/32","gateway":"169.254.0.1"},
			         {%s"interface":1,"address":"fd00:10:244:1::5/64","gateway":"fd00:10:244:1::1"}],
			  "routes":[{"dst":"::/0","gw":"fd00:10:244:1::1"},{"dst":"0.0.0.0/0","gw":"169.254.0.1"}],
			  "dns":{"nameservers":["10.96.0.10"]}}`,
				v, HostVethName("c1", "ext0"), ipVersion(v, "4"), ipVersion(v, "6"))
			if !jsonEqual(t, got, []byte(want)) {
				t.Errorf("result\n got %s\nwant %s", got, want)
			}

			// What the runtime does with the output: decode it as the configuration's version.
			back, err := version.NewResult(v, got)
			if err != nil {
				t.Fatalf("a %s runtime cannot read the result: %v", v, err)
			}
			if back.Version() != v {
				t.Errorf("result version %q, want %q", back.Version(), v)
			}
			cur, err := current.NewResultFromResult(back)
			if err != nil {
				t.Fatal(err)
			}
			if ip := cur.IPs[0]; ip.Address.String() != "10.225.51.6/32" || ip.Interface == nil ||
				cur.Interfaces[*ip.Interface].Name != "eth0" {
				t.Errorf("the runtime reads the Pod IP as %v, want 10.225.51.6/32 on eth0", ip)
			}
		})
	}
}

// TestPassThroughPerVersion: without direct NICs the primary's result comes out as it
// went in, in the configuration's version.
func TestPassThroughPerVersion(t *testing.T) {
	for _, v := range supported() {
		prev := dualStackPrevResult(v)
		conf, err := parseConfig([]byte(`{"cniVersion":"` + v + `","name":"k8s","type":"juneau","prevResult":` + prev + `}`))
		if err != nil || conf.prevErr != nil {
			t.Fatalf("%s: parseConfig: %v, prevErr %v", v, err, conf.prevErr)
		}
		out, err := resultAs(conf.prev, conf.CNIVersion)
		if err != nil {
			t.Fatalf("%s: resultAs: %v", v, err)
		}
		if got := mustJSON(t, out); !jsonEqual(t, []byte(got), []byte(prev)) {
			t.Errorf("%s: result\n got %s\nwant %s", v, got, prev)
		}
	}
}

// TestPrevResultOfAnotherVersion: a prevResult the configuration's version cannot
// describe fails ADD (not the parse, so DEL still cleans up), naming the version.
func TestPrevResultOfAnotherVersion(t *testing.T) {
	for _, tc := range []struct{ conf, prev string }{
		{"0.4.0", "1.0.0"},
		{"0.3.1", "1.1.0"},
		{"1.0.0", "0.4.0"},
	} {
		conf, err := parseConfig([]byte(`{"cniVersion":"` + tc.conf + `","type":"juneau","prevResult":` +
			dualStackPrevResult(tc.prev) + `}`))
		if err != nil {
			t.Errorf("conf %s, prevResult %s: %v, want the configuration to parse", tc.conf, tc.prev, err)
			continue
		}
		if conf.prev != nil || conf.prevErr == nil || !strings.Contains(conf.prevErr.Error(), `cniVersion "`+tc.conf+`"`) {
			t.Errorf("conf %s, prevResult %s: prev %v, prevErr %v; want an error naming cniVersion %q",
				tc.conf, tc.prev, conf.prev, conf.prevErr, tc.conf)
		}
	}
}

// TestResultAsUnknownVersion: conversion to a version the CNI library does not know
// fails with an error naming it (skel refuses such configurations before ADD runs).
func TestResultAsUnknownVersion(t *testing.T) {
	_, err := resultAs(prevResult(t), "9.9.9")
	if err == nil || !strings.Contains(err.Error(), `"9.9.9"`) {
		t.Errorf("resultAs(9.9.9) = %v, want an error naming the version", err)
	}
}

func TestPluginVersions(t *testing.T) {
	if got := pluginVersions().SupportedVersions(); !reflect.DeepEqual(got, supported()) {
		t.Errorf("supported versions = %v, want %v", got, supported())
	}
}
