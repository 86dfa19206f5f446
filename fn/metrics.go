package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of one RunFunction call, the values of the result label of
// kilomesh_function_runs_total. They are few and fixed, so the metrics'
// cardinality is too: no label names a mesh, a member or a node.
const (
	resultPlanned  = "planned"   // the mesh was planned and composed
	resultWaiting  = "waiting"   // Crossplane has not resolved the requirements yet
	resultFrozen   = "frozen"    // networks overlap: nothing changes
	resultInvalid  = "invalid"   // the spec is invalid: a fatal result
	resultTooLarge = "too_large" // the response would pass the limit: a fatal result
	resultError    = "error"     // any other fatal result
)

// metrics are what the function adds to the gRPC metrics of function-sdk-go.
type metrics struct {
	runs     *prometheus.CounterVec
	duration prometheus.Histogram
	bytes    prometheus.Histogram
}

// newMetrics makes the function's metrics and registers them with r.
func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kilomesh_function_runs_total",
			Help: "RunFunction calls, by result: planned, waiting (for required resources), frozen (networks overlap), invalid (spec), too_large (response over the limit), error.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kilomesh_function_run_duration_seconds",
			Help:    "Time to answer one RunFunction call: decoding, planning, composing and measuring the response.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kilomesh_function_response_bytes",
			Help: "Size of each response the function plans, before its limit is applied. Crossplane refuses responses above 4 MiB; the function answers a fatal result above 3 MiB.",
			Buckets: []float64{16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20,
				2.5 * (1 << 20), 3 << 20, 3.5 * (1 << 20), 4 << 20},
		}),
	}
	r.MustRegister(m.runs, m.duration, m.bytes)
	for _, res := range []string{resultPlanned, resultWaiting, resultFrozen, resultInvalid, resultTooLarge, resultError} {
		m.runs.WithLabelValues(res) // every series exists from the start, at 0
	}
	return m
}

// observe records one call. A nil *metrics records nothing.
func (m *metrics) observe(result string, took time.Duration, responseBytes int) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(result).Inc()
	m.duration.Observe(took.Seconds())
	if responseBytes > 0 {
		m.bytes.Observe(float64(responseBytes))
	}
}
