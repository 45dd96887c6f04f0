// Package annotations parses the Pod annotations through which users ask for
// ElasticIPs (docs/reference.md#direct-annotations, #automatic): direct use on a Pod NIC (ParseDirect) and automatic,
// NAT-attached ElasticIPs in the managed-cloud style (ParseAuto). ValidatePod runs both
// and the checks between them; the admission webhook and the controllers share it, so a
// Pod the webhook admits is one the controllers can read.
//
// Every error carries the path of the offending annotation, such as
// metadata.annotations[juneau.loutres.me/networks][1].interface.
package annotations
