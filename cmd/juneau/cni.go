package main

import (
	"fmt"
	"os"
)

// runCNI runs juneau as a CNI plugin; the container runtime sets CNI_COMMAND.
func runCNI() int {
	fmt.Fprintf(os.Stdout, `{"cniVersion":"1.0.0","code":4,"msg":"juneau CNI plugin: %s"}`+"\n", errNotImplemented)
	return 1
}
