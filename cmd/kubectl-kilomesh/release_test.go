package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// krewPlugin is the part of a krew manifest the release is checked for.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestReleaseArchive builds the release archive of this machine's platform
// with package/plugin/build.sh, as make plugin does for every platform, and
// checks it: the archive holds the binary and LICENSE, the krew manifest
// names it with its sha256, and the binary runs.
func TestReleaseArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin: skipped with -short")
	}
	top, err := meshfixture.Top()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.CommandContext(context.Background(), filepath.Join(top, "package", "plugin", "build.sh"))
	cmd.Env = append(os.Environ(), "VERSION=v1.2.3-test", "PLATFORMS="+platform, "OUTPUT="+out, "RELEASE_URL=https://example.com/v1.2.3-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("package/plugin/build.sh: %v\n%s", err, b)
	}

	b, err := os.ReadFile(filepath.Join(out, "kilomesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("the krew manifest does not parse: %v", err)
	}
	archive := "kubectl-kilomesh_v1.2.3-test_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	data, err := os.ReadFile(filepath.Join(out, archive))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("the krew manifest has %d platforms, want 1", len(m.Spec.Platforms))
	}
	p := m.Spec.Platforms[0]
	got := []string{m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version, p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"], p.URI, p.SHA256, p.Bin}
	want := []string{"krew.googlecontainertools.github.com/v1alpha2", "Plugin", "kilomesh", "v1.2.3-test", platform,
		"https://example.com/v1.2.3-test/" + archive, hex.EncodeToString(sum[:]), "kubectl-kilomesh"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the krew manifest: -want +got:\n%s", diff)
	}

	files := untar(t, data, t.TempDir())
	if diff := cmp.Diff([]string{"LICENSE", "kubectl-kilomesh"}, files); diff != "" {
		t.Errorf("the archive's files: -want +got:\n%s", diff)
	}
}

// untar extracts a tar.gz into dir and lists its files; the binary in it
// must print the release's version.
func untar(t *testing.T, data []byte, dir string) []string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(h.Name)), os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	v, err := exec.CommandContext(context.Background(), filepath.Join(dir, "kubectl-kilomesh"), "version").Output()
	if err != nil {
		t.Fatalf("kubectl-kilomesh version: %v", err)
	}
	if strings.TrimSpace(string(v)) != "kubectl-kilomesh v1.2.3-test" {
		t.Errorf("kubectl-kilomesh version: want the release's version, got %q", v)
	}
	return files
}
