// Package monitoring tests examples/monitoring: the alert rules with
// Prometheus' own promtool (built from the Go module proxy, test/tools/
// promtool), and that the rules and the dashboard read only metrics that
// kilomesh, or Crossplane, exports.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilomesh/kilomesh/internal/testing/metricsdoc"
)

// crossplane are the metrics of Crossplane core the rules read.
var crossplane = []string{"circuit_breaker_opens_total", "circuit_breaker_events_total"}

// exported returns the metric names kilomesh's function and provider export,
// as docs/observability.md lists them (the tests of fn and
// provider/internal/metrics hold the registries against that list), and
// those of Crossplane core the rules read.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	families, err := metricsdoc.Read(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range families {
		if !f.Histogram {
			out[f.Name] = true
			continue
		}
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			out[f.Name+s] = true
		}
	}
	for _, n := range crossplane {
		out[n] = true
	}
	return out
}

func dir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "examples", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// promtool builds the tool into the repository's .cache/bin.
func promtool(t *testing.T) string {
	t.Helper()
	top, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(top, "test", "tools", "build.sh"), "promtool")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build promtool: %v\n%s", err, out)
	}
	return filepath.Join(top, ".cache", "bin", "promtool")
}

func TestRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = dir(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricName finds the metric names of a PromQL expression: the words that
// start like ours or Crossplane's and are followed by a selector, a range
// or the end of a function's argument.
var metricName = regexp.MustCompile(`\b((?:kilomesh|circuit_breaker)_[a-z_]+)\b`)

func TestMetricsExist(t *testing.T) {
	var exprs []string
	b, err := os.ReadFile(filepath.Join(dir(t), "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "expr:") || strings.HasPrefix(strings.TrimSpace(l), "sum(") || strings.HasPrefix(strings.TrimSpace(l), "- sum(") {
			exprs = append(exprs, l)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err = os.ReadFile(filepath.Join(dir(t), "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("dashboard.json has no panels")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	var unknown []string
	known := exported(t)
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllStringSubmatch(e, -1) {
			used[m[1]] = true
			if !known[m[1]] {
				unknown = append(unknown, m[1])
			}
		}
	}
	sort.Strings(unknown)
	if diff := cmp.Diff([]string(nil), unknown); diff != "" {
		t.Errorf("the rules and the dashboard read metrics nobody exports: -want, +got:\n%s", diff)
	}
	if len(used) < 10 {
		t.Errorf("the rules and the dashboard read only %d metrics: %v", len(used), used)
	}
}

// TestLiveMetrics runs promtool check metrics on what a running component
// serves, when KILOMESH_METRICS_FILES names files holding scrapes (the
// end-to-end tests write them).
func TestLiveMetrics(t *testing.T) {
	files := strings.Fields(os.Getenv("KILOMESH_METRICS_FILES"))
	if len(files) == 0 {
		t.Skip("KILOMESH_METRICS_FILES names no scrape")
	}
	bin := promtool(t)
	for _, f := range files {
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), bin, "check", "metrics")
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		in.Close()
		if err != nil {
			t.Errorf("promtool check metrics < %s: %v\n%s", f, err, out)
		}
	}
}
