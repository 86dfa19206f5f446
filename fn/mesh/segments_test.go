package mesh

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Nodes of cluster a in two locations: eu (e1 leads, e2 follows) and us (u1
// leads).
func nodeE1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{location("eu"), internalIPs("192.168.1.1")}
	return leaderNode("e1", "10.1.1.0/24", "10.41.0.1/16", 1, "203.0.113.1", append(base, opts...)...)
}

func nodeE2(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{location("eu"), podCIDRs("10.1.2.0/24"), internalIPs("192.168.1.2")}
	return observedNode("e2", append(base, opts...)...)
}

func nodeU1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{location("us"), internalIPs("192.168.2.1")}
	return leaderNode("u1", "10.1.3.0/24", "10.41.0.3/16", 3, "203.0.113.3", append(base, opts...)...)
}

var (
	epE1 = ipEndpoint("203.0.113.1", 51820)
	epU1 = ipEndpoint("203.0.113.3", 51820)
)

func TestSegments(t *testing.T) {
	type want struct {
		peers   []kilov1alpha1.Peer // Peers of a in b
		skipped []skip
	}
	cases := map[string]struct {
		reason string
		g      meshv1alpha1.Granularity
		nodes  []kubev1alpha1.ObservedNode
		want   want
	}{
		"NodeEveryNodeIsASegment": {
			reason: "With Node granularity every valid node is its own Peer, whatever its location.",
			g:      meshv1alpha1.GranularityNode,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeU1(location("eu"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
				wantPeer("a", "u1", 3, epU1, 0, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.3/32"),
			}},
		},
		"LocationOneSegmentPerLocation": {
			reason: "With Location granularity each location is one Peer covering every member, led by the node with a WireGuard IP.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeU1(), nodeE2(), nodeE1()},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
				wantPeer("a", "u1", 3, epU1, 0, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.3/32"),
			}},
		},
		"LocationLeaderSortsAfterMember": {
			reason: "The leader need not sort first: members are listed by name and the leader's WireGuard address comes last.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				observedNode("e0", location("eu"), podCIDRs("10.1.9.0/24"), internalIPs("192.168.1.9")),
				nodeE1(),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.9.0/24", "192.168.1.9/32", "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
			}},
		},
		"LocationNoLeader": {
			reason: "A location where no node carries a WireGuard IP yields no Peer and its nodes are SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeU1(wgIP("")), observedNode("u2", location("us"), podCIDRs("10.1.4.0/24"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"u1", ReasonSegmentNoLeader}, {"u2", ReasonSegmentNoLeader}},
			},
		},
		"LocationLeaderKeyInvalid": {
			reason: "A leader failing the key check is skipped with its reason and the other members get SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(pubKey("nope")), nodeE2()},
			want:   want{skipped: []skip{{"e1", ReasonNodeKeyInvalid}, {"e2", ReasonSegmentNoLeader}}},
		},
		"LocationLeaderNoKey": {
			reason: "A leader without a key is skipped (NodeNoPublicKey) and its members wait for it.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(pubKey("")), nodeE2()},
			want:   want{skipped: []skip{{"e1", ReasonNodeNoPublicKey}, {"e2", ReasonSegmentNoLeader}}},
		},
		"LocationLeaderWireguardIPOutOfRange": {
			reason: "The first node by name with a WireGuard IP leads; if that IP is bad, a later node with a good one does not take over.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(wgIP("10.99.0.1/16")), nodeE2(wgIP("10.41.0.2/16"), keyN(2), externalIPs("203.0.113.2"))},
			want:   want{skipped: []skip{{"e1", ReasonWGIPOutOfRange}, {"e2", ReasonSegmentNoLeader}}},
		},
		"LocationLeaderEndpointInvalid": {
			reason: "A leader with a malformed endpoint is skipped and its members get SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(forceEndpoint("203.0.113.1")), nodeE2()},
			want:   want{skipped: []skip{{"e1", ReasonNodeEndpointInvalid}, {"e2", ReasonSegmentNoLeader}}},
		},
		"LocationLeaderKeyDuplicate": {
			reason: "A leader that loses its key to a leader sorting before it is skipped and its members get SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeU1(keyN(1)), observedNode("u2", location("us"), podCIDRs("10.1.4.0/24"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"u1", ReasonNodeKeyDuplicate}, {"u2", ReasonSegmentNoLeader}},
			},
		},
		"LocationWireguardIPDuplicateByName": {
			reason: "Between leaders of two locations with one WireGuard address, the node whose name sorts first keeps it, not the leader of the location met first.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				observedNode("e0", location("eu"), podCIDRs("10.1.9.0/24")),
				nodeU1(wgIP("10.41.0.1/16")),
				leaderNode("z1", "10.1.4.0/24", "10.41.0.1/16", 4, "203.0.113.4", location("eu")),
			},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "u1", 3, epU1, 0, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e0", ReasonSegmentNoLeader}, {"z1", ReasonWGIPDuplicate}},
			},
		},
		"LocationMemberPodCIDROutOfRange": {
			reason: "A member with a bad pod CIDR is skipped and left out of its location's allowedIPs.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(podCIDRs("10.2.9.0/24"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodePodCIDROutOfRange}},
			},
		},
		"LocationMemberNeedsOnlyPodCIDRs": {
			reason: "The WireGuard IP, key and endpoint checks apply to the leader only: a member's missing key or bad endpoint does not matter.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(pubKey("junk"), forceEndpoint("junk"), externalIPs("203.0.113.2"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"LocationUnnamed": {
			reason: "Nodes without a location form one unnamed location.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(location("")), nodeE2(location(""))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"LocationUnnamedIsItsOwnLocation": {
			reason: "Nodes without a location are not members of a named location.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(location(""))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonSegmentNoLeader}},
			},
		},
		"AutoLocation": {
			reason: "Auto reads kilo.squat.ai/granularity=location from the nodes and groups them by location.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2(granularity("location"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"DefaultIsAuto": {
			reason: "An empty granularity is Auto.",
			g:      "",
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2()},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"AutoFull": {
			reason: "Auto reads kilo.squat.ai/granularity=full and makes every node a Peer.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("full")), nodeE2(granularity("full"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"AutoFirstNodeByNameDecides": {
			reason: "The first node by name with a recognised value decides, not the first in the list.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE2(granularity("location")), nodeE1(granularity("full"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"AutoUnrecognisedValuesPassedOver": {
			reason: "Nodes with no or an unrecognised granularity are passed over until one says location or full.",
			g:      meshv1alpha1.GranularityAuto,
			nodes: []kubev1alpha1.ObservedNode{
				observedNode("e0", location("eu"), podCIDRs("10.1.9.0/24"), granularity("cross")),
				nodeE1(),
				nodeE2(granularity("location")),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.9.0/24", "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"AutoNoAnnotationIsNode": {
			reason: "Without any granularity annotation Auto is Node granularity.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2()},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"NodeOverridesAnnotation": {
			reason: "A declared Node granularity wins over the nodes' annotation.",
			g:      meshv1alpha1.GranularityNode,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2(granularity("location"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"LocationOverridesAnnotation": {
			reason: "A declared Location granularity wins over the nodes' annotation.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("full")), nodeE2(granularity("full"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, 0, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(twoClusters(tc.g, tc.nodes...))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.peers, p.Peers["b"]); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.skipped, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
			if got, want := statusOf(p, "a").Segments, len(tc.want.peers); got != want {
				t.Errorf("\n%s\nDo(...): want %d segments of a, got %d", tc.reason, want, got)
			}
		})
	}
}

func TestAutoGranularityPerCluster(t *testing.T) {
	in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
		"a": observation(nodeE1(granularity("location")), nodeE2(granularity("location"))),
		"b": observation(nodeB1(granularity("full")), observedNode("b2", podCIDRs("10.2.2.0/24"), granularity("full"))),
	})
	p, err := Do(in)
	if err != nil {
		t.Fatalf("Do(...): unexpected error: %v", err)
	}
	reason := "Auto decides per cluster: a follows its nodes' location granularity, b its nodes' full granularity."
	if diff := cmp.Diff(peerNames("a", "e1"), namesIn(p, "b")); diff != "" {
		t.Errorf("\n%s\nDo(...): -want Peers in b, +got:\n%s", reason, diff)
	}
	if diff := cmp.Diff([]skip{{"b2", ReasonNodeNoWireguardIP}}, skipsOf(p, "b")); diff != "" {
		t.Errorf("\n%s\nDo(...): -want skipped in b, +got:\n%s", reason, diff)
	}
	if diff := cmp.Diff([]skip(nil), skipsOf(p, "a")); diff != "" {
		t.Errorf("\n%s\nDo(...): -want skipped in a, +got:\n%s", reason, diff)
	}
}
