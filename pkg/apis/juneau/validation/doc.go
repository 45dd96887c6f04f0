// Package validation holds the spec rules of the juneau.loutres.me/v1alpha1 API as pure
// functions, shared by the admission webhook and the controllers (which re-check what
// they read, since objects may predate the webhook or slip past it).
//
// Conventions:
//   - ValidateX(obj) checks one object on its own and returns every problem found, each
//     with the JSON field path ("spec.addresses[2]") and the refused value.
//   - ValidateXUpdate(new, old) returns ValidateX(new) plus the transition rules
//     (immutable fields, append-only lists).
//   - Checks that need other objects take them as arguments (ValidateClaimInPool,
//     ValidatePoolsDisjoint); reading them from listers is the caller's job.
//   - Metadata rules the API server enforces for every object (name syntax, labels)
//     are not repeated here; only name rules specific to juneau are.
//
// Addresses and AddressPool entries are parsed by package iprange, the model of
// address ranges the allocator and the AddressPool status share.
package validation
