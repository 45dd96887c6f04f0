package arp

import (
	"context"
	"fmt"
	"net"

	"github.com/mdlayher/packet"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/node/responder"
)

// open starts what goes with each socket the skeleton opens on ifi: the kernel
// path if it can be had (then the socket receives nothing: the program has
// answered what there was to answer and the socket only sends), and gratuitous
// ARP while the socket is open.
func (r *Responder) open(ctx context.Context, ifi *net.Interface) (responder.Session, error) {
	logger := klog.FromContext(ctx)
	var k *kernelPath
	if !r.kernelOff.Load() {
		var err error
		if k, err = r.startKernel(ifi); err != nil {
			if !r.kernelLogged {
				logger.Info("Cannot answer ARP in the kernel; answering from user space", "reason", err.Error())
				r.kernelLogged = true
			}
			k = nil
		}
	}
	path := PathSocket
	var broken <-chan struct{} // the kernel path's address map failed
	s := responder.Session{Close: func() {
		r.path.Store(nil)
		r.stopKernel(k)
	}}
	if k != nil {
		s.Filter, path, broken = receiveNothing, PathKernel, r.kernelBroken
	}
	s.Run = func(ctx context.Context, c *packet.Conn) error {
		r.path.Store(&path)
		logger.Info("Answering ARP requests", "path", path)
		return r.announce(ctx, c, ifi.HardwareAddr, broken)
	}
	return s, nil
}

// startKernel loads the kernel path, fills its address map and attaches it to ifi.
func (r *Responder) startKernel(ifi *net.Interface) (*kernelPath, error) {
	k, err := loadKernelPath(ifi.HardwareAddr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if err := k.set(as4(r.Owned()), nil); err != nil { // every owned address
		r.mu.Unlock()
		k.close()
		return nil, fmt.Errorf("owned-address map: %w", err)
	}
	r.kern, r.kernelErr = k, nil
	select {
	case <-r.kernelBroken:
	default:
	}
	r.mu.Unlock()
	if err := k.attach(ifi.Index); err != nil {
		r.mu.Lock()
		r.kern = nil
		r.mu.Unlock()
		k.close()
		return nil, err
	}
	return k, nil
}

// stopKernel detaches k (if not nil), keeps its counters and closes it.
func (r *Responder) stopKernel(k *kernelPath) {
	if k == nil {
		return
	}
	if k.link != nil {
		_ = k.link.Close()
		k.link = nil
	}
	r.mu.Lock()
	if c, err := k.counts(); err == nil {
		for i := range c {
			r.kernelClosed[i] += c[i]
		}
	}
	r.kern = nil
	r.mu.Unlock()
	k.close()
}

// kernelCounts reads the counters of the kernel paths: the attached one's and
// those of the ones closed.
func (r *Responder) kernelCounts() [nSlots]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := r.kernelClosed
	if r.kern == nil {
		return sum
	}
	c, err := r.kern.counts()
	if err != nil {
		return sum // better a dip than a wrong figure
	}
	for i := range sum {
		sum[i] += c[i]
	}
	return sum
}
