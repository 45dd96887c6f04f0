package nft

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/loutres/juneau/test/netns"
)

const ioTimeout = 5 * time.Second

// tcpExchange opens a listener in server, connects from client to dialAddr,
// sends a line and reads the echo. It returns the address the server saw as
// the connection's remote end.
func tcpExchange(t *testing.T, server *netns.NS, client *netns.NS, port int, dialIP string) string {
	t.Helper()
	var ln net.Listener
	server.MustDo(func() (err error) {
		ln, err = net.Listen(network("tcp", dialIP), anyAddr(dialIP, port))
		return err
	})
	defer ln.Close()
	seen := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, line)
	}()
	var conn net.Conn
	client.MustDo(func() (err error) {
		conn, err = net.DialTimeout(network("tcp", dialIP), net.JoinHostPort(dialIP, strconv.Itoa(port)), ioTimeout)
		return err
	})
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	echo, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || echo != "hello\n" {
		t.Fatalf("echo = %q, %v", echo, err)
	}
	return <-seen
}

// udpExchange sends a datagram from client to dialIP:port, where server
// answers. It returns the source the server saw and the source of the answer
// the client got.
func udpExchange(t *testing.T, server *netns.NS, client *netns.NS, port int, dialIP string) (serverSaw, answerFrom string) {
	t.Helper()
	var pc net.PacketConn
	server.MustDo(func() (err error) {
		pc, err = net.ListenPacket(network("udp", dialIP), anyAddr(dialIP, port))
		return err
	})
	defer pc.Close()
	seen := make(chan string, 1)
	go func() {
		buf := make([]byte, 1500)
		_ = pc.SetDeadline(time.Now().Add(ioTimeout))
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			seen <- "read: " + err.Error()
			return
		}
		seen <- from.(*net.UDPAddr).IP.String()
		_, _ = pc.WriteTo(buf[:n], from)
	}()
	var cc net.PacketConn
	client.MustDo(func() (err error) {
		cc, err = net.ListenPacket(network("udp", dialIP), anyAddr(dialIP, 0))
		return err
	})
	defer cc.Close()
	dst := &net.UDPAddr{IP: net.ParseIP(dialIP), Port: port}
	if _, err := cc.WriteTo([]byte("ping"), dst); err != nil {
		t.Fatalf("send: %v", err)
	}
	_ = cc.SetDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 1500)
	n, from, err := cc.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("answer = %q from %v: %v", buf[:n], from, err)
	}
	return <-seen, from.(*net.UDPAddr).IP.String()
}

// network is "tcp4"/"udp4" or "tcp6"/"udp6", after the family of ip.
func network(proto, ip string) string {
	if netip.MustParseAddr(ip).Is4() {
		return proto + "4"
	}
	return proto + "6"
}

// anyAddr is the wildcard address of ip's family with port.
func anyAddr(ip string, port int) string {
	if netip.MustParseAddr(ip).Is4() {
		return fmt.Sprintf("0.0.0.0:%d", port)
	}
	return fmt.Sprintf("[::]:%d", port)
}

var pingStats = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// pingLoss parses ping's summary.
func pingLoss(out string) (sent, received int, err error) {
	m := pingStats.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, errors.New("no ping summary in output:\n" + out)
	}
	sent, _ = strconv.Atoi(m[1])
	received, _ = strconv.Atoi(m[2])
	return sent, received, nil
}

// ping sends count echo requests from ns to dst and fails the test unless all
// are answered.
func ping(t *testing.T, ns *netns.NS, dst string, count int) {
	t.Helper()
	out, _ := ns.Output("ping", "-n", "-c", strconv.Itoa(count), "-i", "0.05", "-W", "2", dst)
	sent, recv, err := pingLoss(out)
	if err != nil || sent != count || recv != count {
		t.Fatalf("ping %s from %s: sent %d received %d (%v)\n%s", dst, ns.Name, sent, recv, err, out)
	}
}
