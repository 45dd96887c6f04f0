package cniserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Only root talks to the agent: the container runtime runs the CNI plugin as root, and
// the answers steer how a Pod's network is set up. Two locks keep everyone else out:
//   - the socket file has mode 0600 and belongs to the agent (root), so connect(2) fails
//     for other users with EACCES;
//   - every connection's peer credentials (SO_PEERCRED, taken by the kernel when the
//     peer connected) are checked, so a socket whose mode or directory was loosened, or
//     whose descriptor was passed to another process, still serves nobody else.
//
// The agent's own user is accepted besides root: it is root wherever the agent runs
// (it needs NET_ADMIN), and a process of the agent's own user could act as the agent
// anyway. A unix socket is local by construction (AF_UNIX never leaves the kernel), so
// "on the same host" needs no check of its own; a peer in another user namespace shows
// with its uid as seen from the agent's, so a container's unmapped root is not root here.

// peer is what the kernel says about the process at the other end of a connection.
type peer struct {
	cred *unix.Ucred
	err  error
}

type peerKey struct{}

// peerCredentials reads SO_PEERCRED of a unix socket connection.
func peerCredentials(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix socket connection (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// withPeer is the http.Server's ConnContext: it records the peer of each connection.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	cred, err := peerCredentials(c)
	return context.WithValue(ctx, peerKey{}, peer{cred: cred, err: err})
}

// allowedUID reports whether a peer running as uid may use the socket.
func allowedUID(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Geteuid())
}

// onlyRoot answers 403 to every request of a connection whose peer is not root (or the
// agent's own user) or cannot be identified, before the request reaches next.
func onlyRoot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(peerKey{}).(peer)
		switch {
		case p.err != nil || p.cred == nil:
			klog.FromContext(r.Context()).Info("Refused a CNI socket peer that cannot be identified", "err", p.err)
			writeError(w, http.StatusForbidden, fmt.Sprintf("the node agent serves only root on this socket and cannot identify the caller: %v", p.err))
			return
		case !allowedUID(p.cred.Uid):
			klog.FromContext(r.Context()).Info("Refused a CNI socket peer that is not root", "uid", p.cred.Uid, "pid", p.cred.Pid)
			writeError(w, http.StatusForbidden, fmt.Sprintf("the node agent serves only root on this socket; the caller (pid %d) runs as uid %d", p.cred.Pid, p.cred.Uid))
			return
		}
		next.ServeHTTP(w, r)
	})
}
