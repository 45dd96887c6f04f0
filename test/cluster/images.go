package cluster

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"github.com/loutres/juneau/test/images"
)

// buildImages makes every image the cluster runs: juneau (named with a tag from its
// content), busybox under the names users write, the box workload image and the Pod
// sandbox image, and the images the documentation names (images.DocNginx,
// images.DocJuneau).
func (c *Cluster) buildImages() (map[string]v1.Image, error) {
	juneau, err := images.Juneau(c.opts.JuneauBinary, images.BusyboxBinary)
	if err != nil {
		return nil, fmt.Errorf("juneau image: %w", err)
	}
	tag, err := images.ContentTag(juneau)
	if err != nil {
		return nil, err
	}
	c.JuneauImage = images.LocalJuneauRepository + ":" + tag
	busybox, err := images.Busybox(images.BusyboxBinary)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	box, err := images.Single(c.opts.BoxBinary, "box", "serve")
	if err != nil {
		return nil, fmt.Errorf("box image: %w", err)
	}
	pause, err := images.Single(c.opts.BoxBinary, "box", "pause")
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	all := map[string]v1.Image{c.JuneauImage: juneau, images.Box: box, images.Pause: pause,
		images.DocJuneau: juneau, images.DocNginx: box}
	for _, n := range images.BusyboxTags {
		all[n] = busybox
	}
	return all, nil
}

// loadImages writes the images as one archive and imports it into the Nodes'
// containerd with ctr, as a user without a registry would.
func (c *Cluster) loadImages(ctx context.Context, all map[string]v1.Image, nodes []*Node) error {
	archive := c.run.path("images.tar")
	if err := images.WriteArchive(archive, all); err != nil {
		return err
	}
	var g errgroup.Group
	for _, n := range nodes {
		g.Go(func() error { return n.importImages(ctx, archive) })
	}
	err := g.Wait()
	_ = os.Remove(archive)
	return err
}

// registry serves the same images over HTTP on the segment, at the address every
// Node's containerd uses as mirror of docker.io and juneau.local: a Pod that must pull
// (image busybox, whose implied :latest tag means imagePullPolicy Always) gets the
// local image instead of reaching for the Internet, which no namespace can route to.
type imageRegistry struct {
	srv *http.Server
	log *os.File
}

func (c *Cluster) serveRegistry(ctx context.Context, all map[string]v1.Image) (*imageRegistry, error) {
	logFile, err := os.Create(c.run.path("logs", "registry.log"))
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", ControlPlaneIP, RegistryPort)
	l, err := inNamespace(c.CPNS, func() (net.Listener, error) { return net.Listen("tcp4", addr) })
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("registry listener: %w", err)
	}
	logger := log.New(logFile, "", log.LstdFlags)
	// Blobs on disk, in the run directory: a sandbox keeps running for long.
	if err := os.MkdirAll(c.run.path("registry"), 0o755); err != nil {
		logFile.Close()
		return nil, err
	}
	blobs := registry.NewDiskBlobHandler(c.run.path("registry"))
	r := &imageRegistry{log: logFile, srv: &http.Server{Handler: registry.New(registry.Logger(logger), registry.WithBlobHandler(blobs)),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}}
	go func() { _ = r.srv.Serve(l) }()
	// Push from here, dialing from inside the control plane's namespace.
	push := remote.WithTransport(&http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return inNamespace(c.CPNS, func() (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, network, addr) })
	}})
	for n, img := range all {
		ref, err := name.ParseReference(n)
		if err == nil {
			var local name.Tag
			local, err = name.NewTag(fmt.Sprintf("%s/%s:%s", addr, ref.Context().RepositoryStr(), ref.Identifier()), name.Insecure)
			if err == nil {
				err = remote.Write(local, img, push, remote.WithContext(ctx))
			}
		}
		if err != nil {
			r.close()
			return nil, fmt.Errorf("pushing %s to the registry: %w", n, err)
		}
	}
	return r, nil
}

func (r *imageRegistry) close() {
	if r != nil {
		_ = r.srv.Close()
		_ = r.log.Close()
	}
}
