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

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
	inv "github.com/kilomesh/kilomesh/provider/inventory"
)

const (
	keyA = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	keyB = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
	keyC = "Q0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0M="
	keyD = "RERERERERERERERERERERERERERERERERERERERERE0="
)

// node creates a Node in the member cluster and sets its status: its
// addresses exactly as given, in that order, and a Ready condition of
// status ready unless ready is empty.
func node(ctx context.Context, t *testing.T, c client.Client, name string, labels, annotations map[string]string, podCIDRs []string, addrs []corev1.NodeAddress, ready corev1.ConditionStatus) {
	t.Helper()
	n := nodefixture.Node{Name: name, Labels: labels, Annotations: annotations, PodCIDRs: podCIDRs, Ready: ready}.Object()
	status := n.Status
	n.Status = corev1.NodeStatus{}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status = status
	n.Status.Addresses = addrs
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// mutateNode changes a Node (or its status) and retries on conflicts.
func mutateNode(ctx context.Context, t *testing.T, c client.Client, name string, status bool, fn func(n *corev1.Node)) {
	t.Helper()
	for {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		fn(n)
		var err error
		if status {
			err = c.Status().Update(ctx, n)
		} else {
			err = c.Update(ctx, n)
		}
		if err == nil {
			return
		}
		if !isConflict(err) {
			t.Fatal(err)
		}
	}
}

func inventory(ctx context.Context, t *testing.T, ns, name, pc string, params v1alpha1.NodeInventoryParameters) {
	t.Helper()
	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ni.Spec.ForProvider = params
	ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, pc)
	if err := cp.kube.Create(ctx, ni); err != nil {
		t.Fatal(err)
	}
}

// published waits until an inventory publishes want (observedAt aside) and
// is Ready and Synced, and returns it.
func published(ctx context.Context, t *testing.T, ns, name string, want []v1alpha1.ObservedNode) *v1alpha1.NodeInventory {
	t.Helper()
	var got *v1alpha1.NodeInventory
	eventually(ctx, t, "inventory "+name+" publishes the expected nodes", func() error {
		ni, err := getInventory(ctx, ns, name)
		if err != nil {
			return err
		}
		// When a node turned stale depends on when it was created: see
		// TestNodeInventory/StaleSince.
		if d := cmp.Diff(want, ni.Status.AtProvider.Nodes, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(v1alpha1.ObservedNode{}, "StaleSince")); d != "" {
			return fmt.Errorf("-want +got:\n%s", d)
		}
		if ni.Status.AtProvider.ObservedAt == nil {
			return errors.New("observedAt is not set")
		}
		if c := ni.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready is %s: %s", c.Status, c.Message)
		}
		if c := ni.GetCondition(xpv2.TypeSynced); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Synced is %s: %s", c.Status, c.Message)
		}
		got = ni
		return nil
	})
	return got
}

// nodesColumn reads the NODES column of an inventory from the API server's
// table, as kubectl get prints it.
func nodesColumn(ctx context.Context, t *testing.T, ns, name string) int64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(cp.cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/apis/%s/namespaces/%s/nodeinventories/%s", strings.TrimSuffix(cp.cfg.Host, "/"), v1alpha1.GroupVersion, ns, name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		t.Fatalf("%s %s: %v:\n%s", resp.Status, resp.Header.Get("Content-Type"), err, body)
	}
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "NODES" {
			col = i
		}
	}
	if col < 0 || len(table.Rows) != 1 {
		t.Fatalf("the table has no NODES column or not one row: %+v", table)
	}
	n, ok := table.Rows[0].Cells[col].(float64)
	if !ok {
		t.Fatalf("the NODES cell is %T %v, want a number", table.Rows[0].Cells[col], table.Rows[0].Cells[col])
	}
	return int64(n)
}

