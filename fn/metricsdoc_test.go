package main

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilomesh/kilomesh/internal/testing/metricsdoc"
)

// TestMetricsDocumented holds the function's registry against the table of
// metrics of docs/observability.md.
func TestMetricsDocumented(t *testing.T) {
	r := prometheus.NewRegistry()
	m := newMetrics(r)
	diff, err := metricsdoc.Diff("../docs/observability.md", "function", m.runs, m.duration, m.bytes, newMeshMetrics(r, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Errorf("docs/observability.md lists every metric family the function registers (-guide, +registered):\n%s", diff)
	}
}
