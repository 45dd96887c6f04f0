package main

import "github.com/loutres/juneau/pkg/node/cni"

// runCNI runs juneau as a CNI plugin; the container runtime sets CNI_COMMAND and
// installs the binary as /opt/cni/bin/juneau. Errors go to stdout as CNI error JSON.
func runCNI() int {
	return cni.Main(version)
}
