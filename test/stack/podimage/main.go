// Command podimage writes a container image of files of this machine as an
// image tarball (the docker-save layout that `ctr images import` reads),
// without a container engine: an empty base, one layer, every timestamp
// zero. The real nodes of the stack import what it writes.
//
//	podimage --tag stack.local/hello:v1 --out hello.tar --uid 65532 \
//	  --entrypoint /usr/local/bin/hello --file /path/to/hello:/usr/local/bin/hello
//
// A --file SRC[:DST] is read with symlinks followed and written at DST
// (default SRC), with SRC's permission bits, owned by root; a folder SRC is
// written whole. Parent folders are 0755; /tmp, /run, /var/run are 1777.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var epoch = time.Unix(0, 0).UTC()

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// entry is one regular file of the layer.
type entry struct {
	src  string
	mode fs.FileMode
}

func main() {
	var files, env, args list
	tag := flag.String("tag", "", "reference recorded in the tarball")
	out := flag.String("out", "", "the image tarball to write")
	uid := flag.Int("uid", 0, "user and group the image runs as (0: root)")
	entrypoint := flag.String("entrypoint", "", "the image's entrypoint")
	flag.Var(&files, "file", "SRC[:DST] of this machine to put in the image (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE of the image's environment (repeatable)")
	flag.Var(&args, "arg", "argument after the entrypoint (repeatable)")
	flag.Parse()
	if *tag == "" || *out == "" || *entrypoint == "" || len(files) == 0 {
		fmt.Fprintln(os.Stderr, "podimage: --tag, --out, --entrypoint and at least one --file are required")
		os.Exit(2)
	}
	if err := write(*tag, *out, *entrypoint, *uid, files, env, args); err != nil {
		fmt.Fprintln(os.Stderr, "podimage:", err)
		os.Exit(1)
	}
}

func write(tag, out, entrypoint string, uid int, files, env, args []string) error {
	entries := map[string]entry{}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok {
			dst = src
		}
		if err := collect(entries, src, strings.TrimPrefix(path.Clean("/"+dst), "/")); err != nil {
			return err
		}
	}
	lt, err := layer(entries)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(lt)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: epoch}
	if uid != 0 {
		cf.Config.User = strconv.Itoa(uid) + ":" + strconv.Itoa(uid)
	}
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Cmd = args
	cf.Config.WorkingDir = "/"
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// collect adds src (a file, or a folder walked whole) at dst.
func collect(entries map[string]entry, src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		entries[dst] = entry{src: src, mode: st.Mode().Perm()}
		return nil
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return errors.New(p + ": a symlink to a folder is not supported")
		}
		entries[path.Join(dst, filepath.ToSlash(rel))] = entry{src: p, mode: st.Mode().Perm()}
		return nil
	})
}

// layer returns the tar stream of the entries and their parent folders.
func layer(entries map[string]entry) ([]byte, error) {
	dirs := map[string]int64{"tmp": 0o1777, "run": 0o1777, "var": 0o755, "var/run": 0o1777}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	dnames := make([]string, 0, len(dirs))
	for d := range dirs {
		dnames = append(dnames, d)
	}
	sort.Strings(dnames)
	sort.Strings(names)
	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	for _, d := range dnames {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: dirs[d], ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		b, err := os.ReadFile(entries[n].src)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: int64(entries[n].mode), Size: int64(len(b)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
