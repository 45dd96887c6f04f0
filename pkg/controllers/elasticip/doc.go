// Package elasticip is the ElasticIP controller: it alone decides which address an
// ElasticIP holds and who uses it (docs/design.md#who-decides), and publishes both in
// the ElasticIP's status for every other component to read.
//
// For each ElasticIP it reserves an address by creating the AllocationClaim named after
// it (sync.go; requestedIP or the first free address of the network's pools, through
// the allocator of package ipam), adopts a claim a crash left behind, and releases the
// reservation when the ElasticIP goes (delete.go; a finalizer holds it while a Pod may
// still carry the address). It decides the user of the address with the pure
// DecideHolder (holder.go) from the ElasticIPAttachments and NetworkInterfaces naming it,
// keeps the one ARPAdvertisement or BGPAdvertisement that makes the user's Node answer
// or announce it (advertisement.go, kinds.go), and writes the status: Allocated and
// Attached conditions that say whether traffic can reach the user (status.go,
// traffic.go, announced.go). A reservation stands whatever becomes of its pool
// afterwards (reservation.go). Claims whose ElasticIP is gone are released after a
// grace period (orphans.go). The watch events of its own writes wake nobody (echo.go),
// so a routine allocation is one sync.
package elasticip
