/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command imagebuild writes a container image holding one static binary as
// an image tarball, without a container engine: an empty base, one layer
// with the binary, a non-root user and the binary as entrypoint. Every file
// of the layer belongs to root and only root may write it, so the process,
// which never runs as root, cannot rewrite its own binary. The tarball is
// what `crossplane xpkg build --embed-runtime-image-tarball` embeds in a
// package.
package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// CLI of imagebuild.
type CLI struct {
	Binary     string   `help:"The static binary to put in the image."                          required:"" type:"existingfile"`
	Entrypoint string   `default:"/usr/local/bin/app" help:"Where the binary lives in the image; it is the entrypoint."`
	Args       []string `help:"Arguments after the entrypoint (the image's CMD)."`
	UID        int      `default:"65532" help:"User and group the image runs as."`
	Platform   string   `default:"linux/amd64" help:"OS and architecture of the binary, as os/arch."`
	Tag        string   `help:"Reference recorded in the tarball, e.g. xpkg.crossplane.io/org/name:v1." required:""`
	Out        string   `help:"The image tarball to write."                                      required:"" type:"path"`
	Port       []string `help:"Ports the image exposes, e.g. 8080/tcp."`
	Label      []string `help:"Labels of the image, as key=value, e.g. org.opencontainers.image.version=v0.1.0."`
}

const (
	errRead     = "cannot read the binary"
	errLayer    = "cannot make the image layer"
	errImage    = "cannot assemble the image"
	errTag      = "cannot parse the tag"
	errWrite    = "cannot write the image tarball"
	errPlatform = "the platform must be os/arch"
	errFmtLabel = "label %q is not key=value"
)

// epoch keeps builds reproducible: every timestamp of the image is zero.
var epoch = time.Unix(0, 0).UTC()

// Run builds the image.
func (c *CLI) Run() error {
	osName, arch, ok := strings.Cut(c.Platform, "/")
	if !ok {
		return errors.New(errPlatform)
	}
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		return errors.Wrap(err, errRead)
	}
	lt, err := layerTar(c.Entrypoint, bin)
	if err != nil {
		return errors.Wrap(err, errLayer)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(lt)), nil
	})
	if err != nil {
		return errors.Wrap(err, errLayer)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return errors.Wrap(err, errImage)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return errors.Wrap(err, errImage)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: epoch}
	uid := strconv.Itoa(c.UID)
	cf.Config.User = uid + ":" + uid
	cf.Config.Entrypoint = []string{c.Entrypoint}
	cf.Config.Cmd = c.Args
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if len(c.Label) > 0 {
		cf.Config.Labels = map[string]string{}
		for _, l := range c.Label {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return errors.Errorf(errFmtLabel, l)
			}
			cf.Config.Labels[k] = v
		}
	}
	if len(c.Port) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range c.Port {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return errors.Wrap(err, errImage)
	}
	ref, err := name.ParseReference(c.Tag)
	if err != nil {
		return errors.Wrap(err, errTag)
	}
	return errors.Wrap(tarball.WriteToFile(c.Out, ref, img), errWrite)
}

// layerTar returns a tar stream with the folders leading to the entrypoint,
// the binary itself and /tmp. Everything belongs to root (uid and gid 0,
// the zero value of a tar header) and is writable by root alone, except
// /tmp, where the sticky bit lets a user remove only the files it made.
func layerTar(entrypoint string, bin []byte) ([]byte, error) {
	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	dir := path.Dir(strings.TrimPrefix(entrypoint, "/"))
	var parts []string
	for _, p := range strings.Split(dir, "/") {
		if p == "" || p == "." {
			continue
		}
		parts = append(parts, p)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(entrypoint, "/"),
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  epoch,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func main() {
	ctx := kong.Parse(&CLI{}, kong.Name("imagebuild"), kong.Description("Write a container image holding one static binary as an image tarball."))
	ctx.FatalIfErrorf(ctx.Run())
}
