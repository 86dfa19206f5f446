package mesh

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Nodes of cluster a in two locations, as Kilo's agents annotate them: eu,
// where e1 has a public endpoint and Kilo elects it, and e2 has a private
// one; and us, with u1 alone. Leaders carry a WireGuard IP, members do not.
func nodeE1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{location("eu"), internalIP("192.168.1.1/24")}
	return leaderNode("e1", "10.1.1.0/24", "10.41.0.1/16", 1, "203.0.113.1", append(base, opts...)...)
}

func nodeE2(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	return memberNode("e2", "10.1.2.0/24", 2, "192.168.1.2/24", append([]nodeOpt{location("eu")}, opts...)...)
}

func nodeU1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{location("us"), internalIP("192.168.2.1/24")}
	return leaderNode("u1", "10.1.3.0/24", "10.41.0.3/16", 3, "203.0.113.3", append(base, opts...)...)
}

var (
	epE1 = ipEndpoint("203.0.113.1", 51820)
	epE2 = ipEndpoint("192.168.1.2", 51820)
	epU1 = ipEndpoint("203.0.113.3", 51820)
)

// The allowed IPs of the eu location led by e1, with e2 as a member.
var euAllowed = []string{"10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"}

func TestSegments(t *testing.T) {
	type want struct {
		peers    []kilov1alpha1.Peer // Peers of a in b
		skipped  []skip
		problems []warning
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
				wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
				wantPeer("a", "u1", 3, epU1, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.3/32"),
			}},
		},
		"LocationOneSegmentPerLocation": {
			reason: "With Location granularity each location is one Peer covering every member, led by the node Kilo elects.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeU1(), nodeE2(), nodeE1()},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, euAllowed...),
				wantPeer("a", "u1", 3, epU1, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.3/32"),
			}},
		},
		"LocationPublicEndpointBeatsName": {
			reason: "Kilo prefers a node with a public endpoint over the first by name: e0 sorts first but its endpoint is private; members are listed by name and the leader's WireGuard address comes last.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{memberNode("e0", "10.1.9.0/24", 9, "192.168.1.9/24", location("eu")), nodeE1()},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, "10.1.9.0/24", "192.168.1.9/32", "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
			}},
		},
		"LocationFirstByNameWhenNoneIsPublic": {
			reason: "Without a volunteer or a public endpoint, Kilo elects the first node by name.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				nodeE1(kiloEndpoint("192.168.1.1:51820"), wgIP(""), externalIPs()),
				nodeE2(wgIP("10.41.0.2/16")),
				memberNode("e0", "10.1.9.0/24", 9, "192.168.1.9/24", location("eu"), wgIP("10.41.0.9/16")),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e0", 9, ipEndpoint("192.168.1.9", 51820),
					"10.1.9.0/24", "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.9/32"),
			}, problems: []warning{{"a", ReasonNodeNotLeader}}},
		},
		"LocationVolunteerWithPublicEndpointFirst": {
			reason: "A node annotated kilo.squat.ai/leader with a public endpoint leads, before an earlier public node; the old leader still carrying a WireGuard IP is reported.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				nodeE1(),
				leaderNode("e3", "10.1.4.0/24", "10.41.0.4/16", 4, "203.0.113.4", location("eu"), internalIP("192.168.1.4/24"), volunteer()),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e3", 4, ipEndpoint("203.0.113.4", 51820),
					"10.1.1.0/24", "192.168.1.1/32", "10.1.4.0/24", "192.168.1.4/32", "10.41.0.4/32"),
			}, problems: []warning{{"a", ReasonNodeNotLeader}}},
		},
		"LocationVolunteerBeatsPublicEndpoint": {
			reason: "A volunteer with a private endpoint still leads before a public node that did not volunteer; its own endpoint address is not routed through its tunnel.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(wgIP("")), nodeE2(volunteer(), wgIP("10.41.0.2/16"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e2", 2, epE2, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "10.41.0.2/32"),
			}},
		},
		"LocationPublicVolunteerBeatsEarlierVolunteer": {
			reason: "Of two volunteers the one with a public endpoint leads, although the other sorts first.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				memberNode("e0", "10.1.9.0/24", 9, "192.168.1.9/24", location("eu"), volunteer()),
				nodeE1(volunteer()),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, "10.1.9.0/24", "192.168.1.9/32", "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
			}},
		},
		"LocationForgedWireguardIPDoesNotLead": {
			reason: "A node that writes itself a WireGuard IP does not lead when Kilo elects another; it is reported and stays a member.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{memberNode("e0", "10.1.9.0/24", 9, "192.168.1.9/24", location("eu"), wgIP("10.41.0.9/16")), nodeE1()},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, "10.1.9.0/24", "192.168.1.9/32", "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"),
			}, problems: []warning{{"a", ReasonNodeNotLeader}}},
		},
		"LocationElectedLeaderWithoutWireguardIP": {
			reason: "While Kilo's new leader has no WireGuard IP yet, the segment has no Peer; the old leader that still carries one is not promoted in its place.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(volunteer())},
			want: want{
				skipped:  []skip{{"e1", ReasonSegmentNoLeader}, {"e2", ReasonNodeNoWireguardIP}},
				problems: []warning{{"a", ReasonNodeNotLeader}},
			},
		},
		"LocationStaleLeaderHandsOver": {
			reason: "A leader whose Kilo heartbeat is stale is out of Kilo's topology: the location moves to the leader Kilo elects next.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(stale()), nodeE2(wgIP("10.41.0.2/16"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e2", 2, epE2, "10.1.2.0/24", "10.41.0.2/32")},
				skipped: []skip{{"e1", ReasonNodeNotReady}},
			},
		},
		"LocationNoInternalIPIsASegmentOfItsOwn": {
			reason: "A node without an internal IP (force-internal-ip \"-\") is a segment of its own, as in Kilo: it does not lead eu although it sorts first and has a public endpoint.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				leaderNode("e0", "10.1.9.0/24", "10.41.0.9/16", 9, "203.0.113.9", location("eu"), internalIP("192.168.1.9/24"), forceInternalIP("-")),
				nodeE1(), nodeE2(),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e0", 9, ipEndpoint("203.0.113.9", 51820), "10.1.9.0/24", "10.41.0.9/32"),
				wantPeer("a", "e1", 1, epE1, euAllowed...),
			}},
		},
		"LocationInternalIPNotACIDR": {
			reason: "Kilo reads kilo.squat.ai/internal-ip only as a CIDR: a bare address is no internal IP, so the node is a segment of its own.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(internalIP("192.168.1.2"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"LocationForceInternalIPWins": {
			reason: "force-internal-ip overrides internal-ip: its address is the one routed.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(forceInternalIP("192.168.1.7/24"))},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.7/32", "10.41.0.1/32"),
			}},
		},
		"LocationForceInternalIPUnparseable": {
			reason: "A force-internal-ip Kilo cannot read falls back to internal-ip, as in Kilo.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(forceInternalIP("192.168.1.7"))},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
		},
		"LocationNoLeaderYet": {
			reason: "A location where Kilo's elected leader has no WireGuard IP yet yields no Peer: the leader waits (NodeNoWireguardIP), its members are SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeU1(wgIP("")), memberNode("u2", "10.1.4.0/24", 4, "192.168.2.2/24", location("us"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"u1", ReasonNodeNoWireguardIP}, {"u2", ReasonSegmentNoLeader}},
			},
		},
		"LocationLeaderKeyInvalidIsNotReady": {
			reason: "Kilo reads a malformed key as none and leaves the node out: e1 is not elected, and e2 is (it carries no WireGuard IP yet).",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(pubKey("nope")), nodeE2()},
			want:   want{skipped: []skip{{"e1", ReasonNodeKeyInvalid}, {"e2", ReasonNodeNoWireguardIP}}},
		},
		"LocationLeaderWireguardIPOutOfRange": {
			reason: "If the elected leader's WireGuard IP is bad, no other node with a good one takes over.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(wgIP("10.99.0.1/16")), nodeE2(wgIP("10.41.0.2/16"))},
			want: want{
				skipped:  []skip{{"e1", ReasonWGIPOutOfRange}, {"e2", ReasonSegmentNoLeader}},
				problems: []warning{{"a", ReasonNodeNotLeader}},
			},
		},
		"LocationLeaderEndpointInvalid": {
			reason: "A leader with a malformed endpoint is skipped and its members get SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(clustermeshEndpoint("203.0.113.1")), nodeE2()},
			want:   want{skipped: []skip{{"e1", ReasonNodeEndpointInvalid}, {"e2", ReasonSegmentNoLeader}}},
		},
		"LocationLeaderKeyDuplicate": {
			reason: "Two leaders sharing a key, neither delivered yet, are both skipped and their members get SegmentNoLeader.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeU1(keyN(1)), memberNode("u2", "10.1.4.0/24", 4, "192.168.2.2/24", location("us"))},
			want: want{
				skipped: []skip{{"e1", ReasonNodeKeyDuplicate}, {"u1", ReasonNodeKeyDuplicate}, {"u2", ReasonSegmentNoLeader}},
			},
		},
		"LocationWireguardIPDuplicateByName": {
			reason: "Between leaders of two locations with one WireGuard address, the node whose name sorts first keeps it.",
			g:      meshv1alpha1.GranularityLocation,
			nodes: []kubev1alpha1.ObservedNode{
				nodeU1(wgIP("10.41.0.1/16")),
				leaderNode("z1", "10.1.4.0/24", "10.41.0.1/16", 4, "203.0.113.4", location("eu"), internalIP("192.168.1.4/24")),
			},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "u1", 3, epU1, "10.1.3.0/24", "192.168.2.1/32", "10.41.0.1/32")},
				skipped: []skip{{"z1", ReasonWGIPDuplicate}},
			},
		},
		"LocationMemberPodCIDROutOfRange": {
			reason: "A member with a bad pod CIDR is skipped and left out of its location's allowedIPs.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(podCIDRs("10.2.9.0/24"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodePodCIDROutOfRange}},
			},
		},
		"LocationMemberWithoutKeyLeftOut": {
			reason: "Kilo leaves a member without a key out of its topology, so its pod CIDR is not routed either.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(pubKey(""))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoPublicKey}},
			},
		},
		"LocationMemberStaleLeftOut": {
			reason: "A member whose heartbeat is stale is out of Kilo's topology and of the Peer.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(stale())},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNotReady}},
			},
		},
		"LocationMemberNeedsNoEndpointOfItsOwn": {
			reason: "The endpoint chain applies to the leader only: a member's malformed clustermesh-endpoint and missing ExternalIP do not matter.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(clustermeshEndpoint("junk"))},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
		},
		"LocationUnnamed": {
			reason: "Nodes without a location form one unnamed location.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(location("")), nodeE2(location(""))},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
		},
		"LocationUnnamedIsItsOwnLocation": {
			reason: "Nodes without a location are not members of a named location: e2 alone in the unnamed one is elected there and has no WireGuard IP yet.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2(location(""))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"AutoLocation": {
			reason: "Auto reads kilo.squat.ai/granularity=location from the nodes and groups them by location.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2(granularity("location"))},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
		},
		"DefaultIsAuto": {
			reason: "An empty granularity is Auto.",
			g:      "",
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2()},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
		},
		"AutoFull": {
			reason: "Auto reads kilo.squat.ai/granularity=full and makes every node a Peer.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("full")), nodeE2(granularity("full"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"AutoFirstNodeByNameDecides": {
			reason: "The first node by name with a recognised value decides, not the first in the list.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE2(granularity("location")), nodeE1(granularity("full"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"AutoUnrecognisedValuesPassedOver": {
			reason: "Nodes with no or an unrecognised granularity are passed over until one says location or full.",
			g:      meshv1alpha1.GranularityAuto,
			nodes: []kubev1alpha1.ObservedNode{
				memberNode("e0", "10.1.9.0/24", 9, "192.168.1.9/24", location("eu"), granularity("cross")),
				nodeE1(),
				nodeE2(granularity("location")),
			},
			want: want{peers: []kilov1alpha1.Peer{
				wantPeer("a", "e1", 1, epE1, "10.1.9.0/24", "192.168.1.9/32", "10.1.1.0/24", "192.168.1.1/32", "10.1.2.0/24", "192.168.1.2/32", "10.41.0.1/32"),
			}},
		},
		"AutoNoAnnotationIsNode": {
			reason: "Without any granularity annotation Auto is Node granularity.",
			g:      meshv1alpha1.GranularityAuto,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(), nodeE2()},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"NodeOverridesAnnotation": {
			reason: "A declared Node granularity wins over the nodes' annotation.",
			g:      meshv1alpha1.GranularityNode,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("location")), nodeE2(granularity("location"))},
			want: want{
				peers:   []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, "10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32")},
				skipped: []skip{{"e2", ReasonNodeNoWireguardIP}},
			},
		},
		"LocationOverridesAnnotation": {
			reason: "A declared Location granularity wins over the nodes' annotation.",
			g:      meshv1alpha1.GranularityLocation,
			nodes:  []kubev1alpha1.ObservedNode{nodeE1(granularity("full")), nodeE2(granularity("full"))},
			want:   want{peers: []kilov1alpha1.Peer{wantPeer("a", "e1", 1, epE1, euAllowed...)}},
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
			if diff := cmp.Diff(tc.want.problems, problemsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want problems, +got:\n%s", tc.reason, diff)
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
		"b": observation(nodeB1(granularity("full")), memberNode("b2", "10.2.2.0/24", 102, "192.168.16.2/24", granularity("full"))),
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

// TestIsPublic pins Kilo's isPublic, which decides which node Kilo prefers
// as leader, quirks included.
func TestIsPublic(t *testing.T) {
	cases := map[string]struct {
		reason string
		addr   string
		want   bool
	}{
		"RFC1918Ten":        {reason: "10.0.0.0/8 is private.", addr: "10.1.2.3", want: false},
		"RFC1918OneSeventy": {reason: "172.16.0.0/12 is private.", addr: "172.31.255.1", want: false},
		"OneSeventyOutside": {reason: "172.32.0.1 is outside 172.16.0.0/12.", addr: "172.32.0.1", want: true},
		"RFC1918OneNinety":  {reason: "192.168.0.0/16 is private.", addr: "192.168.7.7", want: false},
		"Documentation":     {reason: "Any other IPv4 address is public.", addr: "203.0.113.1", want: true},
		"CGNATQuirk":        {reason: "Kilo counts shared address space (100.64.0.0/10) as public.", addr: "100.64.0.1", want: true},
		"ULAfd00":           {reason: "fd00::/16 is private.", addr: "fd00::1", want: false},
		"ULAfd12Quirk":      {reason: "Kilo checks only the first two bytes: fd12::1 counts as public.", addr: "fd12::1", want: true},
		"GlobalIPv6":        {reason: "A global IPv6 address is public.", addr: "2001:db8::1", want: true},
		"Mapped":            {reason: "An IPv4-mapped address is judged as IPv4.", addr: "::ffff:10.0.0.1", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := isPublic(netip.MustParseAddr(tc.addr).Unmap()); got != tc.want {
				t.Errorf("\n%s\nisPublic(%s): want %v, got %v", tc.reason, tc.addr, tc.want, got)
			}
		})
	}
	if isPublic(netip.Addr{}) {
		t.Errorf("isPublic of no address (a DNS endpoint): want false, got true")
	}
}
