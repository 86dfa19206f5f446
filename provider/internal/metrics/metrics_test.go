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

package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/metrics"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// apiServer starts an API server with kilomesh's CRDs and namespace
// network, and returns a client of it.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	if !testenv.Enabled() {
		t.Skip("needs the API server binaries: " + testenv.AssetsVar)
	}
	env, cfg, err := testenv.ControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "network"}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCollector reads a NodeInventory and a PeerSet, as the function
// composes them and the provider reports them, from a real API server, and
// checks every series the provider exports of them.
func TestCollector(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()

	composed := func(name, mesh string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "network", Name: "mesh-" + name, Annotations: map[string]string{
			"crossplane.io/composition-resource-name": name, "kilomesh.io/mesh-name": mesh,
		}}
	}
	ni := &v1alpha1.NodeInventory{ObjectMeta: composed("inventory-cluster-a", "mesh")}
	ni.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "cluster-a"}
	if err := c.Create(ctx, ni); err != nil {
		t.Fatal(err)
	}
	observed := metav1.NewTime(time.Unix(1795600000, 0))
	ni.Status.AtProvider = v1alpha1.NodeInventoryObservation{ObservedAt: &observed, NodeCount: 3, ForeignPeersIncomplete: "more than 16384 routes"}
	ni.Status.SetConditions(xpv2.ReconcileError(context.DeadlineExceeded), xpv2.Condition{
		Type: v1alpha1.TypeCredentialsAccepted, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonCredentialsAccepted, LastTransitionTime: observed,
	})
	if err := c.Status().Update(ctx, ni); err != nil {
		t.Fatal(err)
	}

	ps := &v1alpha1.PeerSet{ObjectMeta: composed("peerset-cluster-b", "mesh")}
	ps.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "cluster-b"}
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: map[string]string{"kilomesh.io/mesh": "mesh"}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	ps.Status.AtProvider = v1alpha1.PeerSetObservation{Desired: 5, Applied: 3, Problems: []v1alpha1.PeerProblem{
		{Peer: "a", Reason: v1alpha1.ReasonPeerRouteConflict, Message: "x"},
		{Peer: "b", Reason: v1alpha1.ReasonPeerKeyConflict, Message: "y"},
	}}
	ps.Status.SetConditions(xpv2.ReconcileSuccess())
	if err := c.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP kilomesh_inventory_credentials_accepted 1 while provider-kilomesh accepts the credentials of a NodeInventory's member, else 0: a mesh hands nothing to any provider for a member whose credentials are refused.
