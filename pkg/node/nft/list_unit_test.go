package nft

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TestRulesUseRegistersAsNftReads: in every rule of both tables, with every
// feature present, each expression reads a register from the start of a
// value an earlier expression of the rule put there, and every value put in
// a register is read. nft's listing follows values from register to
// register: it cannot read a compare on the middle of a value ("netlink:
// Error: Relational expression has no left hand side") and leaves a value
// nothing reads out of the listing without a word, so the rule would read as
// less than it does (README.md, "Reading the table with nft").
func TestRulesUseRegistersAsNftReads(t *testing.T) {
	s, err := normalize(DesiredState{
		Config: Config{ExternalInterface: "ext0", ClusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/48")},
		Mappings: []Mapping{m("10.225.51.5", "10.244.1.5"), mbw("10.225.51.8", "10.244.1.8", 5),
			m("2001:db8::5", "fd00:10:244:1::5"), mbw("2001:db8::8", "fd00:10:244:1::8", 5)},
		Direct:    []DirectNIC{dnbw("jnab12cd", "10.225.51.6", 100), dnbw("jnab12cd", "2001:db8::6", 100)},
		InCluster: []Mapping{m("10.225.51.7", "10.244.2.7"), m("2001:db8::7", "fd00:10:244:2::7")},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.extIndex = 7
	for _, f := range families {
		rs := buildRuleset(s, f)
		sets := map[string]*nftables.Set{}
		for _, set := range rs.sets.all() {
			sets[set.Name] = set
		}
		for i, r := range rs.rules {
			if err := checkRegisters(r.Exprs, sets); err != nil {
				t.Errorf("%s %s, rule %d of %s: %v", f.name, TableName, i, r.Chain.Name, err)
			}
		}
	}
}

// checkRegisters follows the values of a rule through the 32-bit register
// slots.
func checkRegisters(exprs []expr.Any, sets map[string]*nftables.Set) error {
	type value struct {
		by   int // the expression that put it there
		read bool
	}
	type slot struct {
		v   *value
		off int // the slot's place in the value
	}
	var slots [16]slot
	read := func(i int, reg, n uint32) error {
		first, count := slotsOf(reg, n)
		if slots[first].v == nil || slots[first].off != 0 {
			return fmt.Errorf("expression %d (%T) reads register %d, where no value starts", i, exprs[i], reg)
		}
		for k := first; k < first+count; k++ {
			if slots[k].v == nil {
				return fmt.Errorf("expression %d (%T) reads %d bytes from register %d, past the values there", i, exprs[i], n, reg)
			}
			slots[k].v.read = true
		}
		return nil
	}
	write := func(i int, reg, n uint32) error {
		first, count := slotsOf(reg, n)
		v := &value{by: i}
		for k := first; k < first+count; k++ {
			if old := slots[k].v; old != nil && !old.read {
				return fmt.Errorf("expression %d (%T) overwrites what expression %d put in register %d before anything read it", i, exprs[i], old.by, reg)
			}
			slots[k] = slot{v: v, off: k - first}
		}
		return nil
	}
	for i, e := range exprs {
		var err error
		switch e := e.(type) {
		case *expr.Payload:
			if e.OperationType == expr.PayloadWrite {
				err = read(i, e.SourceRegister, e.Len)
			} else {
				err = write(i, e.DestRegister, e.Len)
			}
		case *expr.Meta:
			n := uint32(4)
			switch e.Key {
			case expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME:
				n = unix.IFNAMSIZ
			case expr.MetaKeyL4PROTO:
				n = 1
			}
			err = write(i, e.Register, n)
		case *expr.Ct:
			err = write(i, e.Register, 4)
		case *expr.Bitwise:
			if err = read(i, e.SourceRegister, e.Len); err == nil {
				err = write(i, e.DestRegister, e.Len)
			}
		case *expr.Cmp:
			err = read(i, e.Register, uint32(len(e.Data)))
		case *expr.Range:
			err = read(i, e.Register, uint32(len(e.FromData)))
		case *expr.Lookup:
			set := sets[e.SetName]
			if set == nil {
				return fmt.Errorf("expression %d looks up %s, not a set of the table", i, e.SetName)
			}
			if err = read(i, e.SourceRegister, set.KeyType.Bytes); err == nil && e.IsDestRegSet && e.DestRegister != unix.NFT_REG_VERDICT {
				err = write(i, e.DestRegister, set.DataType.Bytes)
			}
		case *expr.NAT:
			n := uint32(4)
			if e.Family == unix.NFPROTO_IPV6 {
				n = 16
			}
			err = read(i, e.RegAddrMin, n)
		case *expr.Counter, *expr.Verdict, *expr.Notrack, *expr.Limit:
		default:
			err = fmt.Errorf("expression %d: %T not known to this test", i, e)
		}
		if err != nil {
			return err
		}
	}
	for _, sl := range slots {
		if sl.v != nil && !sl.v.read {
			return fmt.Errorf("nothing reads what expression %d (%T) put in a register", sl.v.by, exprs[sl.v.by])
		}
	}
	return nil
}

// slotsOf returns the first 32-bit slot of a register and how many slots n
// bytes take: NFT_REG_1 to NFT_REG_4 are 16 bytes each, the same storage as
// NFT_REG32_00 to NFT_REG32_15.
func slotsOf(reg, n uint32) (first, count int) {
	if reg >= unix.NFT_REG_1 && reg <= unix.NFT_REG_4 {
		first = int(reg-unix.NFT_REG_1) * 4
	} else {
		first = int(reg - unix.NFT_REG32_00)
	}
	return first, int(n+3) / 4
}
