package cni

import (
	"fmt"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// pluginVersions are the CNI spec versions the plugin speaks. Primary plugins of real
// clusters often write their configuration lists with 0.3.1 or 0.4.0, and a chained
// plugin must speak the list's version, so juneau accepts every version since chaining
// (prevResult) exists. skel refuses other versions before any command runs, CHECK below
// 0.4.0 and GC/STATUS below 1.1.0, as the specification defines those commands only
// from there.
func pluginVersions() version.PluginInfo {
	return version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
}

// parsePrevResult reads the primary plugin's result, written in the configuration's
// version, and converts it to the 1.0 form ADD works on. Of what juneau reads and
// writes, the 0.3/0.4 form differs only in ips[].version, which the 1.0 form derives
// from the address; interfaces and routes have the same shape.
func parsePrevResult(conf *cnitypes.PluginConf) (*current.Result, error) {
	if err := version.ParsePrevResult(conf); err != nil {
		return nil, fmt.Errorf("parse prevResult (cniVersion %s): %w", quote(conf.CNIVersion), err)
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil, fmt.Errorf("convert prevResult from cniVersion %s: %w", quote(conf.CNIVersion), err)
	}
	// Decoding lets an address or a destination be absent; the result juneau writes
	// back would then say "<nil>", which no runtime reads.
	for i, ip := range prev.IPs {
		if ip.Address.IP == nil || ip.Address.Mask == nil {
			return nil, fmt.Errorf("prevResult: ips[%d] has no address", i)
		}
		if ip.Interface != nil && (*ip.Interface < 0 || *ip.Interface >= len(prev.Interfaces)) {
			return nil, fmt.Errorf("prevResult: ips[%d].interface is %d, but the result lists %d interfaces", i, *ip.Interface, len(prev.Interfaces))
		}
	}
	for i, r := range prev.Routes {
		if r.Dst.IP == nil || r.Dst.Mask == nil {
			return nil, fmt.Errorf("prevResult: routes[%d] has no dst", i)
		}
	}
	return prev, nil
}

// resultAs converts the result ADD worked on back to the configuration's version, the
// only one the runtime and the next plugin in the chain accept. The conversion keeps ips
// with their interface indexes (adding ips[].version for 0.3/0.4), so the ElasticIP stays
// the Pod IP on the primary NIC.
func resultAs(res *current.Result, cniVersion string) (cnitypes.Result, error) {
	out, err := res.GetAsVersion(cniVersion)
	if err != nil {
		return nil, boundedErr(fmt.Errorf("convert the result to cniVersion %s: %w", quote(cniVersion), err))
	}
	return out, nil
}

// printResult writes res in the configuration's version to stdout.
func printResult(res *current.Result, cniVersion string) error {
	out, err := resultAs(res, cniVersion)
	if err != nil {
		return err
	}
	return out.Print()
}
