package cluster

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// forwarder lets kubectl and the tests in the root network namespace reach the API
// server, which lives in the control plane's namespace: it accepts on 127.0.0.1 (the
// only thing of a cluster in the root namespace) and dials each connection from inside
// that namespace. No route between the root namespace and the segment exists.
type forwarder struct {
	addr   string
	l      net.Listener
	ns     string
	target string
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newForwarder(ns, target string) (*forwarder, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{addr: l.Addr().String(), l: l, ns: ns, target: target, ctx: ctx, cancel: cancel}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *forwarder) accept() {
	for {
		conn, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.pipe(conn) })
	}
}

func (f *forwarder) pipe(in net.Conn) {
	defer in.Close()
	out, err := inNamespace(f.ns, func() (net.Conn, error) {
		return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(f.ctx, "tcp4", f.target)
	})
	if err != nil {
		return
	}
	defer out.Close()
	stop := context.AfterFunc(f.ctx, func() { in.Close(); out.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

func (f *forwarder) close() {
	if f == nil {
		return
	}
	f.cancel()
	f.l.Close()
	f.wg.Wait()
}
