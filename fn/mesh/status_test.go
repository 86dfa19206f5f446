package mesh

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

var ignoreMessages = cmp.Options{
	cmpopts.IgnoreFields(meshv1alpha1.SkippedNode{}, "Message"),
	cmpopts.IgnoreFields(meshv1alpha1.PeerConflict{}, "Message"),
}

func TestForeignPeers(t *testing.T) {
	nameA1 := PeerName(testNamespace, testMesh, "a", "a1")
	nameB1 := PeerName(testNamespace, testMesh, "b", "b1")
	type want struct {
		inA, inB, inC []string
		status        []meshv1alpha1.ClusterStatus // Name, Peers and Conflicts only
		warnings      []warning
	}
	cases := map[string]struct {
		reason  string
		foreign map[string][]kubev1alpha1.ForeignPeer
		want    want
	}{
		"None": {
			reason: "Without foreign Peers every Peer is written.",
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC:    with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{{Name: "a", Peers: 2}, {Name: "b", Peers: 2}, {Name: "c", Peers: 2}},
			},
		},
		"Unrelated": {
			reason:  "A foreign Peer with another name and key is no conflict.",
			foreign: map[string][]kubev1alpha1.ForeignPeer{"b": {{Name: "laptop", PublicKey: testKey(99)}}},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC:    with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{{Name: "a", Peers: 2}, {Name: "b", Peers: 2}, {Name: "c", Peers: 2}},
			},
		},
		"SameName": {
			reason:  "A foreign Peer of the same name in a target keeps the mesh's Peer out of that target only: PeerNameConflict on the target.",
			foreign: map[string][]kubev1alpha1.ForeignPeer{"b": {{Name: nameA1, PublicKey: testKey(99)}}},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: peerNames("c", "c1"),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Peers: 1},
					{Name: "b", Peers: 2, Conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerNameConflict}}},
					{Name: "c", Peers: 2},
				},
				warnings: []warning{{"b", ReasonPeerNameConflict}},
			},
		},
		"SameKey": {
			reason:  "A foreign Peer with a segment's key, even spelled otherwise, keeps the mesh's Peer out of that target: PeerKeyConflict.",
			foreign: map[string][]kubev1alpha1.ForeignPeer{"b": {{Name: "laptop", PublicKey: otherSpelling(testKey(1))}}},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: peerNames("c", "c1"),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Peers: 1},
					{Name: "b", Peers: 2, Conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerKeyConflict}}},
					{Name: "c", Peers: 2},
				},
				warnings: []warning{{"b", ReasonPeerKeyConflict}},
			},
		},
		"OwnKeyInSource": {
			reason:  "A foreign Peer in a cluster only blocks what is written into that cluster: one with a1's key in a blocks nothing.",
			foreign: map[string][]kubev1alpha1.ForeignPeer{"a": {{Name: "laptop", PublicKey: testKey(1)}}},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC:    with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{{Name: "a", Peers: 2}, {Name: "b", Peers: 2}, {Name: "c", Peers: 2}},
			},
		},
		"SeveralTargets": {
			reason: "Conflicts are listed on each target where they occur.",
			foreign: map[string][]kubev1alpha1.ForeignPeer{
				"a": {{Name: nameB1}},
				"c": {{Name: "laptop", PublicKey: testKey(1)}, {Name: "phone", PublicKey: testKey(101)}},
			},
			want: want{
				inA: peerNames("c", "c1"), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC: nil,
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Peers: 1, Conflicts: []meshv1alpha1.PeerConflict{{Peer: nameB1, Reason: ReasonPeerNameConflict}}},
					{Name: "b", Peers: 0},
					{Name: "c", Peers: 2, Conflicts: []meshv1alpha1.PeerConflict{
						{Peer: nameA1, Reason: ReasonPeerKeyConflict},
						{Peer: nameB1, Reason: ReasonPeerKeyConflict},
					}},
				},
				warnings: []warning{{"a", ReasonPeerNameConflict}, {"c", ReasonPeerKeyConflict}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := map[string]*Observation{
				"a": observation(nodeA1()),
				"b": observation(nodeB1()),
				"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
			}
			for c, f := range tc.foreign {
				obs[c].ForeignPeers = f
			}
			p, err := Do(meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB(), clusterC()}, obs))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			var status []meshv1alpha1.ClusterStatus
			for _, cs := range p.Status.Clusters {
				status = append(status, meshv1alpha1.ClusterStatus{Name: cs.Name, Peers: cs.Peers, Conflicts: cs.Conflicts})
			}
			got := want{inA: namesIn(p, "a"), inB: namesIn(p, "b"), inC: namesIn(p, "c"), status: status, warnings: sortedWarnings(p)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), ignoreMessages); diff != "" {
				t.Errorf("\n%s\nDo(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObservations(t *testing.T) {
	c1 := leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")
	type want struct {
		inA, inB, inC []string
		status        []meshv1alpha1.ClusterStatus
		pending       bool
	}
	cases := map[string]struct {
		reason string
		obs    map[string]*Observation
		want   want
	}{
		"AllCurrent": {
			reason: "Clusters observed right now are reachable and report when they were observed.",
			obs:    map[string]*Observation{"a": observation(nodeA1()), "b": observation(nodeB1()), "c": observation(c1)},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "c", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
				},
			},
		},
		"Unreachable": {
			reason: "An unreachable cluster's last known nodes still make its Peers everywhere; it is reported unreachable since when.",
			obs: map[string]*Observation{
				"a": {
					NodeInventoryObservation: kubev1alpha1.NodeInventoryObservation{ObservedAt: &observedAt, Nodes: []kubev1alpha1.ObservedNode{nodeA1()}},
					UnreachableSince:         &unreachableSince,
					Problem:                  "connection refused",
				},
				"b": observation(nodeB1()),
				"c": observation(c1),
			},
			want: want{
				inA: with(peerNames("b", "b1"), peerNames("c", "c1")...), inB: with(peerNames("a", "a1"), peerNames("c", "c1")...),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", LastObserved: &observedAt, UnreachableSince: &unreachableSince, Message: "connection refused", Nodes: 1, Segments: 1, Peers: 2},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "c", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
				},
			},
		},
		"NeverObserved": {
			reason: "A cluster never observed contributes no Peers, receives the others' and keeps the mesh converging.",
			obs:    map[string]*Observation{"a": observation(nodeA1()), "b": observation(nodeB1())},
			want: want{
				inA: peerNames("b", "b1"), inB: peerNames("a", "a1"),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "c"},
				},
				pending: true,
			},
		},
		"NeverObservedUnreachable": {
			reason: "A cluster that has never answered contributes nothing, like one never observed, but its status says why and since when.",
			obs: map[string]*Observation{
				"a": observation(nodeA1()), "b": observation(nodeB1()),
				"c": {UnreachableSince: &unreachableSince, Problem: "no route to host"},
			},
			want: want{
				inA: peerNames("b", "b1"), inB: peerNames("a", "a1"),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "c", UnreachableSince: &unreachableSince, Message: "no route to host"},
				},
				pending: true,
			},
		},
		"NoNodes": {
			reason: "A cluster observed with no nodes is reachable, has no Peers and receives the others'.",
			obs:    map[string]*Observation{"a": observation(nodeA1()), "b": observation(nodeB1()), "c": observation()},
			want: want{
				inA: peerNames("b", "b1"), inB: peerNames("a", "a1"),
				inC: with(peerNames("a", "a1"), peerNames("b", "b1")...),
				status: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 2},
					{Name: "c", Reachable: true, LastObserved: &observedAt},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB(), clusterC()}, tc.obs))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			got := want{inA: namesIn(p, "a"), inB: namesIn(p, "b"), inC: namesIn(p, "c"), status: p.Status.Clusters, pending: len(p.Pending) > 0}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nDo(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	// 25 nodes of a without a WireGuard IP, named a00..a24, listed backwards.
	var many []kubev1alpha1.ObservedNode
	var listed []meshv1alpha1.SkippedNode
	for i := 24; i >= 0; i-- {
		many = append(many, observedNode(fmt.Sprintf("a%02d", i), podCIDRs(fmt.Sprintf("10.1.%d.0/24", 100+i))))
	}
	for i := range 20 {
		listed = append(listed, meshv1alpha1.SkippedNode{Node: fmt.Sprintf("a%02d", i), Reason: ReasonNodeNoWireguardIP})
	}

	cases := map[string]struct {
		reason string
		in     *Input
		want   meshv1alpha1.ClusterMeshStatus
	}{
		"Counts": {
			reason: "Per cluster: observed nodes, segments, Peers written into each other cluster, skipped nodes with reasons; totals for the mesh.",
			in: meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB(), clusterC()}, map[string]*Observation{
				"a": observation(nodeA2(wgIP("")), nodeA1(), leaderNode("a3", "10.1.3.0/24", "10.41.0.3/16", 3, "", pubKey("x"))),
				"b": observation(nodeB1(), leaderNode("b2", "10.2.2.0/24", "10.42.0.2/16", 102, "", kiloEndpoint("192.168.16.2:51820"))),
			}),
			want: meshv1alpha1.ClusterMeshStatus{
				ClusterCount:     3,
				PeerCount:        6, // a holds 2 of b, b holds 1 of a, c holds 3
				SkippedNodeCount: 2,
				Clusters: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 3, Segments: 1, Peers: 2, SkippedNodes: 2, Skipped: []meshv1alpha1.SkippedNode{
						{Node: "a2", Reason: ReasonNodeNoWireguardIP},
						{Node: "a3", Reason: ReasonNodeKeyInvalid},
					}},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 2, Segments: 2, Peers: 4},
					{Name: "c"},
				},
			},
		},
		"SkippedListCapped": {
			reason: "At most 20 skipped nodes are listed, the first by name; moreSkipped counts the rest.",
			in: meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
				"a": observation(many...),
				"b": observation(nodeB1()),
			}),
			want: meshv1alpha1.ClusterMeshStatus{
				ClusterCount:     2,
				PeerCount:        1,
				SkippedNodeCount: 25,
				Clusters: []meshv1alpha1.ClusterStatus{
					{Name: "a", Reachable: true, LastObserved: &observedAt, Nodes: 25, SkippedNodes: 25, Skipped: listed, MoreSkipped: 5},
					{Name: "b", Reachable: true, LastObserved: &observedAt, Nodes: 1, Segments: 1, Peers: 1},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(tc.in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, p.Status, ignoreMessages); diff != "" {
				t.Errorf("\n%s\nDo(...): -want status, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSkippedMessages(t *testing.T) {
	p, err := Do(twoClusters(meshv1alpha1.GranularityNode, nodeA1(), nodeA2(wgIP("10.99.0.2/16"))))
	if err != nil {
		t.Fatalf("Do(...): unexpected error: %v", err)
	}
	s := statusOf(p, "a").Skipped
	if len(s) != 1 || !strings.Contains(s[0].Message, "10.99.0.2") {
		t.Errorf("A skipped node's message says what is wrong with it (the address out of range): got %+v", s)
	}
}

func TestWarnings(t *testing.T) {
	type want struct {
		warnings []warning
		mentions map[warning][]string // words each warning's message contains
		pending  int
	}
	cases := map[string]struct {
		reason string
		nodes  []kubev1alpha1.ObservedNode
		want   want
	}{
		"OnePerReason": {
			reason: "Skips are summarised in one warning per cluster and reason, naming the nodes; transient ones keep the mesh pending.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(),
				nodeA2(wgIP("")),
				leaderNode("a3", "10.1.3.0/24", "", 3, "203.0.113.3"),
				leaderNode("a4", "10.1.4.0/24", "", 4, "203.0.113.4"),
				leaderNode("a5", "10.1.5.0/24", "10.41.0.5/16", 5, "", pubKey("k")),
			},
			want: want{
				warnings: []warning{{"a", ReasonNodeKeyInvalid}, {"a", ReasonNodeNoWireguardIP}},
				mentions: map[warning][]string{
					{"a", ReasonNodeNoWireguardIP}: {"a2", "a3", "a4"},
					{"a", ReasonNodeKeyInvalid}:    {"a5"},
				},
				pending: 1,
			},
		},
		"ProblemsAggregated": {
			reason: "Address conflicts of several nodes are one NodeIPConflict warning naming them.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(internalIP("192.168.1.50/24")),
				nodeA2(internalIP("192.168.1.50/24")),
				leaderNode("a3", "10.1.3.0/24", "10.41.0.3/16", 3, "203.0.113.3", internalIP("192.168.1.50/24")),
			},
			want: want{
				warnings: []warning{{"a", ReasonNodeIPConflict}},
				mentions: map[warning][]string{{"a", ReasonNodeIPConflict}: {"a1", "a2", "a3"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(twoClusters(meshv1alpha1.GranularityNode, tc.nodes...))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
			for _, w := range p.Warnings {
				for _, word := range tc.want.mentions[warning{w.Cluster, w.Reason}] {
					if !strings.Contains(w.Message, word) {
						t.Errorf("\n%s\nDo(...): warning %s/%s %q does not mention %q", tc.reason, w.Cluster, w.Reason, w.Message, word)
					}
				}
			}
			if len(p.Pending) != tc.want.pending {
				t.Errorf("\n%s\nDo(...): want %d pending, got %q", tc.reason, tc.want.pending, p.Pending)
			}
		})
	}
}

func TestRemovedCluster(t *testing.T) {
	// c was a member: its inventory is still observed, but the spec no
	// longer lists it.
	in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
		"a": observation(nodeA1()),
		"b": observation(nodeB1()),
		"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
	})
	p, err := Do(in)
	if err != nil {
		t.Fatalf("Do(...): unexpected error: %v", err)
	}
	got := map[string][]string{}
	for target := range p.Peers {
		got[target] = namesIn(p, target)
	}
	want := map[string][]string{"a": peerNames("b", "b1"), "b": peerNames("a", "a1")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("A cluster removed from the spec holds no Peers of the mesh and has none in the others.\nDo(...): -want, +got:\n%s", diff)
	}
	if n := len(p.Status.Clusters); n != 2 {
		t.Errorf("A cluster removed from the spec is not reported: %d clusters in status", n)
	}
}

func TestRouteConflicts(t *testing.T) {
	nameA1 := PeerName(testNamespace, testMesh, "a", "a1")
	type want struct {
		inB       map[string][]string // allowedIPs of a's Peers in b
		conflicts []meshv1alpha1.PeerConflict
		mentions  []string
	}
	cases := map[string]struct {
		reason    string
		foreign   []kubev1alpha1.ForeignPeer // in b
		delivered map[string]DeliveredPeer   // in b
		want      want
	}{
		"HostRouteIntoAnotherMeshsPodCIDR": {
			reason:  "A Peer the mesh does not own (another namespace's mesh, a hand-made VPN peer) that routes a pod CIDR in b keeps it: the mesh writes the rest of its Peer and reports both Peers.",
			foreign: []kubev1alpha1.ForeignPeer{{Name: "other-ns-mesh-x", PublicKey: testKey(99), AllowedIPs: []string{"10.1.1.0/25"}}},
			want: want{
				inB:       map[string][]string{"a1": {"192.168.1.1/32", "10.41.0.1/32", "10.201.0.0/16"}},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerRouteConflict}},
				mentions:  []string{"10.1.1.0/24", "other-ns-mesh-x", "10.1.1.0/25"},
			},
		},
		"AnchorCIDR": {
			reason:  "The anchor's CIDRs are withheld like any route.",
			foreign: []kubev1alpha1.ForeignPeer{{Name: "vpn", AllowedIPs: []string{"10.201.5.0/24"}}},
			want: want{
				inB:       map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"}},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerRouteConflict}},
				mentions:  []string{"10.201.0.0/16", "vpn"},
			},
		},
		"IncumbentKeepsItsRoute": {
			reason:    "A route the mesh delivered first stays: a Peer added later over it can neither take it over nor split it; the overlap is reported.",
			foreign:   []kubev1alpha1.ForeignPeer{{Name: "late", AllowedIPs: []string{"10.1.1.0/24", "10.201.0.0/16"}}},
			delivered: map[string]DeliveredPeer{nameA1: {PublicKey: testKey(1), AllowedIPs: []string{"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"}}},
			want: want{
				inB:       map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"}},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerRouteConflict}},
				mentions:  []string{"kept", "not written", "10.201.0.0/16"},
			},
		},
		"CatchAll": {
			reason:  "A foreign Peer routing everything leaves no route for the mesh's Peer: it is not written, and the conflict says why.",
			foreign: []kubev1alpha1.ForeignPeer{{Name: "default-route", AllowedIPs: []string{"0.0.0.0/0"}}},
			want: want{
				inB:       map[string][]string{},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerRouteConflict}},
				mentions:  []string{"default-route", "0.0.0.0/0"},
			},
		},
		"OtherFamilyAndJunkIgnored": {
			reason:  "Routes of the other family, and allowed IPs Kilo cannot parse, overlap nothing.",
			foreign: []kubev1alpha1.ForeignPeer{{Name: "v6", AllowedIPs: []string{"::/0", "10.1.1.0", "junk"}}},
			want: want{
				inB: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32", "10.201.0.0/16"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obsB := observation(nodeB1())
			obsB.ForeignPeers = tc.foreign
			in := meshInput([]meshv1alpha1.Cluster{clusterA(withService("10.201.0.0/16")), clusterB()}, map[string]*Observation{
				"a": observation(nodeA1(internalIP("192.168.1.1/24"))),
				"b": obsB,
			})
			in.Delivered = map[string]map[string]DeliveredPeer{"b": tc.delivered}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.inB, allowedByLeader(p, "b", "a1")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs in b, +got:\n%s", tc.reason, diff)
			}
			got := statusOf(p, "b").Conflicts
			if diff := cmp.Diff(tc.want.conflicts, got, ignoreMessages); diff != "" {
				t.Errorf("\n%s\nDo(...): -want conflicts in b, +got:\n%s", tc.reason, diff)
			}
			for _, word := range tc.want.mentions {
				if len(got) == 0 || !strings.Contains(got[0].Message, word) {
					t.Errorf("\n%s\nDo(...): the conflict %+v does not mention %q", tc.reason, got, word)
				}
			}
		})
	}
}

