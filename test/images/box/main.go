// Command box is the one static binary of the workload images the real cluster runs
// (see test/images):
//
//	box pause                 a Pod sandbox's process: reap children, exit on SIGTERM
//	box serve [flags]         answer HTTP with "hello from <hostname>: you are <peer>" and
//	                          echo UDP datagrams back to their sender
//	box dial [-from IP] ADDRESS
//	                          connect over TCP (IPv4 or IPv6, from the local address IP
//	                          if given) and print what the server sends
//	box flood [flags] URL     POST padding and forged bodies from many workers at once
//	                          and print how the server answered (flood.go)
//
// A server that reports the peer address it sees shows what a client's traffic looks
// like after NAT; dial shows the source address a Pod's own connections arrive with.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: box pause | serve [-http ADDR] [-udp ADDR] | dial [-from IP] ADDRESS | flood [flags] URL")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pause":
		pause()
	case "serve":
		err = serve(os.Args[2:])
	case "dial":
		err = dial(os.Args[2:])
	case "flood":
		err = flood(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "box:", err)
		os.Exit(1)
	}
}

// pause waits for SIGTERM or SIGINT and reaps the children the sandbox inherits.
func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	httpAddr := fs.String("http", ":80", "HTTP listen address")
	udpAddr := fs.String("udp", "", "UDP echo listen address (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _ := os.Hostname()
	errc := make(chan error, 2)
	if *udpAddr != "" {
		conn, err := net.ListenPacket("udp4", *udpAddr)
		if err != nil {
			return err
		}
		go func() { errc <- echo(conn) }()
	}
	srv := &http.Server{Addr: *httpAddr, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peer, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintf(w, "hello from %s: you are %s\n", host, peer)
		})}
	go func() { errc <- srv.ListenAndServe() }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		return err
	case <-sigs:
		return nil
	}
}

// echo sends every datagram back to its sender.
func echo(conn net.PacketConn) error {
	buf := make([]byte, 65536)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return err
		}
		if _, err := conn.WriteTo(buf[:n], from); err != nil {
			fmt.Fprintln(os.Stderr, "box: echo to", from, err)
		}
	}
}

func dial(args []string) error {
	fs := flag.NewFlagSet("dial", flag.ContinueOnError)
	from := fs.String("from", "", "local address to connect from (empty: the kernel's choice)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: box dial [-from IP] ADDRESS")
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if *from != "" {
		ip := net.ParseIP(*from)
		if ip == nil {
			return fmt.Errorf("-from %q: not an IP address", *from)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	conn, err := d.Dial("tcp", fs.Arg(0))
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(os.Stdout, conn)
	return err
}
