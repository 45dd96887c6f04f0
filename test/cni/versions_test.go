package cnitest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// requireSupports fails the test unless juneau's VERSION answer (what the node
// DaemonSet's install script asks before chaining) lists cniVersion.
func (f *fixture) requireSupports(cniVersion string) {
	f.t.Helper()
	var info version.PluginInfo
	err := f.rt.in(func(ctx context.Context) error {
		var err error
		info, err = f.rt.CNI.GetVersionInfo(ctx, "juneau")
		return err
	})
	if err != nil {
		f.t.Fatalf("juneau VERSION: %v", err)
	}
	if !slices.Contains(info.SupportedVersions(), cniVersion) {
		f.t.Fatalf("juneau supports %v, not %s", info.SupportedVersions(), cniVersion)
	}
}

// requireEIPResult checks the chain's result as the runtime received it: in the list's
// version (with ips[].version before 1.0.0), naming the ElasticIP as the Pod's only
// IPv4 address, on eth0 in the Pod, and its only route as default via 169.254.0.1. It
// returns the result in the 1.0 form.
func (f *fixture) requireEIPResult(raw cnitypes.Result, cniVersion string) *current.Result {
	t := f.t
	t.Helper()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		CNIVersion string              `json:"cniVersion"`
		Interfaces []current.Interface `json:"interfaces"`
		IPs        []struct {
			Version   string `json:"version"`
			Interface *int   `json:"interface"`
			Address   string `json:"address"`
			Gateway   string `json:"gateway"`
		} `json:"ips"`
		Routes []cnitypes.Route `json:"routes"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("decode the result %s: %v", b, err)
	}
	if raw.Version() != cniVersion || got.CNIVersion != cniVersion {
		t.Errorf("result version %q (JSON %q), want the list's %q", raw.Version(), got.CNIVersion, cniVersion)
	}
	wantIPVersion := ""
	if strings.HasPrefix(cniVersion, "0.") {
		wantIPVersion = "4"
	}
	if len(got.IPs) != 1 || got.IPs[0].Address != eipWeb+"/32" || got.IPs[0].Gateway != "169.254.0.1" ||
		got.IPs[0].Version != wantIPVersion || got.IPs[0].Interface == nil {
		t.Fatalf("result %s: want ips only [{version %q address %s/32 gateway 169.254.0.1}]", b, wantIPVersion, eipWeb)
	}
	if i := *got.IPs[0].Interface; i < 0 || i >= len(got.Interfaces) ||
		got.Interfaces[i].Name != "eth0" || got.Interfaces[i].Sandbox != f.pod.Path() {
		t.Errorf("result %s: the ElasticIP is not reported on eth0 in the Pod", b)
	}
	if len(got.Routes) != 1 || got.Routes[0].Dst.String() != "0.0.0.0/0" || got.Routes[0].GW.String() != "169.254.0.1" {
		t.Errorf("result routes = %v, want only default via 169.254.0.1", got.Routes)
	}
	res, err := current.NewResultFromResult(raw)
	if err != nil {
		t.Fatalf("convert the result: %v", err)
	}
	return res
}

// checkDetectsMissingEIP: the chain's CHECK passes on the intact Pod, then fails once
// the ElasticIP is gone, juneau's naming the address. Lists older than 0.4.0 have no
// CHECK: the runtime and juneau both refuse it.
func (f *fixture) checkDetectsMissingEIP(cniVersion string) {
	t := f.t
	t.Helper()
	if ok, _ := version.GreaterThanOrEqualTo(cniVersion, "0.4.0"); !ok {
		if err := f.rt.Check(f.conf); !errors.Is(err, libcni.ErrorCheckNotSupp) {
			t.Errorf("CHECK of a %s list = %v, want %v", cniVersion, err, libcni.ErrorCheckNotSupp)
		}
		_, err := f.tryJuneau("CHECK", "", map[string]any{"cniVersion": cniVersion})
		if e := cniError(t, err); e.Code != cnitypes.ErrIncompatibleCNIVersion {
			t.Errorf("juneau CHECK with %s = %v, want code %d", cniVersion, e, cnitypes.ErrIncompatibleCNIVersion)
		}
		return
	}
	if err := f.rt.Check(f.conf); err != nil {
		t.Fatalf("CHECK of an intact Pod: %v", err)
	}
	if err := f.pod.Netlink().AddrDel(f.pod.Link("eth0"), mustAddr(eipWeb+"/32")); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.Check(f.conf); err == nil {
		t.Error("CHECK of the chain passed without the ElasticIP")
	}
	err := f.checkJuneau()
	if err == nil || !strings.Contains(err.Error(), "address "+eipWeb+"/32 is missing on \"eth0\"") {
		t.Errorf("juneau CHECK = %v, want it to name the missing address", err)
	}
}
