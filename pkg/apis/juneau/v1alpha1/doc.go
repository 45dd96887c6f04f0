// Package v1alpha1 holds the juneau.loutres.me/v1alpha1 API: address pools, external
// networks, address reservations, ElasticIPs and how Pods use them.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=juneau.loutres.me
package v1alpha1
