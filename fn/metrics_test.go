package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
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

// TestMeshMetrics pins what the function says of each mesh: its members'
// reachability, Peers, skipped nodes by reason and conflicts, whether it is
// frozen, and that the series of a mesh no longer planned expire.
func TestMeshMetrics(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := prometheus.NewRegistry()
	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, now: func() time.Time { return now },
		meshes: newMeshMetrics(r, func() time.Time { return now })}

	// cluster-b's node is skipped: its pod CIDR is outside the declared one.
	if _, err := f.RunFunction(context.Background(), request(xr(t, "PeerSet", "10.3.0.0/16"), observedTwo(t, "False"), noOtherMeshes)); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kilomesh_mesh_converged 1 when the mesh's last plan had nothing pending (Converged=True).
# TYPE kilomesh_mesh_converged gauge
kilomesh_mesh_converged{mesh="mesh",namespace="network"} 1
# HELP kilomesh_mesh_frozen 1 while the mesh is frozen (its networks overlap, or its spec is invalid): no Peer changes.
# TYPE kilomesh_mesh_frozen gauge
kilomesh_mesh_frozen{mesh="mesh",namespace="network"} 0
# HELP kilomesh_mesh_member_reachable 1 while the mesh observes the member (its last known nodes are used otherwise).
# TYPE kilomesh_mesh_member_reachable gauge
kilomesh_mesh_member_reachable{member="cluster-a",mesh="mesh",namespace="network"} 1
kilomesh_mesh_member_reachable{member="cluster-b",mesh="mesh",namespace="network"} 0
# HELP kilomesh_mesh_member_skipped_nodes Nodes of the member the mesh leaves out, by skip reason (only reasons with skipped nodes).
# TYPE kilomesh_mesh_member_skipped_nodes gauge
kilomesh_mesh_member_skipped_nodes{member="cluster-b",mesh="mesh",namespace="network",reason="NodePodCIDROutOfRange"} 1
`
	if err := testutil.CollectAndCompare(f.meshes, strings.NewReader(want), "kilomesh_mesh_converged", "kilomesh_mesh_frozen",
		"kilomesh_mesh_member_reachable", "kilomesh_mesh_member_skipped_nodes"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(f.meshes, "kilomesh_mesh_member_peers"); n != 2 {
		t.Errorf("kilomesh_mesh_member_peers: %d series, want one per member", n)
	}

	// Overlapping networks freeze it.
	if _, err := f.RunFunction(context.Background(), request(xr(t, "PeerSet", "10.1.128.0/17"), observedTwo(t, "True"), noOtherMeshes)); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(gaugeOf(t, f.meshes, "kilomesh_mesh_frozen")); v != 1 {
		t.Errorf("kilomesh_mesh_frozen = %v after an overlap, want 1", v)
	}

	// Not planned for longer than meshExpiry: gone.
	now = now.Add(meshExpiry + time.Second)
	if n := testutil.CollectAndCount(f.meshes) - 1; n != 0 { // but kilomesh_mesh_metrics_omitted_meshes
		t.Errorf("%d series after the mesh was last planned %s ago, want none", n, meshExpiry+time.Second)
	}
}

// TestMeshMetricsBounded pins that the meshes whose series the function
// exports are bounded, in all and per namespace, that a mesh already
// exported keeps its series, and that those left out are counted: any
// tenant can make meshes, and each one's series once stayed for five
// minutes after its last plan, however many there were.
func TestMeshMetricsBounded(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	m := newMeshMetrics(prometheus.NewRegistry(), func() time.Time { return now })
	plan := &mesh.Plan{Status: meshv1alpha1.ClusterMeshStatus{Clusters: []meshv1alpha1.ClusterStatus{{Name: "cluster-a", Reachable: true}}}}
	exported := func() (map[string]int, float64) {
		t.Helper()
		r := prometheus.NewPedanticRegistry()
		r.MustRegister(m)
		mfs, err := r.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got, omitted := map[string]int{}, -1.0
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				switch mf.GetName() {
				case "kilomesh_mesh_converged":
					for _, lp := range s.GetLabel() {
						if lp.GetName() == "namespace" {
							got[lp.GetValue()]++
						}
					}
				case "kilomesh_mesh_metrics_omitted_meshes":
					omitted = s.GetGauge().GetValue()
				}
			}
		}
		return got, omitted
	}
	// tenant-a makes one mesh more than a namespace may export; then
	// tenants with one mesh each fill the rest, and two more come.
	plans := 0
	for i := range maxMeshSeriesPerNamespace + 1 {
		m.planned(&xrMesh{Namespace: "tenant-a", Name: fmt.Sprintf("mesh-%d", i)}, plan)
		plans++
	}
	for i := 0; plans < maxMeshSeries+3; i++ {
		m.planned(&xrMesh{Namespace: fmt.Sprintf("tenant-%d", i), Name: "mesh"}, plan)
		plans++
	}
	got, omitted := exported()
	total := 0
	for _, n := range got {
		total += n
	}
	if got["tenant-a"] != maxMeshSeriesPerNamespace || total != maxMeshSeries || omitted != 3 {
		t.Errorf("%d meshes planned: %d exported, %d of tenant-a, %v omitted; want %d, %d and 3",
			plans, total, got["tenant-a"], omitted, maxMeshSeries, maxMeshSeriesPerNamespace)
	}
	// A mesh exported keeps its series, frozen or planned again.
	m.frozen(&xrMesh{Namespace: "tenant-a", Name: "mesh-0"})
	m.planned(&xrMesh{Namespace: "tenant-0", Name: "mesh"}, plan)
	if got, _ := exported(); got["tenant-a"] != maxMeshSeriesPerNamespace || got["tenant-0"] != 1 {
		t.Errorf("meshes exported after their next plan: %d of tenant-a, %d of tenant-0; want %d and 1", got["tenant-a"], got["tenant-0"], maxMeshSeriesPerNamespace)
	}
	// Once the others expire, a mesh left out gets in.
	now = now.Add(meshExpiry + time.Second)
	m.planned(&xrMesh{Namespace: "tenant-a", Name: fmt.Sprintf("mesh-%d", maxMeshSeriesPerNamespace)}, plan)
	got, omitted = exported()
	if diff := cmp.Diff(map[string]int{"tenant-a": 1}, got); diff != "" || omitted != 0 {
		t.Errorf("meshes exported after the others expired: -want +got:\n%s\nomitted: %v, want 0", diff, omitted)
	}
}

// gaugeOf collects the one series of a metric.
func gaugeOf(t *testing.T, c prometheus.Collector, name string) prometheus.Collector {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(c)
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "copy"})
			g.Set(mf.GetMetric()[0].GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
