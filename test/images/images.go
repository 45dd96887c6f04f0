// Package images builds the container images the real cluster of test/cluster runs,
// without Docker and without a registry, with go-containerregistry:
//
//   - the juneau image from a static juneau binary, in the layout of the repository's
//     Dockerfile (/usr/local/bin/juneau as entrypoint, user 65532) on a busybox base that
//     gives the node DaemonSet's install scripts their sh, awk and ip;
//   - a busybox image from Debian's busybox-static (/bin/busybox and a link per applet);
//   - the workload image of the demo and the tests from the box binary (test/images/box).
//
// WriteArchive writes docker-archive tars that `ctr images import` loads.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image names.
const (
	// JuneauRepository is the image name the install manifests use.
	JuneauRepository = "ghcr.io/loutres/juneau"
	// LocalJuneauRepository is the name the test cluster installs juneau under, through
	// the kustomize images: override a user would write.
	LocalJuneauRepository = "juneau.local/juneau"
	// Box is the workload image (test/images/box): serve, dial, pause.
	Box = "juneau.local/box:1"
	// Pause is the image of every Pod sandbox (box pause).
	Pause = "juneau.local/pause:1"
)

// The images the documentation's manifests and steps name, served by the cluster so
// that a page's steps run as written: nginx:1.27 (the examples' Pods) is the box
// image, which answers HTTP on port 80 as nginx does; registry.example/juneau:v0.1.0
// (the image of the install overlay the pages show) is the juneau image.
const (
	DocNginx  = "docker.io/library/nginx:1.27"
	DocJuneau = "registry.example/juneau:v0.1.0"
)

// BusyboxTags are the names users write for busybox, all loaded with Debian's
// busybox-static, so shell Pods run without a registry.
var BusyboxTags = []string{
	"docker.io/library/busybox:latest", "docker.io/library/busybox:stable",
	"docker.io/library/busybox:1", "docker.io/library/busybox:1.36", "docker.io/library/busybox:1.37",
}

// BusyboxBinary is where Debian's busybox-static installs busybox.
const BusyboxBinary = "/bin/busybox"

// nonRoot is the user the Dockerfile's image runs as.
const nonRoot = "65532:65532"

// epoch is the time stamp of every file and image: the same inputs give the same image.
var epoch = time.Unix(0, 0).UTC()

// file is one entry of a layer.
type file struct {
	path string // without leading slash
	mode int64
	data []byte
	link string // symlink target
	dir  bool
}

// layer makes an uncompressed tar of files, with the parent directories of each, and
// wraps it as a gzip layer.
func layer(files []file) (v1.Layer, error) {
	dirs := map[string]bool{}
	var all []file
	for _, f := range files {
		for d := path.Dir(f.path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			all = append(all, file{path: d, mode: 0o755, dir: true})
		}
		if f.dir {
			if dirs[f.path] {
				continue
			}
			dirs[f.path] = true
		}
		all = append(all, f)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].path < all[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range all {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, f.path+"/"
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
}

// image stacks layers and sets the configuration.
func image(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = runtime.GOARCH, "linux", v1.Time{Time: epoch}
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	if cfg.WorkingDir == "" {
		cfg.WorkingDir = "/"
	}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// staticBinary reads a statically linked executable: a dynamically linked one would not
// run in an image without a C library.
func staticBinary(p string) ([]byte, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", p)
		}
	}
	return os.ReadFile(p)
}

// busyboxLayer holds busybox, a link for each of its applets where busybox itself
// installs them (--list-full), /tmp and a minimal /etc.
func busyboxLayer(busybox string) (v1.Layer, error) {
	data, err := staticBinary(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian package busybox-static): %w", err)
	}
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	files := []file{
		{path: "bin/busybox", mode: 0o755, data: data},
		{path: "tmp", mode: 0o1777, dir: true},
		{path: "root", mode: 0o700, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n")},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "bin/busybox" {
			continue
		}
		files = append(files, file{path: applet, mode: 0o777, link: "/bin/busybox"})
	}
	return layer(files)
}

// Busybox is the busybox image: its shell is the default command.
func Busybox(busybox string) (v1.Image, error) {
	base, err := busyboxLayer(busybox)
	if err != nil {
		return nil, err
	}
	return image(v1.Config{Cmd: []string{"sh"}}, base)
}

// Juneau is the juneau image: the Dockerfile's layout (the binary as
// /usr/local/bin/juneau and entrypoint, user 65532) on the busybox layer, whose sh, awk
// and ip the node DaemonSet's init containers use.
func Juneau(juneau, busybox string) (v1.Image, error) {
	base, err := busyboxLayer(busybox)
	if err != nil {
		return nil, err
	}
	data, err := staticBinary(juneau)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]file{{path: "usr/local/bin/juneau", mode: 0o755, data: data}})
	if err != nil {
		return nil, err
	}
	return image(v1.Config{Entrypoint: []string{"/usr/local/bin/juneau"}, User: nonRoot}, base, bin)
}

// Single is an image of one static binary, /<name>, run with args.
func Single(binary, name string, args ...string) (v1.Image, error) {
	data, err := staticBinary(binary)
	if err != nil {
		return nil, err
	}
	l, err := layer([]file{{path: name, mode: 0o755, data: data}, {path: "tmp", mode: 0o1777, dir: true}})
	if err != nil {
		return nil, err
	}
	return image(v1.Config{Entrypoint: []string{"/" + name}, Cmd: args}, l)
}

// ContentTag is a tag derived from the image's content (its config digest): a rebuilt
// binary gives a new tag, so the cluster never runs a stale image under an old name.
func ContentTag(img v1.Image) (string, error) {
	h, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	return "sha-" + h.Hex[:12], nil
}

// WriteArchive writes the images under their names as one docker-archive tar.
func WriteArchive(p string, byName map[string]v1.Image) error {
	refs := make(map[name.Reference]v1.Image, len(byName))
	for n, img := range byName {
		ref, err := name.NewTag(n)
		if err != nil {
			return fmt.Errorf("image name %q: %w", n, err)
		}
		refs[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(p, refs); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}
