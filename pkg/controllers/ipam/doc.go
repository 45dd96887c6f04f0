// Package ipam is the pure address allocator of the ElasticIP controller
// (docs/reference.md#allocation).
//
// A Pool is an AddressPool's entries, parsed by package iprange, the address model the
// webhook and the AddressPool status share. Automatic picks go through the pools in the
// order the ExternalNetwork lists them and, inside a pool, in address order; they skip
// what iprange.Range.Auto leaves out (the network and broadcast addresses of an IPv4
// CIDR shorter than /31, the Subnet-Router anycast address of an IPv6 CIDR shorter than
// /127), which a requestedIP may still pin. A pool holds one family; the caller passes
// only the pools of the ElasticIP's family. Allocation costs O(log n) and memory grows
// with the reservations, not with the pool: an IPv6 /64 is as cheap as an IPv4 /24. The reservation itself is
// an AllocationClaim named after the address, created by the caller: the API server,
// not this package, guarantees that two consumers never get the same address. An Index
// only mirrors the claims the caller has seen, so a stale answer costs a retry, never a
// duplicate.
//
// The package imports no client-go and starts nothing.
package ipam
