package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loutres/juneau/pkg/node/handover"
	"github.com/loutres/juneau/pkg/node/nft"
)

// newTraceCommand is `juneau trace <address>`, run inside a node agent's container
// (kubectl juneau trace execs it there): what this Node's kernel and agent hold for one
// ElasticIP, read-only.
func newTraceCommand() *cobra.Command {
	var stateDir, metrics string
	cmd := &cobra.Command{
		Use:   "trace ADDRESS",
		Short: "show what this Node holds for an ElasticIP: its NAT mapping and limit in the juneau nftables table, whether the agent answers ARP/NDP for it, the agent's ARP counters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("not an address: %w", err)
			}
			return trace(cmd.Context(), cmd.OutOrStdout(), addr, stateDir, metrics)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "/run/juneau", "the agent's --state-dir")
	cmd.Flags().StringVar(&metrics, "metrics-url", "http://127.0.0.1:9091/metrics", "the agent's metrics; empty: not read")
	return cmd
}

func trace(ctx context.Context, w io.Writer, addr netip.Addr, stateDir, metricsURL string) error {
	p := nft.NewProgrammer(nft.Options{})
	mappings, err := p.KernelMappings(ctx)
	if err != nil {
		return fmt.Errorf("reading the nftables table %s: %w", nft.TableName, err)
	}
	found := false
	for _, m := range mappings {
		if m.ElasticIP == addr {
			found = true
			fmt.Fprintf(w, "nat: %s <-> %s (map %s and %s of table %s)\n", addr, m.PodIP, nft.MapEIP2VPC, nft.MapVPC2EIP, nft.TableName)
		}
	}
	if !found {
		fmt.Fprintf(w, "nat: no mapping for %s in table %s (%d mappings on this Node)\n", addr, nft.TableName, len(mappings))
	}
	limits, err := p.KernelLimits(ctx)
	if err != nil {
		return err
	}
	if l, ok := limits[addr]; ok {
		in, out := nft.LimitChainNames(addr)
		fmt.Fprintf(w, "limit: %d Mbit/s each way (chains %s, %s)\n", l, in, out)
	} else {
		fmt.Fprintln(w, "limit: none")
	}
	answering, err := handover.LoadAnswering(stateDir)
	if err != nil {
		return fmt.Errorf("reading the addresses the agent answers for: %w", err)
	}
	proto := "ARP"
	if addr.Is6() {
		proto = "NDP"
	}
	if slices.Contains(answering, addr) {
		fmt.Fprintf(w, "%s: this Node's agent answers for %s\n", strings.ToLower(proto), addr)
	} else {
		fmt.Fprintf(w, "%s: this Node's agent does not answer for %s\n", strings.ToLower(proto), addr)
	}
	if metricsURL == "" {
		return nil
	}
	lines, err := agentCounters(ctx, metricsURL)
	if err != nil {
		fmt.Fprintf(w, "counters: %v\n", err)
		return nil
	}
	for _, l := range lines {
		fmt.Fprintf(w, "counter: %s\n", l)
	}
	return nil
}

// agentCounters reads the agent's ARP, NDP and NAT counters from its metrics.
func agentCounters(ctx context.Context, url string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, prefix := range []string{"juneau_node_arp_", "juneau_node_ndp_", "juneau_node_nat_mappings", "juneau_node_bgp_prefixes_announced"} {
			if strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
	}
	return out, nil
}
