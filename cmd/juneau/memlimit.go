package main

import (
	"context"
	"math"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// memoryLimitRatio is the share of the container's memory limit the Go runtime may use
// before it collects harder (GOMEMLIMIT); the rest covers memory outside the Go heap
// (stacks, the binary's pages) and the collector's overshoot.
const memoryLimitRatio = 0.9

// role is a long-running role's RunE: it sets the Go runtime's soft memory limit from
// the container's cgroup memory limit, refreshed every minute (an in-place resize
// changes it), before it runs (docs/operations.md#memory). GOMEMLIMIT set in the
// environment wins, and AUTOMEMLIMIT=off turns it off.
func role(run func(context.Context) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		logger := klog.FromContext(ctx)
		limit, err := memlimit.Set(
			memlimit.WithRatio(memoryLimitRatio),
			memlimit.WithProvider(memlimit.FromCgroup),
			memlimit.WithRefreshInterval(ctx, time.Minute),
		)
		switch {
		case os.Getenv("GOMEMLIMIT") != "":
			logger.Info("The Go runtime's memory limit is set by GOMEMLIMIT", "goMemLimit", limit)
		case err != nil:
			logger.V(1).Info("No memory limit of the container found; the Go runtime runs without one", "err", err)
		case limit != math.MaxInt64:
			logger.Info("Set the Go runtime's memory limit from the container's", "goMemLimit", limit, "ratio", memoryLimitRatio)
		}
		return run(ctx)
	}
}
