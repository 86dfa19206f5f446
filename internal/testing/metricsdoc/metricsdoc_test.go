package metricsdoc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.md")
	table := "| metric | from | what | series |\n|---|---|---|---|\n" +
		"| `a_total{result}` | function | calls | 6 |\n" +
		"| `a_seconds` | function | time (histogram) | 1 histogram |\n" +
		"| `b_{x,y}{namespace}` | provider | two | 2 M |\n" +
		"| `b_z{...,reason}` | provider | one | M |\n"
	if err := os.WriteFile(path, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Family{
		{Name: "a_total", From: "function"},
		{Name: "a_seconds", From: "function", Histogram: true},
		{Name: "b_x", From: "provider"},
		{Name: "b_y", From: "provider"},
		{Name: "b_z", From: "provider"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b_x", "b_y", "b_z"}, From(got, "provider")); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
	if err := os.WriteFile(path, []byte("no table\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("a file without a table of metrics is an error")
	}
}

func TestDescribed(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"l"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	if diff := cmp.Diff([]string{"c_total", "h_seconds"}, Described(h, c)); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}
