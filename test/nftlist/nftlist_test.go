package nftlist

import (
	"os/exec"
	"testing"
)

// TestRun: only a listing that exits 0 with nothing on standard error and no
// "Error" in it is clean; nft 1.0.6's complaint about an expression it cannot
// decode comes on standard error with exit status 0.
func TestRun(t *testing.T) {
	for _, tt := range []struct {
		script string
		clean  bool
	}{
		{`echo "table ip juneau {"`, true},
		{`echo "table ip juneau {"; echo "netlink: Error: Relational expression has no left hand side" >&2`, false},
		{`echo "netlink: Error: something"`, false},
		{`echo "table ip juneau {"; exit 1`, false},
		{`echo "table ip juneau {"; echo "# Warning: table ip nat is managed by iptables-nft, do not touch!" >&2`, true},
		{`echo "table ip juneau {"; echo "# Warning: table ip nat is managed by iptables-nft, do not touch!" >&2; echo "netlink: Error: x" >&2`, false},
	} {
		out, err := Run(exec.Command("sh", "-c", tt.script))
		if (err == nil) != tt.clean {
			t.Errorf("%s: output %q, error %v; want clean %v", tt.script, out, err, tt.clean)
		}
		if tt.clean && out != "table ip juneau {\n" {
			t.Errorf("%s: output %q", tt.script, out)
		}
	}
}
