package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newWebhookCommand(common *commonOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "webhook",
		Short: "run the validating admission webhook server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("webhook: %w", errNotImplemented)
		},
	}
}
