package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "Path of the static implicit-apiserver binary (linux, CGO_ENABLED=0).")
	flag.StringVar(&o.caBundle, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle installed as /etc/ssl/certs/ca-certificates.crt.")
	flag.StringVar(&o.tag, "tag", "implicit-apiserver:dev", "Image reference written into the archive (name:tag).")
	flag.StringVar(&o.version, "version", "dev", "Version, in the image's org.opencontainers.image.version label.")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH the binary was built for.")
	flag.StringVar(&o.out, "out", "", "Output file: an OCI image layout as a tar archive.")
	created := flag.Int64("created", 0, "Creation time of the image and its files, in seconds since the epoch (SOURCE_DATE_EPOCH).")
	flag.Parse()
	o.created = time.Unix(*created, 0).UTC()
	if o.binary == "" || o.out == "" {
		fmt.Fprintln(os.Stderr, "image: --binary and --out are required")
		flag.Usage()
		os.Exit(2)
	}
	digest, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s: %s %s\n", o.out, o.tag, digest)
}

type options struct {
	binary, caBundle, tag, version, arch, out string
	created                                   time.Time
}

func run(o options) (string, error) {
	img, err := build(o)
	if err != nil {
		return "", err
	}
	if err := writeArchive(img, o.tag, o.out, o.created); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
