package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newNodeCommand(common *commonOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "node",
		Short: "run the node agent (NAT rules, ARP replier, direct NICs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("node: %w", errNotImplemented)
		},
	}
}
