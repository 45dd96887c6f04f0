package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The external client: code of the caller's process run as if on a host of the segment
// (ClientIP), for traffic to ElasticIPs and from Pods.

// ClientDial opens a connection from the external client.
func (c *Cluster) ClientDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return inNamespace(c.ClientNS, func() (net.Conn, error) {
		return (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr)
	})
}

// ClientListen opens a listener on the external client.
func (c *Cluster) ClientListen(network, addr string) (net.Listener, error) {
	return inNamespace(c.ClientNS, func() (net.Listener, error) { return net.Listen(network, addr) })
}

// ClientListenPacket opens a packet socket on the external client.
func (c *Cluster) ClientListenPacket(network, addr string) (net.PacketConn, error) {
	return inNamespace(c.ClientNS, func() (net.PacketConn, error) { return net.ListenPacket(network, addr) })
}

// ClientGet does one HTTP GET from the external client and returns the body.
func (c *Cluster) ClientGet(ctx context.Context, url string) (string, error) {
	return GetFrom(ctx, c.ClientNS, url, 3*time.Second)
}

// GetFrom does one HTTP GET from the network namespace file ns (the external client, a
// host a test added), within timeout, and returns the body.
func GetFrom(ctx context.Context, ns, url string, timeout time.Duration) (string, error) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return inNamespace(ns, func() (net.Conn, error) {
			return (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
		})
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialContext: dial}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(b)), err
}

// URL is the HTTP URL of the address (IPv6 in brackets), path /.
func URL(addr string) string {
	if strings.Contains(addr, ":") {
		return "http://[" + addr + "]/"
	}
	return "http://" + addr + "/"
}

// EventuallyGet retries ClientGet until it succeeds (ARP and rules settle) or timeout.
func (c *Cluster) EventuallyGet(ctx context.Context, url string, timeout time.Duration) (string, error) {
	var body string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		body, last = c.ClientGet(ctx, url)
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("%w (last: %v)", err, last)
	}
	return body, nil
}

// Whoami listens on the external client, on both its addresses, and answers every
// connection with the address it came from: the source a Pod's outbound traffic arrives
// with.
type Whoami struct {
	ls []net.Listener
	// Addr is ClientIP:port, Addr6 [ClientIP6]:port.
	Addr, Addr6 string
}

// ServeWhoami starts a Whoami on port; Close stops it.
func (c *Cluster) ServeWhoami(port int) (*Whoami, error) {
	w := &Whoami{}
	for _, a := range []struct {
		network string
		addr    *string
		ip      string
	}{{"tcp4", &w.Addr, ClientIP}, {"tcp6", &w.Addr6, ClientIP6}} {
		l, err := c.ClientListen(a.network, net.JoinHostPort(a.ip, strconv.Itoa(port)))
		if err != nil {
			w.Close()
			return nil, err
		}
		w.ls, *a.addr = append(w.ls, l), l.Addr().String()
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
				fmt.Fprintln(conn, host)
				conn.Close()
			}
		}()
	}
	return w, nil
}

// Close stops the listeners.
func (w *Whoami) Close() {
	for _, l := range w.ls {
		l.Close()
	}
}

// SourceOf has the Pod connect to target, an address of the Whoami (kubectl exec of
// `box dial` in its container; from the local address from, if not empty), and returns
// the source address the client saw.
func (c *Cluster) SourceOf(ctx context.Context, target, from, namespace, pod, container string) (string, error) {
	var out string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		args := []string{"-n", namespace, "exec", pod}
		if container != "" {
			args = append(args, "-c", container)
		}
		args = append(args, "--", "/box", "dial")
		if from != "" {
			args = append(args, "-from", from)
		}
		out, last = c.KubectlRun(ctx, "", append(args, target)...)
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("%w (last: %v)", err, last)
	}
	return strings.TrimSpace(out), nil
}
