// Package nftlist runs nft's listing commands and fails on anything nft could not
// read. nft 1.0.6 (Debian 12) prints an expression it cannot decode as "netlink:
// Error: ..." on standard error, leaves it out of the listing and still exits 0, so
// the exit status alone proves nothing (pkg/node/nft/README.md, "Reading the table
// with nft").
package nftlist

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/require"
)

// Run runs cmd, an nft command (nft list ruleset, nft list table ip juneau, ...),
// and returns its standard output. The error says why the output is not clean: nft
// failed, wrote anything to standard error but the notice it gives about tables that
// iptables-nft manages (a Node's kube-proxy or CNI may have made such tables; nft warns
// that they are iptables' own), or printed "Error".
func Run(cmd *exec.Cmd) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	complaints := otherThanIptablesNotices(stderr.String())
	switch {
	case err != nil:
		return out, fmt.Errorf("%s: %w\n%s", cmd, err, stderr.String())
	case complaints != "":
		return out, fmt.Errorf("%s wrote to standard error:\n%s", cmd, complaints)
	case strings.Contains(out, "Error"):
		return out, fmt.Errorf("%s printed an error:\n%s", cmd, out)
	}
	return out, nil
}

// otherThanIptablesNotices drops from nft's standard error the lines that only say a
// table belongs to iptables-nft ("# Warning: table ip nat is managed by iptables-nft,
// do not touch!").
func otherThanIptablesNotices(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "# Warning: table ") && strings.HasSuffix(l, "is managed by iptables-nft, do not touch!") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// InNS runs nft with args inside a network namespace and returns its output; it
// fails the test unless the output is clean (Run).
func InNS(t testing.TB, ns *netns.NS, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := Run(exec.CommandContext(ctx, require.Binary(t, "nsenter"), ns.Wrap(require.Binary(t, "nft"), args...)...))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
