/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package metrics exports what provider-kilomesh knows of every mesh's
// members as Prometheus metrics: for each NodeInventory whether its member
// answers, how many nodes it observes and since when, and for each PeerSet
// how many Peers it should hold in its member, how many it holds, and what
// is in their way. The values are read from the provider's cache at each
// scrape, so a deleted resource leaves no series behind, and a scrape costs
// no request to any API server.
//
// Every series is labelled with the resource's namespace and name, the mesh
// that composed it and the member it is about: a mesh of M members has M
// inventories and M PeerSets, so the series count is a small constant times
// the number of members of all meshes (the formulas are in
// docs/observability.md). No series names a node.
//
// A tenant of the management cluster can make NodeInventories and PeerSets
// by hand, with any annotations and selector: the mesh and member labels
// are exported only when they are valid names of a mesh and a member (else
// empty), and the resources exported are bounded per mesh and in all,
// shared fairly between namespaces, so that no tenant's resources can grow
// a scrape without bound or push another tenant's series out.
package metrics

import (
	"context"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// The composition resource names the function gives what it composes:
// inventory-<member> and peerset-<member>.
const (
	annotationResourceName = "crossplane.io/composition-resource-name"
	prefixInventory        = "inventory-"
	prefixPeerSet          = "peerset-"
)

var labels = []string{"namespace", "name", "mesh", "member"}

// Bounds on the resources whose series are exported, of each kind
// (NodeInventories, PeerSets). A mesh composes one of each per member; a
// resource made by hand counts where its labels say. Each resource has 7
// series, so this collector exports at most 7 x 2 x MaxResources series
// (57,344), and 7 x 2 x MaxResourcesPerMesh for one mesh (3,584).
const (
	// MaxResourcesPerMesh is the most resources of a kind exported for one
	// mesh, above the most members a mesh can have. The resources of a
	// namespace that name no valid mesh count as those of one mesh.
	MaxResourcesPerMesh = 256
	// MaxResources is the most resources of a kind exported in all. Past
	// it, each namespace gets an equal share, and a namespace that needs
	// less leaves the rest to the others.
	MaxResources = 4096
)

var (
	descReachable = prometheus.NewDesc("kilomesh_inventory_reachable",
		"1 while the member of a NodeInventory answers (Synced=True), else 0.", labels, nil)
	descCredentials = prometheus.NewDesc("kilomesh_inventory_credentials_accepted",
		"1 while provider-kilomesh accepts the credentials of a NodeInventory's member, else 0: a mesh hands nothing to any provider for a member whose credentials are refused.", labels, nil)
	descNodes = prometheus.NewDesc("kilomesh_inventory_nodes",
		"The nodes a NodeInventory observes in its member.", labels, nil)
	descObserved = prometheus.NewDesc("kilomesh_inventory_last_observed_timestamp_seconds",
		"When a NodeInventory last observed its member, in Unix seconds (kept while the member cannot be reached).", labels, nil)
	descIncomplete = prometheus.NewDesc("kilomesh_inventory_incomplete",
		"1 while a bound of the provider cut what a NodeInventory publishes of its member, by what was cut: nodes, or foreign_peers (then no new route is written into the member).",
		append(append([]string(nil), labels...), "bound"), nil)
	descDesired = prometheus.NewDesc("kilomesh_peerset_peers_desired",
		"The Peers a PeerSet should hold in its member.", labels, nil)
	descApplied = prometheus.NewDesc("kilomesh_peerset_peers_applied",
		"The Peers a PeerSet holds in its member as desired.", labels, nil)
	descProblems = prometheus.NewDesc("kilomesh_peerset_problems",
		"Desired Peers of a PeerSet not applied as desired, by reason (PeerNameConflict, PeerKeyConflict, PeerRouteConflict, PeerInvalid), counted among those its status lists (the first 100).",
		append(append([]string(nil), labels...), "reason"), nil)
	descSynced = prometheus.NewDesc("kilomesh_peerset_synced",
		"1 while a PeerSet can write into its member (Synced=True), else 0.", labels, nil)
	descOmitted = prometheus.NewDesc("kilomesh_provider_omitted_resources",
		"NodeInventories and PeerSets, by kind, whose series are not exported: a mesh has more than 256 of a kind, or all meshes together more than 4096.", []string{"kind"}, nil)
)

// ApplyDuration is how long a PeerSet's reconcile took to write its changes
// into its member: the Peers it created, applied and deleted, from the first
// request to the last, whatever their outcome. It is labelled only by result
// ("ok", or "error" when a write failed or the write deadline ended them),
// so its series do not grow with meshes, members or nodes. The buckets reach
// the default write deadline (--member-write-deadline, 30 s).
var ApplyDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "kilomesh_peerset_apply_duration_seconds",
	Help:    "How long a PeerSet's reconcile took to write its changes (Peers created, applied and deleted) into its member, by result: ok, or error when a write failed or the write deadline ended them.",
	Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
}, []string{"result"})