func TestNodeInventory(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	mc := m.Admin
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	// A second config whose Secret holds the same kubeconfig reaches the
	// same cluster with the same identity: it must share the watch.
	providerConfig(ctx, t, ns, "member-again", m.Kubeconfig)

	// node-a's heartbeat is an hour ahead: it stays fresh however long the
	// test runs (Kilo reads a heartbeat as fresh until 60 s after it).
	// node-b and node-c have none: they are stale.
	future := time.Now().Add(time.Hour).Unix()
	node(ctx, t, mc, "node-a",
		map[string]string{kilov1alpha1.LabelRegion: "eu-west", "role": "core"},
		map[string]string{
			kilov1alpha1.AnnotationKey:                 keyA,
			kilov1alpha1.AnnotationWireguardIP:         "10.4.0.1/16",
			kilov1alpha1.AnnotationEndpoint:            "203.0.113.1:51820",
			kilov1alpha1.AnnotationInternalIP:          "192.168.1.11/24",
			kilov1alpha1.AnnotationForceEndpoint:       "198.51.100.1:51820",
			kilov1alpha1.AnnotationClustermeshEndpoint: "mesh.example.com:51820",
			kilov1alpha1.AnnotationGranularity:         "full",
			kilov1alpha1.AnnotationPersistentKeepalive: "25",
			kilov1alpha1.AnnotationDiscoveredEndpoints: `{"x":{}}`,
			kilov1alpha1.AnnotationLocation:            "dc1",
			kilov1alpha1.AnnotationForceInternalIP:     "",
			kilov1alpha1.AnnotationAllowedLocationIPs:  "10.9.0.0/24",
			kilov1alpha1.AnnotationLeader:              "",
			kilov1alpha1.AnnotationLastSeen:            strconv.FormatInt(future, 10),
			"unrelated.example.com/annotation":         "ignored",
		},
		[]string{"10.1.1.0/24", "fd00:1::/64"},
		[]corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.168.1.11"},
			{Type: corev1.NodeHostName, Address: "node-a"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
			{Type: corev1.NodeInternalIP, Address: "fd00::11"},
		},
		corev1.ConditionTrue)
	// Bad input is copied verbatim: the planner judges it.
	node(ctx, t, mc, "node-b",
		map[string]string{kilov1alpha1.LabelRegion: "eu-east", "role": "edge"},
		map[string]string{kilov1alpha1.AnnotationKey: "not a key", kilov1alpha1.AnnotationWireguardIP: "banana"},
		nil,
		[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.2.12"}},
		corev1.ConditionFalse)
	node(ctx, t, mc, "node-c", nil, nil, nil, nil, "")

	wantA := v1alpha1.ObservedNode{
		Name:        "node-a",
		PodCIDRs:    []string{"10.1.1.0/24", "fd00:1::/64"},
		InternalIPs: []string{"192.168.1.11", "fd00::11"},
		ExternalIPs: []string{"203.0.113.1"},
		Location:    "dc1",
		Ready:       true,
		Kilo: &v1alpha1.KiloAnnotations{
			Key: keyA, WireguardIP: "10.4.0.1/16", Endpoint: "203.0.113.1:51820", InternalIP: "192.168.1.11/24",
			ForceEndpoint: "198.51.100.1:51820", ClustermeshEndpoint: "mesh.example.com:51820", Granularity: "full",
			PersistentKeepalive: "25", DiscoveredEndpoints: `{"x":{}}`,
			ForceInternalIP: "-", AllowedLocationIPs: "10.9.0.0/24", Leader: "true",
		},
	}
	wantB := v1alpha1.ObservedNode{
		Name: "node-b", InternalIPs: []string{"192.168.2.12"}, Location: "eu-east",
		Kilo:  &v1alpha1.KiloAnnotations{Key: "not a key", WireguardIP: "banana"},
		Stale: true,
	}
	wantC := v1alpha1.ObservedNode{Name: "node-c", Stale: true}

	inventory(ctx, t, ns, "all", "member", v1alpha1.NodeInventoryParameters{})
	inventory(ctx, t, ns, "edge", "member-again", v1alpha1.NodeInventoryParameters{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "edge"}},
	})

	published(ctx, t, ns, "all", []v1alpha1.ObservedNode{wantA, wantB, wantC})
	published(ctx, t, ns, "edge", []v1alpha1.ObservedNode{wantB})

	t.Run("StaleSince", func(t *testing.T) {
		ni, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ni.Status.AtProvider.Nodes {
			n := &corev1.Node{}
			if err := mc.Get(ctx, client.ObjectKey{Name: o.Name}, n); err != nil {
				t.Fatal(err)
			}
			switch {
			case !o.Stale && o.StaleSince != nil:
				t.Errorf("fresh node %s has a staleSince: %v", o.Name, o.StaleSince)
			case !o.Stale:
			case o.StaleSince == nil:
				t.Errorf("stale node %s has no staleSince", o.Name)
			default:
				// Neither node-b nor node-c ever wrote a heartbeat: stale
				// since their creation plus 60 s, or since the inventory
				// first saw them, if that came first.
				if at, created := o.StaleSince.Time, n.CreationTimestamp.Time; at.Before(created) || at.After(created.Add(inv.StaleAfter)) {
					t.Errorf("staleSince of %s is %v, want within its creation %v and 60 s later", o.Name, at, created)
				}
			}
		}
	})

	t.Run("NodesColumn", func(t *testing.T) {
		for name, want := range map[string]int64{"all": 3, "edge": 1} {
			if got := nodesColumn(ctx, t, ns, name); got != want {
				t.Errorf("the NODES column of %s in the API server's table: want %d, got %d", name, want, got)
			}
		}
	})

	user := func(name string) remote.User {
		return remote.User{Kind: v1alpha1.NodeInventoryKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	key, ok := cp.reg.ClusterOf(user("all"))
	t.Run("InventoriesOfOneClusterShareOneWatch", func(t *testing.T) {
		other, _ := cp.reg.ClusterOf(user("edge"))
		if !ok || key != other {
			t.Errorf("two configs with the same kubeconfig must share one watch: got %q and %q", key, other)
		}
	})

	t.Run("HeartbeatsCauseNoStatusWrites", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ni, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		w, err := cp.kube.Watch(ctx, &v1alpha1.NodeInventoryList{}, client.InNamespace(ns),
			client.MatchingFields{"metadata.name": "all"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: ni.ResourceVersion}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		// Kilo's heartbeat and the kubelet's, 20 rounds on every node: the
		// fresh node stays fresh, the stale ones stay stale.
		for i := range 20 {
			for _, n := range []string{"node-a", "node-b", "node-c"} {
				lastSeen := future + 30*int64(i)
				if n != "node-a" {
					lastSeen = 1700000000 + 30*int64(i)
				}
				mutateNode(ctx, t, mc, n, false, func(n *corev1.Node) {
					if n.Annotations == nil {
						n.Annotations = map[string]string{}
					}
					n.Annotations[kilov1alpha1.AnnotationLastSeen] = strconv.FormatInt(lastSeen, 10)
				})
				mutateNode(ctx, t, mc, n, true, func(n *corev1.Node) {
					for j := range n.Status.Conditions {
						n.Status.Conditions[j].LastHeartbeatTime = metav1.NewTime(time.Unix(int64(1700000000+30*i), 0))
					}
				})
			}
		}
		// Then one relevant change: it must be the only write.
		mutateNode(ctx, t, mc, "node-a", false, func(n *corev1.Node) {
			n.Annotations[kilov1alpha1.AnnotationWireguardIP] = "10.4.0.9/16"
		})
		writes := 0
		deadline := time.After(waitTimeout)
		for seen := false; !seen; {
			select {
			case ev := <-w.ResultChan():
				if ev.Type != watch.Modified {
					t.Fatalf("unexpected %s event", ev.Type)
				}
				writes++
				got, ok := ev.Object.(*v1alpha1.NodeInventory)
				if !ok {
					t.Fatalf("unexpected %T", ev.Object)
				}
				k := got.Status.AtProvider.Nodes[0].Kilo
				seen = k != nil && k.WireguardIP == "10.4.0.9/16"
			case <-deadline:
				t.Fatalf("the relevant change did not reach status within %s (%d writes)", waitTimeout, writes)
			}
		}
		if writes != 1 {
			t.Errorf("status writes during heartbeats and one change: want 1, got %d", writes)
		}
		wantA.Kilo.WireguardIP = "10.4.0.9/16"
	})

	wantD := v1alpha1.ObservedNode{Name: "node-d", Stale: true}
	t.Run("RelevantChangesReachStatus", func(t *testing.T) {
		cases := map[string]struct {
			reason string
			change func(t *testing.T)
			want   func()
		}{
			"NewNode": {
				reason: "A new Node is published.",
				change: func(t *testing.T) { node(ctx, t, mc, "node-d", nil, nil, nil, nil, "") },
			},
			"Key": {
				reason: "A new key is published.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-b", false, func(n *corev1.Node) { n.Annotations[kilov1alpha1.AnnotationKey] = keyB })
				},
				want: func() { wantB.Kilo.Key = keyB },
			},
			"Endpoint": {
				reason: "A new endpoint is published.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-b", false, func(n *corev1.Node) { n.Annotations[kilov1alpha1.AnnotationEndpoint] = "203.0.113.2:51820" })
				},
				want: func() { wantB.Kilo.Endpoint = "203.0.113.2:51820" },
			},
			"PodCIDRs": {
				reason: "Pod CIDRs assigned to a Node are published.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-d", false, func(n *corev1.Node) {
						n.Spec.PodCIDR = "10.1.4.0/24"
						n.Spec.PodCIDRs = []string{"10.1.4.0/24"}
					})
				},
				want: func() { wantD.PodCIDRs = []string{"10.1.4.0/24"} },
			},
			"Addresses": {
				reason: "New addresses and readiness are published.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-d", true, func(n *corev1.Node) {
						n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.4"}}
						n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
					})
				},
				want: func() { wantD.ExternalIPs = []string{"198.51.100.4"}; wantD.Ready = true },
			},
			"Heartbeat": {
				reason: "A heartbeat makes a stale node fresh; this one is 20 s old, so it turns stale 40 s from now.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-d", false, func(n *corev1.Node) {
						n.Annotations = map[string]string{kilov1alpha1.AnnotationLastSeen: strconv.FormatInt(time.Now().Add(-20*time.Second).Unix(), 10)}
					})
				},
				want: func() { wantD.Stale = false },
			},
			"GoesStale": {
				reason: "A heartbeat that stops causes no event, yet the node is published as stale once it is 60 s old.",
				change: func(*testing.T) {},
				want:   func() { wantD.Stale = true },
			},
			"FreshAgain": {
				reason: "A heartbeat that makes a stale node fresh again is published.",
				change: func(t *testing.T) {
					mutateNode(ctx, t, mc, "node-d", false, func(n *corev1.Node) {
						n.Annotations[kilov1alpha1.AnnotationLastSeen] = strconv.FormatInt(future, 10)
					})
				},
				want: func() { wantD.Stale = false },
			},
			"Deletion": {
				reason: "A deleted Node disappears.",
				change: func(t *testing.T) {
					if err := mc.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}); err != nil {
						t.Fatal(err)
					}
				},
			},
		}
		// The steps build on each other, in this order.
		order := []string{"NewNode", "Key", "Endpoint", "PodCIDRs", "Addresses", "Heartbeat", "GoesStale", "FreshAgain", "Deletion"}
		for _, name := range order {
			tc := cases[name]
			t.Run(name, func(t *testing.T) {
				tc.change(t)
				if tc.want != nil {
					tc.want()
				}
				want := []v1alpha1.ObservedNode{wantA, wantB, wantC, wantD}
				if name == "Deletion" {
					want = []v1alpha1.ObservedNode{wantA, wantB, wantD}
				}
				t.Log(tc.reason)
				published(ctx, t, ns, "all", want)
			})
		}
	})

	t.Run("ForeignPeers", func(t *testing.T) {
		owned := map[string]string{"kilomesh.io/mesh": "m1"}
		for _, p := range []*kilov1alpha1.Peer{
			{ObjectMeta: metav1.ObjectMeta{Name: "ours", Labels: owned}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.9.0.1/32"}, PublicKey: keyC}},
			{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Labels: map[string]string{"kilomesh.io/mesh": "other"}}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.9.0.2/32"}, PublicKey: keyD}},
		} {
			if err := mc.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		inventory(ctx, t, ns, "owned", "member", v1alpha1.NodeInventoryParameters{OwnedPeerLabels: owned})
		foreign := func(want []v1alpha1.ForeignPeer) func() error {
			return func() error {
				ni, err := getInventory(ctx, ns, "owned")
				if err != nil {
					return err
				}
				if d := cmp.Diff(want, ni.Status.AtProvider.ForeignPeers, cmpopts.EquateEmpty()); d != "" {
					return fmt.Errorf("-want +got:\n%s", d)
				}
				return nil
			}
		}
		eventually(ctx, t, "the Peer without the owned labels is reported", foreign([]v1alpha1.ForeignPeer{{Name: "theirs", PublicKey: keyD, AllowedIPs: []string{"10.9.0.2/32"}}}))

		p := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "hand-made"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.9.0.3/32"}, PublicKey: keyA}}
		if err := mc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "a new foreign Peer is reported", foreign([]v1alpha1.ForeignPeer{{Name: "hand-made", PublicKey: keyA, AllowedIPs: []string{"10.9.0.3/32"}}, {Name: "theirs", PublicKey: keyD, AllowedIPs: []string{"10.9.0.2/32"}}}))

		ni, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		if len(ni.Status.AtProvider.ForeignPeers) != 0 {
			t.Errorf("an inventory without owned labels reports no Peers, got %v", ni.Status.AtProvider.ForeignPeers)
		}
	})

	t.Run("UnreachableClusterKeepsNodes", func(t *testing.T) {
		before, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		m.Proxy.Cut()
		eventually(ctx, t, "Synced=False while the cluster cannot be reached", synced(inventoryOf(ctx, ns, "all"), corev1.ConditionFalse, "cannot observe the Nodes of the cluster"))
		during, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(before.Status.AtProvider, during.Status.AtProvider); d != "" {
			t.Errorf("nodes and observedAt must be kept while unreachable: -before +during:\n%s", d)
		}
		if c := during.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
			t.Errorf("Ready must stay True while unreachable, got %s", c.Status)
		}
		// The watch retries (0.8 s, 1.6 s, 3.2 s, ... apart), each request
		// with its own URL: the inventory is not written again for that.
		// Every write would be a watch event of every mesh using it. The
		// first retry may still say something new: the broken connection
		// came first, the refused ones follow.
		time.Sleep(2 * time.Second)
		settled, err := getInventory(ctx, ns, "all")
		if err != nil {
			t.Fatal(err)
		}
		messages := map[string]bool{settled.GetCondition(xpv2.TypeSynced).Message: true}
		for range 40 {
			time.Sleep(250 * time.Millisecond)
			ni, err := getInventory(ctx, ns, "all")
			if err != nil {
				t.Fatal(err)
			}
			messages[ni.GetCondition(xpv2.TypeSynced).Message] = true
			if ni.ResourceVersion != settled.ResourceVersion {
				t.Errorf("the inventory was written again while its cluster stayed unreachable: %v", slices.Sorted(maps.Keys(messages)))
				break
			}
		}

		// A change made while the provider cannot see the cluster arrives
		// once it can.
		mutateNode(ctx, t, mc, "node-b", false, func(n *corev1.Node) { n.Annotations[kilov1alpha1.AnnotationEndpoint] = "203.0.113.3:51820" })
		if err := m.Proxy.Restore(); err != nil {
			t.Fatal(err)
		}
		wantB.Kilo.Endpoint = "203.0.113.3:51820"
		after := published(ctx, t, ns, "all", []v1alpha1.ObservedNode{wantA, wantB, wantD})
		if !after.Status.AtProvider.ObservedAt.After(before.Status.AtProvider.ObservedAt.Time) && !after.Status.AtProvider.ObservedAt.Equal(before.Status.AtProvider.ObservedAt) {
			t.Errorf("observedAt went back in time")
		}
	})

	t.Run("DeletionFinishesAndStopsTheWatch", func(t *testing.T) {
		for _, name := range []string{"all", "edge", "owned"} {
			ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := cp.kube.Delete(ctx, ni); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "inventory "+name+" is deleted", gone(ctx, ni))
		}
		eventually(ctx, t, "the cluster is no longer watched once no inventory uses it", func() error {
			if cp.reg.Watching(key) {
				return errors.New("the cluster is still watched")
			}
			return nil
		})
	})
}