# TYPE kilomesh_inventory_credentials_accepted gauge
kilomesh_inventory_credentials_accepted{member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 1
# HELP kilomesh_inventory_incomplete 1 while a bound of the provider cut what a NodeInventory publishes of its member, by what was cut: nodes, or foreign_peers (then no new route is written into the member).
# TYPE kilomesh_inventory_incomplete gauge
kilomesh_inventory_incomplete{bound="foreign_peers",member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 1
kilomesh_inventory_incomplete{bound="nodes",member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 0
# HELP kilomesh_inventory_last_observed_timestamp_seconds When a NodeInventory last observed its member, in Unix seconds (kept while the member cannot be reached).
# TYPE kilomesh_inventory_last_observed_timestamp_seconds gauge
kilomesh_inventory_last_observed_timestamp_seconds{member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 1.7956e+09
# HELP kilomesh_inventory_nodes The nodes a NodeInventory observes in its member.
# TYPE kilomesh_inventory_nodes gauge
kilomesh_inventory_nodes{member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 3
# HELP kilomesh_inventory_reachable 1 while the member of a NodeInventory answers (Synced=True), else 0.
# TYPE kilomesh_inventory_reachable gauge
kilomesh_inventory_reachable{member="cluster-a",mesh="mesh",name="mesh-inventory-cluster-a",namespace="network"} 0
# HELP kilomesh_provider_omitted_resources NodeInventories and PeerSets, by kind, whose series are not exported: a mesh has more than 256 of a kind, or all meshes together more than 4096.
# TYPE kilomesh_provider_omitted_resources gauge
kilomesh_provider_omitted_resources{kind="NodeInventory"} 0
kilomesh_provider_omitted_resources{kind="PeerSet"} 0
# HELP kilomesh_peerset_peers_applied The Peers a PeerSet holds in its member as desired.
# TYPE kilomesh_peerset_peers_applied gauge
kilomesh_peerset_peers_applied{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network"} 3
# HELP kilomesh_peerset_peers_desired The Peers a PeerSet should hold in its member.
# TYPE kilomesh_peerset_peers_desired gauge
kilomesh_peerset_peers_desired{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network"} 5
# HELP kilomesh_peerset_problems Desired Peers of a PeerSet not applied as desired, by reason (PeerNameConflict, PeerKeyConflict, PeerRouteConflict, PeerInvalid), counted among those its status lists (the first 100).
# TYPE kilomesh_peerset_problems gauge
kilomesh_peerset_problems{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network",reason="PeerInvalid"} 0
kilomesh_peerset_problems{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network",reason="PeerKeyConflict"} 1
kilomesh_peerset_problems{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network",reason="PeerNameConflict"} 0
kilomesh_peerset_problems{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network",reason="PeerRouteConflict"} 1
# HELP kilomesh_peerset_synced 1 while a PeerSet can write into its member (Synced=True), else 0.
# TYPE kilomesh_peerset_synced gauge
kilomesh_peerset_synced{member="cluster-b",mesh="mesh",name="mesh-peerset-cluster-b",namespace="network"} 1
`
	col := metrics.NewCollector(c)
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// A deleted resource leaves no series behind.
	if err := c.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(col, "kilomesh_peerset_peers_desired"); n != 0 {
		t.Errorf("after the PeerSet's deletion: %d series of kilomesh_peerset_peers_desired, want 0", n)
	}
}

// A sample is one series of a scrape: its labels and its value.
type sample struct {
	labels map[string]string
	value  float64
}

// gather scrapes a collector, and returns its series by metric name.
func gather(t *testing.T, col prometheus.Collector) map[string][]sample {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(col)
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]sample{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], sample{labels: l, value: m.GetGauge().GetValue()})
		}
	}
	return out
}

// TestCollectorHandMade pins that what a tenant writes on a NodeInventory
// or a PeerSet it makes by hand becomes a label value only when it is a
// valid mesh or member name: one such PeerSet and one NodeInventory, with a
// selector and annotations of 100 KB, once made a scrape of 8 MB.
func TestCollectorHandMade(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	long := strings.Repeat("m", 100<<10)
	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "network", Name: "hand-made", Annotations: map[string]string{
		"crossplane.io/composition-resource-name": "inventory-" + long, "kilomesh.io/mesh-name": long,
	}}}
	ni.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "cluster-a"}
	if err := c.Create(ctx, ni); err != nil {
		t.Fatal(err)
	}
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "network", Name: "hand-made", Annotations: map[string]string{
		"crossplane.io/composition-resource-name": "peerset-Not_A_Member",
	}}}
	ps.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "cluster-a"}
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: map[string]string{"kilomesh.io/mesh": long + "\n# HELP forged"}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	series := gather(t, metrics.NewCollector(c))
	n := 0
	for name, ss := range series {
		for _, x := range ss {
			l := x.labels
			n++
			for k, v := range l {
				if len(v) > 253 {
					t.Errorf("%s: label %s holds %d bytes, want at most 253", name, k, len(v))
				}
			}
			if strings.HasPrefix(name, "kilomesh_inventory_") || strings.HasPrefix(name, "kilomesh_peerset_") {
				if l["mesh"] != "" || l["member"] != "" || l["name"] != "hand-made" {
					t.Errorf("%s: want the series of the hand-made resource with no mesh and no member, got %v", name, l)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no series: the hand-made resources are still exported, without the labels they cannot have")
	}
}

// TestCollectorBounds pins how many resources are exported: at most
// perMesh of one mesh, at most total in all, shared fairly between
// namespaces, so that a tenant with many resources cannot push another's
// out; and how many were left out.
func TestCollectorBounds(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	// namespace: mesh: PeerSets.
	made := map[string]map[string]int{
		"big":   {"a": 8, "b": 8},
		"mid":   {"d": 5},
		"small": {"c": 2},
	}
	for ns, meshes := range made {
		if ns != "network" {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		for mesh, n := range meshes {
			for i := range n {
				ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%02d", mesh, i), Annotations: map[string]string{
					"crossplane.io/composition-resource-name": fmt.Sprintf("peerset-member-%02d", i),
				}}}
				ps.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "m"}
				ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: map[string]string{"kilomesh.io/mesh": mesh}}
				if err := c.Create(ctx, ps); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	col := metrics.NewCollector(c)
	metrics.SetBounds(col, 3, 10)
	series := gather(t, col)
	got := map[string]int{}
	for _, x := range series["kilomesh_peerset_synced"] {
		got[x.labels["namespace"]+"/"+x.labels["mesh"]]++
	}
	// Each mesh keeps 3: big needs 6, mid 3, small 2, 11 in all. small and
	// mid get what they need, big the 5 left: its first mesh whole.
	want := map[string]int{"big/a": 3, "big/b": 2, "mid/d": 3, "small/c": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PeerSets exported by namespace/mesh: -want +got:\n%s", diff)
	}
	omitted := map[string]float64{}
	for _, x := range series["kilomesh_provider_omitted_resources"] {
		omitted[x.labels["kind"]] = x.value
	}
	if diff := cmp.Diff(map[string]float64{"NodeInventory": 0, "PeerSet": 13}, omitted); diff != "" {
		t.Errorf("kilomesh_provider_omitted_resources by kind (23 PeerSets made, 10 exported): -want +got:\n%s", diff)
	}
}