// The results ApplyDuration counts.
const (
	ResultOK    = "ok"
	ResultError = "error"
)

// problemReasons are the reasons kilomesh_peerset_problems reports, each
// always present, so that an alert sees a drop to 0.
var problemReasons = []string{
	v1alpha1.ReasonPeerNameConflict, v1alpha1.ReasonPeerKeyConflict,
	v1alpha1.ReasonPeerRouteConflict, v1alpha1.ReasonPeerInvalid,
}

// The kinds kilomesh_provider_omitted_resources counts.
const (
	kindInventory = "NodeInventory"
	kindPeerSet   = "PeerSet"
)

// A Collector reads NodeInventories and PeerSets at each scrape.
type Collector struct {
	reader client.Reader
	// perMesh and total are MaxResourcesPerMesh and MaxResources.
	perMesh, total int
}

// NewCollector returns a collector that reads through r, the provider's
// cache.
func NewCollector(r client.Reader) *Collector {
	return &Collector{reader: r, perMesh: MaxResourcesPerMesh, total: MaxResources}
}

// Collectors returns every collector of the provider's own metrics, to
// register: the NodeInventories' and PeerSets' series, read through r, and
// ApplyDuration.
func Collectors(r client.Reader) []prometheus.Collector {
	return []prometheus.Collector{NewCollector(r), ApplyDuration}
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReachable, descCredentials, descNodes, descObserved, descIncomplete, descDesired, descApplied, descProblems, descSynced, descOmitted} {
		ch <- d
	}
}

// Collect sends the current value of every series. A list that fails (the
// cache is not synced yet) sends nothing for its kind.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	inventories := &v1alpha1.NodeInventoryList{}
	if err := c.reader.List(ctx, inventories); err == nil {
		rs := make([]resource[*v1alpha1.NodeInventory], len(inventories.Items))
		for i := range inventories.Items {
			ni := &inventories.Items[i]
			rs[i] = resource[*v1alpha1.NodeInventory]{obj: ni, labels: seriesLabels(ni.GetNamespace(), ni.GetName(),
				ni.GetAnnotations()[meshv1alpha1.AnnotationMeshName], member(ni.GetAnnotations(), prefixInventory))}
		}
		kept, omitted := bound(rs, c.perMesh, c.total)
		for _, r := range kept {
			collectInventory(ch, r.obj, r.labels)
		}
		gauge(ch, descOmitted, float64(omitted), kindInventory)
	}
	sets := &v1alpha1.PeerSetList{}
	if err := c.reader.List(ctx, sets); err == nil {
		rs := make([]resource[*v1alpha1.PeerSet], len(sets.Items))
		for i := range sets.Items {
			ps := &sets.Items[i]
			rs[i] = resource[*v1alpha1.PeerSet]{obj: ps, labels: seriesLabels(ps.GetNamespace(), ps.GetName(),
				ps.Spec.ForProvider.Selector[meshv1alpha1.LabelMesh], member(ps.GetAnnotations(), prefixPeerSet))}
		}
		kept, omitted := bound(rs, c.perMesh, c.total)
		for _, r := range kept {
			collectPeerSet(ch, r.obj, r.labels)
		}
		gauge(ch, descOmitted, float64(omitted), kindPeerSet)
	}
}

