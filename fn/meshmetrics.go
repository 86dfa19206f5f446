package main

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// meshExpiry is how long the series of a mesh outlive its last plan.
// Crossplane calls the function for every live mesh at least once per
// response TTL (a minute), so a mesh not planned for five minutes is gone,
// or served by another replica of the function.
const meshExpiry = 5 * time.Minute

// Bounds on the meshes whose series the function exports. Every mesh of
// the management cluster calls the function, and any tenant can make
// meshes: a mesh past a bound is planned as any other, only its series are
// not exported, and kilomesh_mesh_metrics_omitted_meshes counts it. A mesh
// has 2 + 3 x members series and one per skip or conflict reason present.
const (
	// maxMeshSeries is the most meshes whose series are exported.
	maxMeshSeries = 512
	// maxMeshSeriesPerNamespace is the most meshes of one namespace whose
	// series are exported: a tenant with many meshes cannot push the
	// others' out.
	maxMeshSeriesPerNamespace = 64
	// maxOmittedMeshes is the most meshes left out that are counted; past
	// it the count says "at least".
	maxOmittedMeshes = 16 * maxMeshSeries
)

var (
	meshSeriesLabels   = []string{"namespace", "mesh"}
	memberSeriesLabels = []string{"namespace", "mesh", "member"}
	reasonSeriesLabels = []string{"namespace", "mesh", "member", "reason"}

	descFrozen = prometheus.NewDesc("kilomesh_mesh_frozen",
		"1 while the mesh is frozen (its networks overlap, or its spec is invalid): no Peer changes.", meshSeriesLabels, nil)
	descConverged = prometheus.NewDesc("kilomesh_mesh_converged",
		"1 when the mesh's last plan had nothing pending (Converged=True).", meshSeriesLabels, nil)
	descMemberReachable = prometheus.NewDesc("kilomesh_mesh_member_reachable",
		"1 while the mesh observes the member (its last known nodes are used otherwise).", memberSeriesLabels, nil)
	descMemberPeers = prometheus.NewDesc("kilomesh_mesh_member_peers",
		"Peers of the member's segments the mesh writes into the other members, counted per member written into.", memberSeriesLabels, nil)
	descMemberNodes = prometheus.NewDesc("kilomesh_mesh_member_nodes",
		"Nodes of the member the mesh observes.", memberSeriesLabels, nil)
	descMemberSkipped = prometheus.NewDesc("kilomesh_mesh_member_skipped_nodes",
		"Nodes of the member the mesh leaves out, by skip reason (only reasons with skipped nodes).", reasonSeriesLabels, nil)
	descMemberConflicts = prometheus.NewDesc("kilomesh_mesh_member_conflicts",
		"Peers not written into the member as planned, because a Peer the mesh does not own is in the way, by reason (only reasons with conflicts).", reasonSeriesLabels, nil)
	descOmittedMeshes = prometheus.NewDesc("kilomesh_mesh_metrics_omitted_meshes",
		"Meshes planned in the last five minutes whose series are not exported: more than 512 meshes, or more than 64 in their namespace.", nil, nil)
)

type meshKey struct{ namespace, name string }

// A meshSample is what the last plan of one mesh said.
type meshSample struct {
	at        time.Time
	frozen    bool
	converged bool
	members   []memberSample
}

type memberSample struct {
	name             string
	reachable        bool
	nodes, peers     int
	skipped, conflts map[string]int
}

// meshMetrics exports, per mesh, what its last plan said: what only the
// function knows (skipped nodes by reason, conflicts, convergence). It is a
// collector of its own so that the series of a mesh that is gone expire;
// the series count is, per mesh, 2 + 3 x members + the reasons present,
// for at most maxMeshSeries meshes.
type meshMetrics struct {
	mu     sync.Mutex
	now    func() time.Time
	meshes map[meshKey]*meshSample
	// inNamespace counts the meshes of each namespace.
	inNamespace map[string]int
	// omitted are the meshes left out, with when they were last planned.
	omitted map[meshKey]time.Time
}

