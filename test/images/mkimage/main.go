// Command mkimage writes the juneau image as a docker-archive tar without Docker or a
// registry (make image): the layout of the repository's Dockerfile on a busybox base,
// from a statically linked juneau binary. Load it with
//
//	ctr -n k8s.io images import <archive>
//
// or push it with any registry client.
package main

import (
	"flag"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/loutres/juneau/test/images"
)

func main() {
	binary := flag.String("juneau", "bin/juneau", "statically linked juneau binary")
	busybox := flag.String("busybox", images.BusyboxBinary, "statically linked busybox (Debian busybox-static)")
	out := flag.String("o", "bin/juneau-image.tar", "archive to write")
	name := flag.String("name", images.JuneauRepository+":latest", "image name in the archive")
	flag.Parse()
	if err := run(*binary, *busybox, *out, *name); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(binary, busybox, out, name string) error {
	img, err := images.Juneau(binary, busybox)
	if err != nil {
		return err
	}
	if err := images.WriteArchive(out, map[string]v1.Image{name: img}); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	tag, err := images.ContentTag(img)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (%s; content tag %s)\n", out, name, digest, tag)
	return nil
}
