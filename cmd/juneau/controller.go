package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newControllerCommand(common *commonOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "controller",
		Short: "run the cluster-level controllers (leader-elected)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("controller: %w", errNotImplemented)
		},
	}
}
