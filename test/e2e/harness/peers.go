package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loutres/juneau/test/netns"
)

// Servers and clients that report the addresses they see: a server answers with its
// name and the client address it saw; a client reports the peer address its answer came
// from. For checks that both ends of a translated connection see the right address.

// ServeHTTP serves HTTP on port inside ns (all addresses) until the test ends: every
// request is answered with "<name> <client address>".
func (c *Cluster) ServeHTTP(ns *netns.NS, name string, port int) {
	c.t.Helper()
	var l net.Listener
	ns.MustDo(func() (err error) {
		l, err = net.Listen("tcp4", ":"+strconv.Itoa(port))
		return err
	})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "%s %s", name, host)
	})}
	var wg sync.WaitGroup
	c.t.Cleanup(func() { srv.Close(); wg.Wait() })
	wg.Go(func() { _ = srv.Serve(l) })
}

// HTTPGet sends GET http://addr:port/ from ns on a new connection and returns the body
// and the address of the peer the connection reached.
func HTTPGet(ns *netns.NS, addr string, port int) (body, peer string, err error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			var conn net.Conn
			err := ns.Do(func() (err error) {
				conn, err = dialer.DialContext(ctx, "tcp4", address)
				return err
			})
			if err == nil {
				peer = conn.RemoteAddr().(*net.TCPAddr).IP.String()
			}
			return conn, err
		},
	}}
	resp, err := client.Get("http://" + net.JoinHostPort(addr, strconv.Itoa(port)) + "/")
	if err != nil {
		return "", peer, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s", resp.Status)
	}
	return string(b), peer, err
}

// ServeUDP answers every datagram on port inside ns with "<name> <source address>"
// until the test ends.
func (c *Cluster) ServeUDP(ns *netns.NS, name string, port int) {
	c.t.Helper()
	var conn *net.UDPConn
	ns.MustDo(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	var wg sync.WaitGroup
	c.t.Cleanup(func() { conn.Close(); wg.Wait() })
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(connWriter{conn, from}, "%s %s", name, from.IP)
		}
	})
}

type connWriter struct {
	c  *net.UDPConn
	to *net.UDPAddr
}

func (w connWriter) Write(b []byte) (int, error) { return w.c.WriteToUDP(b, w.to) }

// UDPAsk sends one datagram from an unconnected socket in ns to addr:port and returns
// the answer and the source address it came from (an unconnected socket takes an
// answer from any source, so the source is what the network delivered).
func UDPAsk(ns *netns.NS, addr string, port int) (answer, from string, err error) {
	var conn *net.UDPConn
	if err := ns.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{})
		return err
	}); err != nil {
		return "", "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.WriteToUDP([]byte("?"), &net.UDPAddr{IP: net.ParseIP(addr), Port: port}); err != nil {
		return "", "", err
	}
	buf := make([]byte, 1500)
	n, src, err := conn.ReadFromUDP(buf)
	if err != nil {
		return "", "", err
	}
	return string(buf[:n]), src.IP.String(), nil
}

var pingReply = regexp.MustCompile(`bytes from ([0-9.]+):`)

// PingFrom sends one ICMP echo request from ns to addr with ping(8) and returns the
// source address of the reply, as ping prints it.
func PingFrom(ns *netns.NS, addr string) (string, error) {
	out, err := ns.Output("ping", "-n", "-c", "1", "-W", "2", addr)
	if m := pingReply.FindStringSubmatch(out); m != nil {
		return m[1], nil
	}
	if err == nil {
		err = fmt.Errorf("no reply")
	}
	return "", fmt.Errorf("ping %s from %s: %w\n%s", addr, ns.Name, err, strings.TrimSpace(out))
}
