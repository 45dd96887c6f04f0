// Package ipam is the pure address allocator of the ElasticIP controller (SPEC §2.1, §4.2).
//
// A Pool is an AddressPool's entries (CIDR, inclusive range or single address). Automatic
// picks go through the pools in the order the ExternalNetwork lists them and, inside a
// pool, in address order; for a CIDR shorter than /31 they skip its network and broadcast
// addresses, which a requestedIP may still pin. The reservation itself is an
// AllocationClaim named after the address, created by the caller: the API server, not
// this package, guarantees that two consumers never get the same address. An Index only
// mirrors the claims the caller has seen, so a stale answer costs a retry, never a
// duplicate.
//
// The package imports no client-go and starts nothing.
package ipam
