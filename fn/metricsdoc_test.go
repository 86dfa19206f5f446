package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilomesh/kilomesh/internal/testing/metricsdoc"
)

// TestMetricsDocumented holds the function's registry against the table of
// metrics of docs/observability.md.
func TestMetricsDocumented(t *testing.T) {
	families, err := metricsdoc.Read("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	r := prometheus.NewRegistry()
	m := newMetrics(r)
	mm := newMeshMetrics(r, time.Now)
	if diff := cmp.Diff(metricsdoc.From(families, "function"), metricsdoc.Described(m.runs, m.duration, m.bytes, mm)); diff != "" {
		t.Errorf("docs/observability.md lists every metric family the function registers (-guide, +registered):\n%s", diff)
	}
}