// A resource is one NodeInventory or PeerSet and the labels of its series.
type resource[T any] struct {
	obj    T
	labels []string
}

// seriesLabels are the labels of a resource's series: its namespace and
// name, which the API server bounds, and its mesh and member, which whoever
// made the resource wrote. A mesh is a label value (the function writes it
// as one), a member a DNS label: anything else is left empty.
func seriesLabels(namespace, name, mesh, member string) []string {
	if len(validation.IsValidLabelValue(mesh)) > 0 {
		mesh = ""
	}
	if len(validation.IsDNS1123Label(member)) > 0 {
		member = ""
	}
	return []string{namespace, name, mesh, member}
}

// bound keeps at most perMesh resources of each mesh of a namespace, and
// at most total in all, shared fairly between namespaces: each namespace
// gets an equal share of what is left, and one that needs less leaves the
// rest to those that need more. The first by mesh and name are kept, so
// every scrape keeps the same ones. It returns those kept, by namespace,
// mesh and name, and how many were not.
func bound[T any](in []resource[T], perMesh, total int) ([]resource[T], int) {
	sort.Slice(in, func(i, j int) bool {
		a, b := in[i].labels, in[j].labels
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[2] != b[2] {
			return a[2] < b[2]
		}
		return a[1] < b[1]
	})
	// Each mesh's first perMesh, grouped by namespace.
	var groups [][]resource[T]
	for i := 0; i < len(in); {
		ns := in[i].labels[0]
		var g []resource[T]
		for n := 0; i < len(in) && in[i].labels[0] == ns; i++ {
			if i > 0 && in[i-1].labels[0] == ns && in[i-1].labels[2] != in[i].labels[2] {
				n = 0
			}
			if n < perMesh {
				g = append(g, in[i])
			}
			n++
		}
		groups = append(groups, g)
	}
	// Fair shares of total, the smallest needs first.
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return len(groups[order[i]]) < len(groups[order[j]]) })
	left := total
	for k, i := range order {
		share := left / (len(order) - k)
		if len(groups[i]) > share {
			groups[i] = groups[i][:share]
		}
		left -= len(groups[i])
	}
	out := make([]resource[T], 0, min(len(in), total))
	for _, g := range groups {
		out = append(out, g...)
	}
	return out, len(in) - len(out)
}

func collectInventory(ch chan<- prometheus.Metric, ni *v1alpha1.NodeInventory, l []string) {
	at := &ni.Status.AtProvider
	gauge(ch, descReachable, boolean(ni.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue), l...)
	gauge(ch, descCredentials, boolean(ni.GetCondition(v1alpha1.TypeCredentialsAccepted).Status != corev1.ConditionFalse), l...)
	gauge(ch, descNodes, float64(at.NodeCount), l...)
	if at.ObservedAt != nil {
		gauge(ch, descObserved, float64(at.ObservedAt.Unix()), l...)
	}
	gauge(ch, descIncomplete, boolean(at.NodesIncomplete != ""), plus(l, "nodes")...)
	gauge(ch, descIncomplete, boolean(at.ForeignPeersIncomplete != ""), plus(l, "foreign_peers")...)
}

func collectPeerSet(ch chan<- prometheus.Metric, ps *v1alpha1.PeerSet, l []string) {
	at := &ps.Status.AtProvider
	gauge(ch, descDesired, float64(at.Desired), l...)
	gauge(ch, descApplied, float64(at.Applied), l...)
	gauge(ch, descSynced, boolean(ps.GetCondition(xpv2.TypeSynced).Status == corev1.ConditionTrue), l...)
	counts := map[string]int{}
	for _, p := range at.Problems {
		counts[p.Reason]++
	}
	for _, r := range problemReasons {
		gauge(ch, descProblems, float64(counts[r]), plus(l, r)...)
	}
}

// member reads the member a composed resource is about from its composition
// resource name; a resource made by hand has none.
func member(annotations map[string]string, prefix string) string {
	return strings.TrimPrefix(annotations[annotationResourceName], prefix)
}

// plus is labels and one more value, in a slice of their own.
func plus(labels []string, v string) []string {
	out := make([]string, 0, len(labels)+1)
	return append(append(out, labels...), v)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
