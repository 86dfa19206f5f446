//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testLiveMetrics reads /metrics of the function's and provider-kilomesh's
// pods while a mesh runs, as a Prometheus scrape would, and runs promtool's
// `check metrics` on it: every family kilomesh exports must pass promtool's
// every lint, and must be there; the families of the libraries beneath it
// (controller-runtime, client-go, Go) must at least parse.
func testLiveMetrics(ctx context.Context, t *testing.T) {
	bin := filepath.Join(top, ".cache", "bin", "promtool")
	build := exec.CommandContext(ctx, filepath.Join(top, "test", "tools", "build.sh"), "promtool")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build promtool: %v\n%s", err, out)
	}
	for _, c := range []struct {
		pkg  pkg
		want []string
	}{
		{pkgs[0], []string{"kilomesh_function_runs_total", "kilomesh_function_run_duration_seconds", "kilomesh_function_response_bytes", "kilomesh_mesh_member_reachable", "kilomesh_mesh_converged"}},
		{pkgs[2], []string{"kilomesh_inventory_reachable", "kilomesh_inventory_nodes", "kilomesh_peerset_peers_desired", "kilomesh_peerset_peers_applied", "kilomesh_peerset_apply_duration_seconds"}},
	} {
		p, err := packagePod(ctx, c.pkg)
		if err != nil {
			t.Fatalf("%s: %v", c.pkg.name, err)
		}
		body, err := scrape(ctx, p.Status.PodIP+":8080")
		if err != nil {
			t.Fatalf("%s: %v", c.pkg.name, err)
		}
		ours := kilomeshFamilies(body)
		for _, name := range c.want {
			if !strings.Contains(string(ours), "# TYPE "+name+" ") {
				t.Errorf("%s's /metrics has no %s", c.pkg.name, name)
			}
		}
		// promtool parses the whole exposition for its cardinality
		// report (--extended), and lints kilomesh's own families.
		for _, run := range []struct {
			args []string
			in   []byte
		}{{[]string{"--lint=all"}, ours}, {[]string{"--extended", "--lint=none"}, body}} {
			cmd := exec.CommandContext(ctx, bin, append([]string{"check", "metrics"}, run.args...)...)
			cmd.Stdin = bytes.NewReader(run.in)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics %s on %s's /metrics: %v\n%s", strings.Join(run.args, " "), c.pkg.name, err, out)
			}
		}
	}
}

// scrape reads a pod's /metrics.
func scrape(ctx context.Context, addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// kilomeshFamilies keeps kilomesh's own families of an exposition.
func kilomeshFamilies(body []byte) []byte {
	var b bytes.Buffer
	s := bufio.NewScanner(bytes.NewReader(body))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		name := line
		if f := strings.Fields(line); len(f) >= 3 && strings.HasPrefix(line, "#") {
			name = f[2]
		}
		if strings.HasPrefix(name, "kilomesh_") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
