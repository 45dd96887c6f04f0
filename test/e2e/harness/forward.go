package harness

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/loutres/juneau/test/netns"
)

// forwardAPIServer opens a listener on 127.0.0.1 inside ns and forwards every connection
// to target (the API server on the root namespace's loopback). A socket keeps the
// namespace it was made in, so the agent inside ns reaches the API server on its own
// loopback, as a hostNetwork DaemonSet Pod would, and no traffic is routed anywhere.
// The returned stop closes the listener and every connection (it is also called when
// the test ends), so nothing of the forwarder holds the namespace any more.
func forwardAPIServer(t testing.TB, ns *netns.NS, target string) (addr string, stop func()) {
	t.Helper()
	var l net.Listener
	ns.MustDo(func() error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			l.Close()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { pipe(ctx, conn, target) })
		}
	})
	return l.Addr().String(), stop
}

func pipe(ctx context.Context, in net.Conn, target string) {
	defer in.Close()
	var d net.Dialer
	out, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	go func() {
		<-ctx.Done()
		in.Close()
		out.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}
