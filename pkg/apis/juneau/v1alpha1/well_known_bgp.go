package v1alpha1

// BGP conditions (type bgp networks); their reasons are in reasons.go.
const (
	// ConditionAnnounced says the agent of a BGPAdvertisement's Node announces the
	// address to at least one Established peer; the message says to how many.
	ConditionAnnounced = "Announced"
)

// BGP defaults.
const (
	// DefaultBGPHoldTimeSeconds is a BGPPeer's hold time when spec.holdTime is absent.
	DefaultBGPHoldTimeSeconds = 90
	// DefaultBFDIntervalMilliseconds is a BGPPeer's spec.bfd.minRxInterval and
	// minTxInterval when absent.
	DefaultBFDIntervalMilliseconds = 300
	// DefaultBFDMultiplier is a BGPPeer's spec.bfd.multiplier when absent.
	DefaultBFDMultiplier = 3
	// MaxASN is the largest AS number a BGPPeer may use (4294967295 is reserved, RFC 7300).
	MaxASN = 4294967294
	// BGPPasswordSecret is the Secret in the installation's namespace (juneau-system,
	// not the agents' juneau-node) that the node agent may read for TCP-MD5 passwords as
	// installed (docs/bgp.md); other Secrets need a grant of their own.
	BGPPasswordSecret = "juneau-bgp-passwords"
)
