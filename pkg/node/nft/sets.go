package nft

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
)

// setsOf names the table's sets and maps.
type setsOf struct {
	fam                                            *family
	eip2vpc, vpc2eip, eip2vpcQuoted, vpc2eipQuoted *nftables.Set
	eip2vpcUnlimited                               *nftables.Set
	cluster, icmpErrors                            *nftables.Set
	directIfaces, directAllowed                    *nftables.Set
	limitIn, limitOut                              *nftables.Set
	clusterEIP2VPC                                 *nftables.Set
}

func (s setsOf) all() []*nftables.Set {
	return append(s.maps(), s.cluster, s.icmpErrors, s.directIfaces, s.directAllowed, s.limitIn, s.limitOut, s.clusterEIP2VPC)
}

// maps are the NAT maps, whose elements come from the mappings.
func (s setsOf) maps() []*nftables.Set {
	return []*nftables.Set{s.eip2vpc, s.vpc2eip, s.eip2vpcQuoted, s.vpc2eipQuoted, s.eip2vpcUnlimited}
}

// dynamic are the sets whose elements follow the desired state, element by
// element: the NAT maps, the anti-spoofing sets, the limit verdict maps and
// the in-cluster map.
func (s setsOf) dynamic() []*nftables.Set {
	return append(s.maps(), s.directIfaces, s.directAllowed, s.limitIn, s.limitOut, s.clusterEIP2VPC)
}

func newTable(f *family) *nftables.Table {
	return &nftables.Table{Name: TableName, Family: f.table}
}

// familySets are the sets of both tables.
type familySets [2]setsOf

func newFamilySets() familySets { return familySets{newSets(fam4), newSets(fam6)} }

// of returns the sets of the table an address belongs to.
func (fs familySets) of(a netip.Addr) setsOf {
	if a.Is4() {
		return fs[0]
	}
	return fs[1]
}

// dynamic are the dynamic sets of both tables.
func (fs familySets) dynamic() []*nftables.Set { return append(fs[0].dynamic(), fs[1].dynamic()...) }

// newSets describes the sets of a family's table. IDs are set here, not by
// the library, so that a batch is fully determined by its input (they only
// need to be unique within one transaction, which writes both tables).
func newSets(f *family) setsOf {
	t := newTable(f)
	addr := f.addrType
	addrPair := nftables.MustConcatSetType(addr, addr)
	m := func(id uint32, name string, key nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{
			Table: t, ID: f.setIDBase + id, Name: name, IsMap: true, KeyType: key, DataType: addr,
			Concatenation: key.Bytes > f.addrLen,
		}
	}
	return setsOf{
		fam:              f,
		eip2vpc:          m(1, MapEIP2VPC, addr),
		vpc2eip:          m(2, MapVPC2EIP, addr),
		eip2vpcQuoted:    m(3, MapEIP2VPCQuoted, addrPair),
		vpc2eipQuoted:    m(4, MapVPC2EIPQuoted, addrPair),
		eip2vpcUnlimited: m(12, MapEIP2VPCUnlimited, addr),
		cluster: &nftables.Set{
			Table: t, ID: f.setIDBase + 5, Name: SetClusterCIDRs, Interval: true, KeyType: addr,
		},
		icmpErrors: &nftables.Set{
			Table: t, ID: f.setIDBase + 6, Name: SetICMPErrors, Constant: true, KeyType: f.icmpType,
		},
		// Interface names are strings, host byte order to nft; without saying
		// so `nft list` prints the names reversed (as empty strings). The
		// kernel compares bytes either way.
		directIfaces: &nftables.Set{
			Table: t, ID: f.setIDBase + 7, Name: SetDirectIfaces, KeyType: nftables.TypeIFName,
			KeyByteOrder: binaryutil.NativeEndian,
		},
		directAllowed: &nftables.Set{
			Table: t, ID: f.setIDBase + 8, Name: SetDirectAllowed, Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, addr),
		},
		limitIn:        &nftables.Set{Table: t, ID: f.setIDBase + 9, Name: MapLimitIn, IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
		limitOut:       &nftables.Set{Table: t, ID: f.setIDBase + 10, Name: MapLimitOut, IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
		clusterEIP2VPC: m(11, MapClusterEIP2VPC, addr),
	}
}