func newMeshMetrics(r prometheus.Registerer, now func() time.Time) *meshMetrics {
	m := &meshMetrics{now: now, meshes: map[meshKey]*meshSample{}, inNamespace: map[string]int{}, omitted: map[meshKey]time.Time{}}
	r.MustRegister(m)
	return m
}

// admit tells whether the series of a mesh are exported: a mesh already
// exported stays, a new one only within the bounds. m.mu is held.
func (m *meshMetrics) admit(k meshKey, now time.Time) bool {
	if _, ok := m.meshes[k]; ok {
		return true
	}
	m.expire(now)
	if len(m.meshes) >= maxMeshSeries || m.inNamespace[k.namespace] >= maxMeshSeriesPerNamespace {
		if _, ok := m.omitted[k]; ok || len(m.omitted) < maxOmittedMeshes {
			m.omitted[k] = now
		}
		return false
	}
	m.inNamespace[k.namespace]++
	return true
}

// expire forgets the meshes not planned in the last meshExpiry. m.mu is
// held.
func (m *meshMetrics) expire(now time.Time) {
	for k, s := range m.meshes {
		if now.Sub(s.at) > meshExpiry {
			delete(m.meshes, k)
			if m.inNamespace[k.namespace]--; m.inNamespace[k.namespace] <= 0 {
				delete(m.inNamespace, k.namespace)
			}
		}
	}
	for k, at := range m.omitted {
		if now.Sub(at) > meshExpiry {
			delete(m.omitted, k)
		}
	}
}

// planned records the plan of a mesh. A nil *meshMetrics records nothing.
func (m *meshMetrics) planned(x *xrMesh, plan *mesh.Plan) {
	if m == nil {
		return
	}
	s := &meshSample{at: m.now(), converged: len(plan.Pending) == 0}
	for _, c := range plan.Status.Clusters {
		s.members = append(s.members, memberSample{
			name: c.Name, reachable: c.Reachable, nodes: c.Nodes, peers: c.Peers,
			skipped: plan.Skipped[c.Name], conflts: plan.Conflicts[c.Name],
		})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := meshKey{x.Namespace, x.Name}
	if !m.admit(k, s.at) {
		return
	}
	delete(m.omitted, k)
	m.meshes[k] = s
}

// frozen records that a mesh is frozen; what it said of its members before
// stays, since nothing changes while it is frozen.
func (m *meshMetrics) frozen(x *xrMesh) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := meshKey{x.Namespace, x.Name}
	now := m.now()
	if !m.admit(k, now) {
		return
	}
	s := &meshSample{}
	if prev, ok := m.meshes[k]; ok {
		*s = *prev
	}
	s.at, s.frozen, s.converged = now, true, false
	m.meshes[k] = s
}

// Describe sends the descriptions of the metrics.
func (m *meshMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFrozen, descConverged, descMemberReachable, descMemberPeers, descMemberNodes, descMemberSkipped, descMemberConflicts, descOmittedMeshes} {
		ch <- d
	}
}

// Collect sends the series of every mesh planned in the last meshExpiry, and
// forgets the others.
func (m *meshMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(m.now())
	constGauge(ch, descOmittedMeshes, float64(len(m.omitted)))
	for k, s := range m.meshes {
		constGauge(ch, descFrozen, boolValue(s.frozen), k.namespace, k.name)
		constGauge(ch, descConverged, boolValue(s.converged), k.namespace, k.name)
		for _, mb := range s.members {
			constGauge(ch, descMemberReachable, boolValue(mb.reachable), k.namespace, k.name, mb.name)
			constGauge(ch, descMemberPeers, float64(mb.peers), k.namespace, k.name, mb.name)
			constGauge(ch, descMemberNodes, float64(mb.nodes), k.namespace, k.name, mb.name)
			for _, r := range sortedKeys(mb.skipped) {
				constGauge(ch, descMemberSkipped, float64(mb.skipped[r]), k.namespace, k.name, mb.name, r)
			}
			for _, r := range sortedKeys(mb.conflts) {
				constGauge(ch, descMemberConflicts, float64(mb.conflts[r]), k.namespace, k.name, mb.name, r)
			}
		}
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func constGauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
