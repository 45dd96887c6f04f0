package netns_test

import (
	"net"
	"testing"

	"github.com/loutres/juneau/test/netns"
)

// A client and a server on one veth link; the server listens inside its
// namespace, the client dials from inside its own, and a capture records the
// frames. Everything is removed when the test ends.
func ExampleNew() {
	var t *testing.T // the test's *testing.T
	client, server := netns.New(t, "cli"), netns.New(t, "srv")
	netns.Veth(client, "eth0", server, "eth0")
	client.Addr("eth0", "10.225.51.100/24")
	server.Addr("eth0", "10.225.51.2/24")
	server.DisableOffload("eth0") // real checksums on the wire

	capture := server.Capture("eth0")
	var ln net.Listener
	server.MustDo(func() (err error) { ln, err = net.Listen("tcp4", "10.225.51.2:8080"); return err })
	client.MustDo(func() error { _, err := net.Dial("tcp4", "10.225.51.2:8080"); return err })
	_ = ln
	_ = capture.Frames()
	out := client.MustRun("ping", "-c", "1", "10.225.51.2") // nsenter under the hood
	_ = out
}