// TestNodeDataQuotedBounded pins that values read from Nodes reach status
// and warnings cut to a bounded length and as valid UTF-8, however large or
// malformed: a few nodes with 256 KiB annotations must not stall the mesh.
func TestNodeDataQuotedBounded(t *testing.T) {
	huge := strings.Repeat("é", 128<<10) + "\xff"
	p, err := Do(twoClusters(meshv1alpha1.GranularityLocation,
		nodeA1(wgIP(huge), location(huge), internalIP("192.168.1.1/24")),
		nodeA2(location(huge), nodeKeepalive(huge), forceEndpoint(huge)),
		nodeU1(clustermeshEndpoint(huge), locationIPs(huge)),
	))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, w := range p.Warnings {
		texts = append(texts, w.Message)
	}
	for _, c := range p.Status.Clusters {
		for _, s := range c.Skipped {
			texts = append(texts, s.Message)
		}
	}
	texts = append(texts, p.Pending...)
	if len(texts) == 0 {
		t.Fatal("want the bad annotations reported")
	}
	for _, s := range texts {
		if len(s) > 4096 || !utf8.ValidString(s) {
			t.Errorf("a message quoting node data is %d bytes long, valid UTF-8 %t: %.200q", len(s), utf8.ValidString(s), s)
		}
	}
}

