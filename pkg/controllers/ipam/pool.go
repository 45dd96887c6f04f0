package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalidEntry is wrapped by every error about a pool entry that cannot be parsed.
var ErrInvalidEntry = errors.New("invalid address pool entry")

// Range is one pool entry as an inclusive span of IPv4 addresses.
type Range struct {
	First, Last netip.Addr
	// SkipEnds is set for a CIDR shorter than /31: automatic picks leave out its network
	// (First) and broadcast (Last) addresses, which a requestedIP may still pin.
	SkipEnds bool
}

// Contains reports whether addr lies in the range, ends included.
func (r Range) Contains(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.Is4() && r.First.Compare(addr) <= 0 && addr.Compare(r.Last) <= 0
}

// Size is the number of addresses in the range, ends included.
func (r Range) Size() uint64 { return uint64(u32(r.Last)-u32(r.First)) + 1 }

// autoSpan is the part of the range that automatic picks may hand out.
func (r Range) autoSpan() (first, last uint32, ok bool) {
	first, last = u32(r.First), u32(r.Last)
	if r.SkipEnds {
		if last-first < 2 {
			return 0, 0, false
		}
		first, last = first+1, last-1
	}
	return first, last, true
}

// Pool is an AddressPool's entries in the order its spec lists them.
type Pool struct {
	Name   string
	Ranges []Range
}

// Candidate is a free address and the pool it comes from.
type Candidate struct {
	Pool string
	Addr netip.Addr
}

// NewPool parses the spec.addresses entries of the AddressPool called name.
func NewPool(name string, entries []string) (Pool, error) {
	if len(entries) == 0 {
		return Pool{}, fmt.Errorf("pool %q: %w: no addresses", name, ErrInvalidEntry)
	}
	p := Pool{Name: name, Ranges: make([]Range, 0, len(entries))}
	for i, e := range entries {
		r, err := ParseRange(e)
		if err != nil {
			return Pool{}, fmt.Errorf("pool %q: addresses[%d]: %w", name, i, err)
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p, nil
}

// ParseRange parses one pool entry: a canonical IPv4 CIDR ("10.225.51.0/24"), an
// inclusive range ("10.225.51.5-10.225.51.20") or a single IPv4 address.
func ParseRange(s string) (Range, error) {
	if a, b, ok := strings.Cut(s, "-"); ok {
		first, err := parseAddr(a)
		if err != nil {
			return Range{}, fmt.Errorf("%w %q: %w", ErrInvalidEntry, s, err)
		}
		last, err := parseAddr(b)
		if err != nil {
			return Range{}, fmt.Errorf("%w %q: %w", ErrInvalidEntry, s, err)
		}
		if last.Less(first) {
			return Range{}, fmt.Errorf("%w %q: the first address is above the last", ErrInvalidEntry, s)
		}
		return Range{First: first, Last: last}, nil
	}
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("%w %q: %w", ErrInvalidEntry, s, err)
		}
		if !pfx.Addr().Is4() {
			return Range{}, fmt.Errorf("%w %q: not an IPv4 CIDR", ErrInvalidEntry, s)
		}
		if pfx.Masked() != pfx {
			return Range{}, fmt.Errorf("%w %q: host bits are set, want %q", ErrInvalidEntry, s, pfx.Masked().String())
		}
		first := pfx.Addr()
		hostBits := 32 - pfx.Bits()
		last := fromU32(u32(first) | uint32(uint64(1)<<hostBits-1))
		return Range{First: first, Last: last, SkipEnds: pfx.Bits() < 31}, nil
	}
	addr, err := parseAddr(s)
	if err != nil {
		return Range{}, fmt.Errorf("%w %q: %w", ErrInvalidEntry, s, err)
	}
	return Range{First: addr, Last: addr}, nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", s)
	}
	return a, nil
}

// Contains reports whether addr lies in one of the pool's entries. Network and broadcast
// addresses count: a requestedIP may pin them.
func Contains(pool Pool, addr netip.Addr) bool {
	for _, r := range pool.Ranges {
		if r.Contains(addr) {
			return true
		}
	}
	return false
}

// PoolFor returns the first of pools that contains addr.
func PoolFor(pools []Pool, addr netip.Addr) (poolName string, ok bool) {
	for _, p := range pools {
		if Contains(p, addr) {
			return p.Name, true
		}
	}
	return "", false
}

// IsNetworkOrBroadcast reports whether addr is the network or broadcast address of one
// of the pool's CIDR entries shorter than /31. Automatic picks skip such an address
// (unless another entry of the pool lists it plainly); a requestedIP may still pin it.
func IsNetworkOrBroadcast(pool Pool, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, r := range pool.Ranges {
		if r.SkipEnds && (addr == r.First || addr == r.Last) {
			return true
		}
	}
	return false
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func fromU32(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
