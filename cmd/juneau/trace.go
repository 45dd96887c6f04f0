package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
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
	var stateDir, metrics, tokenFile string
	cmd := &cobra.Command{
		Use:   "trace ADDRESS",
		Short: "show what this Node holds for an ElasticIP: its NAT mapping and limit in the juneau nftables table, whether the agent answers ARP/NDP for it, the agent's ARP counters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("not an address: %w", err)
			}
			return trace(cmd.Context(), cmd.OutOrStdout(), addr, stateDir, metrics, tokenFile)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "/run/juneau", "the agent's --state-dir")
	cmd.Flags().StringVar(&metrics, "metrics-url", defaultMetricsURL(), "the agent's metrics (the DaemonSet's address, $NODE_IP); empty: not read")
	cmd.Flags().StringVar(&tokenFile, "token-file", "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"bearer token for the metrics (the agent's ServiceAccount may read them, docs/operations.md#metrics-and-health); empty: none")
	return cmd
}

// defaultMetricsURL is where the DaemonSet's agent serves its metrics: the Node's
// address ($NODE_IP), over HTTPS.
func defaultMetricsURL() string {
	host := os.Getenv("NODE_IP")
	if host == "" {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, "9091") + "/metrics"
}

// trace writes its report to out in one write, once whole: an exec's streams can lose
// what comes first (kubectl juneau trace checks it came back whole, and asks again).
func trace(ctx context.Context, out io.Writer, addr netip.Addr, stateDir, metricsURL, tokenFile string) error {
	var buf bytes.Buffer
	err := report(ctx, &buf, addr, stateDir, metricsURL, tokenFile)
	if _, werr := out.Write(buf.Bytes()); err == nil {
		err = werr
	}
	return err
}

func report(ctx context.Context, w io.Writer, addr netip.Addr, stateDir, metricsURL, tokenFile string) error {
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
	lines, err := agentCounters(ctx, metricsURL, tokenFile)
	if err != nil {
		fmt.Fprintf(w, "counters: %v\n", err)
		return nil
	}
	for _, l := range lines {
		fmt.Fprintf(w, "counter: %s\n", l)
	}
	return nil
}

// agentCounters reads the agent's ARP, NDP and NAT counters from its metrics, with the
// token in tokenFile, not verifying the agent's self-signed certificate.
func agentCounters(ctx context.Context, url, tokenFile string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if tokenFile != "" {
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
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
