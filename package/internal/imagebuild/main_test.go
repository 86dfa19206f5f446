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

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

type entry struct {
	Name     string
	Mode     int64
	UID, GID int
	Body     string
}

func entries(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{Name: h.Name, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Body: string(body)})
	}
}

func TestLayerTar(t *testing.T) {
	cases := map[string]struct {
		reason     string
		entrypoint string
		want       []entry
	}{
		"Nested": {
			reason:     "The folders leading to the binary exist, /tmp is writable by all, and root owns everything: the user cannot rewrite the binary.",
			entrypoint: "/usr/local/bin/app",
			want: []entry{
				{Name: "usr/", Mode: 0o755},
				{Name: "usr/local/", Mode: 0o755},
				{Name: "usr/local/bin/", Mode: 0o755},
				{Name: "tmp/", Mode: 0o1777},
				{Name: "usr/local/bin/app", Mode: 0o755, Body: "binary"},
			},
		},
		"Root": {
			reason:     "A binary at the root needs no folder.",
			entrypoint: "/app",
			want: []entry{
				{Name: "tmp/", Mode: 0o1777},
				{Name: "app", Mode: 0o755, Body: "binary"},
			},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			lt, err := layerTar(tc.entrypoint, []byte("binary"))
			if err != nil {
				t.Fatal(err)
			}
			got := entries(t, lt)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nlayerTar(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := writeFile(bin, "binary"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	c := &CLI{Binary: bin, Entrypoint: "/usr/local/bin/app", Args: []string{"--debug"}, UID: 65532, Platform: "linux/arm64", Tag: "example.com/org/app:v1", Out: out, Port: []string{"8080/tcp"}, Label: []string{"org.opencontainers.image.version=v1"}}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("example.com/org/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		OS, Arch, User    string
		Entrypoint, Cmd   []string
		Ports, LayerCount int
		Labels            map[string]string
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	got := summary{OS: cf.OS, Arch: cf.Architecture, User: cf.Config.User, Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd, Ports: len(cf.Config.ExposedPorts), LayerCount: len(layers), Labels: cf.Config.Labels}
	want := summary{OS: "linux", Arch: "arm64", User: "65532:65532", Entrypoint: []string{"/usr/local/bin/app"}, Cmd: []string{"--debug"}, Ports: 1, LayerCount: 1,
		Labels: map[string]string{"org.opencontainers.image.version": "v1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run: the image runs the binary as the non-root user on the platform: -want, +got:\n%s", diff)
	}

	// The owner and mode of every file of the image, as a container runtime
	// unpacks them: root owns them all and alone may write them, so the
	// user 65532 cannot rewrite the binary.
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	lt, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	files := entries(t, lt)
	for i := range files {
		files[i].Body = ""
	}
	wantFiles := []entry{
		{Name: "usr/", Mode: 0o755},
		{Name: "usr/local/", Mode: 0o755},
		{Name: "usr/local/bin/", Mode: 0o755},
		{Name: "tmp/", Mode: 0o1777},
		{Name: "usr/local/bin/app", Mode: 0o755},
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("Run: every file of the image belongs to root and is writable by root alone (but /tmp, sticky): -want, +got:\n%s", diff)
	}
}

func TestRunRejectsBadLabel(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := writeFile(bin, "binary"); err != nil {
		t.Fatal(err)
	}
	c := &CLI{Binary: bin, Entrypoint: "/app", UID: 65532, Platform: "linux/amd64", Tag: "example.com/org/app:v1", Out: filepath.Join(dir, "image.tar"), Label: []string{"no-value"}}
	err := c.Run()
	if diff := cmp.Diff(`label "no-value" is not key=value`, fmt.Sprint(err)); diff != "" {
		t.Errorf("Run: a label without = is refused, naming it: -want, +got:\n%s", diff)
	}
}

func writeFile(path, body string) error {
	return os.WriteFile(path, []byte(body), 0o600)
}
