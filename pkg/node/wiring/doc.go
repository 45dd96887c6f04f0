// Package wiring assembles the node agent from its parts: the informers of the kinds it
// watches, the agent (pkg/node/agent) reading them, the ARP and NDP responders, the
// nftables programmer, the BGP speaker, the CNI server, the datapath lock shared with
// the next agent of the Node (pkg/node/handover), the heartbeat Lease, and the decision
// made at SIGTERM (pkg/node/shutdown).
//
// Each watched kind is declared once, in kinds (kinds.go): where its informer comes
// from, which of the agent's caches it fills, whether the CNI server reads it. Every
// event of every kind triggers a sync of the agent.
//
// The binary (cmd/juneau) parses the flags of `juneau node` into Options and calls
// Run; docs/operations.md lists the flags.
package wiring