// TestForeignPeersIncomplete pins that no bound on what the mesh knows of the
// Peers it does not own ever opens a door: routes it cannot see are never
// taken for free ones.
func TestForeignPeersIncomplete(t *testing.T) {
	nameA1 := PeerName(testNamespace, testMesh, "a", "a1")
	// junk are Peers named to sort first, holding more routes than the
	// planner reads, the way a tenant's second mesh could.
	junk := func(routes int) []kubev1alpha1.ForeignPeer {
		var out []kubev1alpha1.ForeignPeer
		for i := 0; routes > 0; i++ {
			fp := kubev1alpha1.ForeignPeer{Name: fmt.Sprintf("aaa-%03d", i), PublicKey: testKey(byte(200 + i%50))}
			for j := 0; j < 4096 && routes > 0; j, routes = j+1, routes-1 {
				n := i*4096 + j
				fp.AllowedIPs = append(fp.AllowedIPs, fmt.Sprintf("100.%d.%d.%d/32", 64+n>>16, n>>8&255, n&255))
			}
			out = append(out, fp)
		}
		return out
	}
	victims := []kubev1alpha1.ForeignPeer{
		{Name: "zz-victim", PublicKey: testKey(98), AllowedIPs: []string{"10.1.0.0/16"}},
		{Name: "zzz-victim2", PublicKey: testKey(1)}, // a1's key
	}
	type want struct {
		inB       map[string][]string
		conflicts []meshv1alpha1.PeerConflict
		withheld  bool
	}
	cases := map[string]struct {
		reason     string
		foreign    []kubev1alpha1.ForeignPeer
		incomplete string
		delivered  map[string]DeliveredPeer
		want       want
	}{
		"VictimsSeen": {
			reason:  "Without junk the victims' key and route are seen: a1's Peer is held back by the key conflict.",
			foreign: victims,
			want: want{
				inB:       map[string][]string{},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerKeyConflict}},
			},
		},
		"JunkPastTheBudgetHidesNothing": {
			reason:  "Peers sorting first that hold more routes than the planner reads cannot hide the victims: their keys are still read, and no new route is written into b while its routes are not known whole.",
			foreign: append(junk(maxForeignRoutes+1), victims...),
			want: want{
				inB:       map[string][]string{},
				conflicts: []meshv1alpha1.PeerConflict{{Peer: nameA1, Reason: ReasonPeerKeyConflict}},
				withheld:  true,
			},
		},
		"JunkPastTheBudgetWithheldRoutes": {
			reason:  "Over the budget, with no key in the way, every new route into b is withheld, and the Peer with none left is not written.",
			foreign: append(junk(maxForeignRoutes+1), victims[0]),
			want: want{
				inB:      map[string][]string{},
				withheld: true,
			},
		},
		"InventoryIncomplete": {
			reason:     "When the inventory says it published only part of the foreign Peers, no new route is written into b.",
			foreign:    []kubev1alpha1.ForeignPeer{{Name: "vpn", AllowedIPs: []string{"172.16.0.0/16"}}},
			incomplete: "more than 16384 routes",
			want: want{
				inB:      map[string][]string{},
				withheld: true,
			},
		},
		"IncompleteKeepsWhatWasDelivered": {
			reason:     "Routes the mesh already wrote into b stay while b is incomplete; only new ones are withheld.",
			incomplete: "more than 16384 routes",
			delivered:  map[string]DeliveredPeer{nameA1: {PublicKey: testKey(1), AllowedIPs: []string{"10.1.1.0/24", "10.41.0.1/32"}}},
			want: want{
				inB:      map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}},
				withheld: true,
			},
		},
		"WithinTheBudget": {
			reason:  "Exactly as many routes as the planner reads are known whole: nothing is withheld for it.",
			foreign: junk(maxForeignRoutes),
			want: want{
				inB: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32", "10.201.0.0/16"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obsB := observation(nodeB1())
			obsB.ForeignPeers = tc.foreign
			obsB.ForeignPeersIncomplete = tc.incomplete
			in := meshInput([]meshv1alpha1.Cluster{clusterA(withService("10.201.0.0/16")), clusterB()}, map[string]*Observation{
				"a": observation(nodeA1(internalIP("192.168.1.1/24"))),
				"b": obsB,
			})
			in.Delivered = map[string]map[string]DeliveredPeer{"b": tc.delivered}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.inB, allowedByLeader(p, "b", "a1"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.conflicts, statusOf(p, "b").Conflicts, ignoreMessages); diff != "" {
				t.Errorf("\n%s\nDo(...): -want conflicts in b, +got:\n%s", tc.reason, diff)
			}
			msg, withheld := p.Withheld["b"]
			if withheld != tc.want.withheld {
				t.Errorf("\n%s\nDo(...): withheld in b = %t (%q), want %t", tc.reason, withheld, msg, tc.want.withheld)
			}
			if _, ok := p.Withheld["a"]; ok {
				t.Errorf("\n%s\nDo(...): a is complete, but withheld: %q", tc.reason, p.Withheld["a"])
			}
			warned := false
			for _, w := range p.Warnings {
				warned = warned || w.Reason == ReasonForeignPeersIncomplete && w.Cluster == "b"
			}
			if warned != tc.want.withheld {
				t.Errorf("\n%s\nDo(...): a ForeignPeersIncomplete warning for b = %t, want %t", tc.reason, warned, tc.want.withheld)
			}
		})
	}
}
