package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
	"github.com/kilomesh/kilomesh/internal/plugin/view"
	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// The size of the large mesh of the tests and benchmarks: 5 members of 50
// nodes, every node its own segment, 1,000 Peers.
const (
	largeClusters = 5
	largeNodes    = 50
)

// loadLarge clears namespace network and loads the large mesh into it.
func loadLarge(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	if err := meshfixture.Clear(ctx, apiClient, namespace); err != nil {
		tb.Fatal(err)
	}
	sc, err := meshfixture.LargeMesh(namespace, largeClusters, largeNodes)
	if err != nil {
		tb.Fatal(err)
	}
	if err := meshfixture.Load(ctx, apiClient, sc); err != nil {
		tb.Fatal(err)
	}
}

// TestListCalls pins that the plugin reads a namespace with one list call
// per kind, however many members and nodes its meshes have: never one call
// per member.
func TestListCalls(t *testing.T) {
	needAPIServer(t)
	const (
		meshes      = "GET /apis/kilomesh.io/v1alpha1/namespaces/network/clustermeshes"
		inventories = "GET /apis/kube.kilomesh.io/v1alpha1/namespaces/network/nodeinventories"
		peerSets    = "GET /apis/kube.kilomesh.io/v1alpha1/namespaces/network/peersets"
		objects     = "GET /apis/kubernetes.m.crossplane.io/v1alpha1/namespaces/network/objects"
	)
	cases := map[string]struct {
		reason string
		load   func(t *testing.T)
		want   map[string]int
	}{
		"LargePeerSetMesh": {
			reason: "A mesh of 5 members of 50 nodes delivered by PeerSets is read with one call per kind; Objects are not asked for.",
			load:   func(t *testing.T) { loadLarge(t) },
			want:   map[string]int{meshes: 1, inventories: 1, peerSets: 1},
		},
		"ObjectsMesh": {
			reason: "A mesh that delivered through provider-kubernetes Objects costs one more call, for the Objects.",
			load:   func(t *testing.T) { loadScenario(t, "overlap-freeze") },
			want:   map[string]int{meshes: 1, inventories: 1, peerSets: 1, objects: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.load(t)
			r, err := snapshot.NewReader(apiConfig)
			if err != nil {
				t.Fatal(err)
			}
			s, err := r.Read(context.Background(), namespace)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range s.Meshes {
				p := view.Plan(s, m)
				_ = view.MeshStatus(s, m, p)
				if err := view.WriteDOT(io.Discard, view.MeshGraph(m, p), view.EdgesAuto); err != nil {
					t.Fatal(err)
				}
				_ = view.Diagnose(s, m, p)
			}
			if diff := cmp.Diff(tc.want, r.Recorder.Calls()); diff != "" {
				t.Errorf("%s\nrequests -want +got:\n%s", tc.reason, diff)
			}
			// The snapshot's time is the API server's, from its answers.
			if date, ok := r.Recorder.Date(); !ok || !s.Now.Equal(date) {
				t.Errorf("the snapshot's time is %s, want the Date of the API server's answer (%s, %t)", s.Now, date, ok)
			}
		})
	}
}

// TestLargeMesh checks the large mesh end to end: status sees it converged
// with every member's leaders, and graph draws it by member, in a picture
// Graphviz renders.
func TestLargeMesh(t *testing.T) {
	needAPIServer(t)
	loadLarge(t)
	st := plugin(t, nil, "status", "mesh", "--wait", "--timeout=0s")
	if st.code != exitOK {
		t.Fatalf("kubectl kilomesh status --wait: exit code %d, want %d: %s", st.code, exitOK, st.stderr)
	}
	if !regexp.MustCompile(`cluster-04\s+yes\s+50\s+50\s+node-0000,node-0001,node-0002,\+47\s+200\s+200/200\s`).MatchString(st.stdout) {
		t.Errorf("kubectl kilomesh status: want cluster-04 with 50 segments and 200 of 200 Peers applied, got:\n%s", st.stdout)
	}
	g := plugin(t, nil, "graph", "mesh")
	if g.code != exitOK {
		t.Fatalf("kubectl kilomesh graph: exit code %d: %s", g.code, g.stderr)
	}
	if n := strings.Count(g.stdout, "<tr><td align=\"left\" bgcolor="); n != largeClusters*largeNodes {
		t.Errorf("kubectl kilomesh graph: want a table row per segment (%d), got %d", largeClusters*largeNodes, n)
	}
	if n := strings.Count(g.stdout, "constraint=false"); n != largeClusters*(largeClusters-1) {
		t.Errorf("kubectl kilomesh graph: want an edge per pair of members (%d), got %d", largeClusters*(largeClusters-1), n)
	}
	dot := ensureDot(t)
	svg := plugin(t, &env{lookPath: func(string) (string, error) { return dot, nil }}, "graph", "mesh", "-o", "svg")
	if svg.code != exitOK || !strings.Contains(svg.stdout, "<svg") {
		t.Errorf("kubectl kilomesh graph -o svg: exit code %d, want an SVG: %s", svg.code, svg.stderr)
	}
}

// BenchmarkStatus reads and reports the large mesh, as kubectl kilomesh
// status does, against a real API server.
func BenchmarkStatus(b *testing.B) {
	benchmark(b, "status", "mesh")
}

// BenchmarkGraph reads the large mesh, plans it and draws it as DOT, as
// kubectl kilomesh graph does.
func BenchmarkGraph(b *testing.B) {
	benchmark(b, "graph", "mesh")
}

func benchmark(b *testing.B, args ...string) {
	needAPIServer(b)
	loadLarge(b)
	calls := 0
	b.ResetTimer()
	for b.Loop() {
		var rec *snapshot.Recorder
		e := &env{stdout: io.Discard, stderr: io.Discard, clock: func() time.Time { return now }, reader: func(r *snapshot.Reader) { rec = r.Recorder }}
		if code := run(context.Background(), append([]string{"--kubeconfig", kubeconfig}, args...), e); code != exitOK {
			b.Fatalf("kubectl kilomesh %s: exit code %d", strings.Join(args, " "), code)
		}
		for _, n := range rec.Calls() {
			calls += n
		}
	}
	b.ReportMetric(float64(calls)/float64(b.N), "requests/op")
}
