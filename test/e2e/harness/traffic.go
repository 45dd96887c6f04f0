package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/netns"
)

// Server answers every TCP connection with "<name> <remote address>" and records the
// remote addresses it saw.
type Server struct {
	name string
	l    net.Listener
	mu   sync.Mutex
	seen []string
}

// ServeTCP listens on port inside ns (all IPv4 addresses) until the test ends.
func (c *Cluster) ServeTCP(ns *netns.NS, name string, port int) *Server {
	return c.serveTCP(ns, "tcp4", name, port)
}

// ServeTCP6 is ServeTCP on the IPv6 addresses of ns.
func (c *Cluster) ServeTCP6(ns *netns.NS, name string, port int) *Server {
	return c.serveTCP(ns, "tcp6", name, port)
}

func (c *Cluster) serveTCP(ns *netns.NS, network, name string, port int) *Server {
	c.t.Helper()
	s := &Server{name: name}
	ns.MustDo(func() error {
		var err error
		s.l, err = net.Listen(network, ":"+strconv.Itoa(port))
		return err
	})
	var wg sync.WaitGroup
	c.t.Cleanup(func() { s.l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := s.l.Accept()
			if err != nil {
				return
			}
			remote := conn.RemoteAddr().(*net.TCPAddr).IP.String()
			s.mu.Lock()
			s.seen = append(s.seen, remote)
			s.mu.Unlock()
			_, _ = fmt.Fprintf(conn, "%s %s\n", s.name, remote)
			conn.Close()
		}
	})
	return s
}

// Seen returns the remote addresses the server saw, in order.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// Dial connects from ns to addr:port (IPv4 or IPv6) and returns what the server answered.
func Dial(ns *netns.NS, addr string, port int) (string, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 2*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(conn)
	return strings.TrimSpace(string(b)), err
}

// EventuallyDial polls Dial until the answer starts with want, failing after a minute.
func (c *Cluster) EventuallyDial(ns *netns.NS, addr string, port int, want string) string {
	c.t.Helper()
	var got string
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, last = Dial(ns, addr, port)
		return last == nil && strings.HasPrefix(got, want), nil
	})
	if err != nil {
		c.t.Fatalf("dialing %s:%d from %s: got %q, last error %v; want an answer starting %q", addr, port, ns.Name, got, last, want)
	}
	return got
}
