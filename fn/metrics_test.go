package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestMetrics pins what each kind of call counts: the result label says how
// the call ended, and every planned response is measured.
func TestMetrics(t *testing.T) {
	cases := map[string]struct {
		reason  string
		req     func(t *testing.T) *fnv1.RunFunctionRequest
		want    string
		wantObs uint64 // responses measured
	}{
		"Planned": {
			reason: "A mesh planned and composed counts as planned, and its response is measured.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.2.0.0/16"), observedTwo(t, "True"), noOtherMeshes)
			},
			want:    resultPlanned,
			wantObs: 1,
		},
		"Waiting": {
			reason: "A call before Crossplane resolved the requirements only asks for them.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.2.0.0/16"), observedTwo(t, "True"), nil)
			},
			want: resultWaiting,
		},
		"Frozen": {
			reason: "Overlapping networks freeze the mesh: counted as frozen, its response measured.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.1.128.0/17"), observedTwo(t, "True"), noOtherMeshes)
			},
			want:    resultFrozen,
			wantObs: 1,
		},
		"Invalid": {
			reason: "A spec that does not parse is a fatal result, counted as invalid.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.2.0.1/16"), observedTwo(t, "True"), noOtherMeshes)
			},
			want: resultInvalid,
		},
		"TooLarge": {
			reason:  "A response over the limit is a fatal result, counted as too_large, and its planned size is measured.",
			req:     func(t *testing.T) *fnv1.RunFunctionRequest { return largeMesh(t, "PeerSet", 10, 1000) },
			want:    resultTooLarge,
			wantObs: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := prometheus.NewRegistry()
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, metrics: newMetrics(r)}
			if _, err := f.RunFunction(context.Background(), tc.req(t)); err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, res := range []string{resultPlanned, resultWaiting, resultFrozen, resultInvalid, resultTooLarge, resultError} {
				got[res] = testutil.ToFloat64(f.metrics.runs.WithLabelValues(res))
			}
			want := map[string]float64{resultPlanned: 0, resultWaiting: 0, resultFrozen: 0, resultInvalid: 0, resultTooLarge: 0, resultError: 0}
			want[tc.want] = 1
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nkilomesh_function_runs_total: -want, +got:\n%s", tc.reason, diff)
			}
			if n := histogramCount(t, r, "kilomesh_function_response_bytes"); n != tc.wantObs {
				t.Errorf("%s\nkilomesh_function_response_bytes counted %d responses, want %d", tc.reason, n, tc.wantObs)
			}
			if n := histogramCount(t, r, "kilomesh_function_run_duration_seconds"); n != 1 {
				t.Errorf("%s\nkilomesh_function_run_duration_seconds counted %d calls, want 1", tc.reason, n)
			}
		})
	}
}

func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
