package mesh

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// allowedByLeader maps the leader of each of source's Peers in target to
// its allowedIPs.
func allowedByLeader(p *Plan, target, source string, leaders ...string) map[string][]string {
	out := map[string][]string{}
	for _, l := range leaders {
		if peer := peerOf(p, target, source, l); peer.Name != "" {
			out[l] = peer.Spec.AllowedIPs
		}
	}
	return out
}

func sortedWarnings(p *Plan) []warning {
	w := warningsOf(p)
	sort.Slice(w, func(i, j int) bool {
		if w[i].Cluster != w[j].Cluster {
			return w[i].Cluster < w[j].Cluster
		}
		return w[i].Reason < w[j].Reason
	})
	return w
}

func TestAllowedIPs(t *testing.T) {
	type want struct {
		allowed  map[string][]string // a's Peers in b by leader
		warnings []warning
	}
	cases := map[string]struct {
		reason    string
		cluster   []clusterOpt
		noAdverts bool
		nodes     []kubev1alpha1.ObservedNode
		b1        []nodeOpt
		want      want
	}{
		"Order": {
			reason:  "Pod CIDRs (dual-stack included), then the host of kilo.squat.ai/internal-ip, then InternalIPs, then the WireGuard host route.",
			cluster: []clusterOpt{withPods("10.1.0.0/16", "fd01:1::/48")},
			nodes: []kubev1alpha1.ObservedNode{nodeA1(
				podCIDRs("10.1.1.0/24", "fd01:1:0:1::/64"),
				kiloInternalIP("192.168.1.11/24"),
				internalIPs("192.168.2.11", "fd02::11"),
			)},
			want: want{allowed: map[string][]string{
				"a1": {"10.1.1.0/24", "fd01:1:0:1::/64", "192.168.1.11/32", "192.168.2.11/32", "fd02::11/128", "10.41.0.1/32"},
			}},
		},
		"WireguardHostRouteNotSubnet": {
			reason: "The WireGuard address is routed as /32, never as the /16 written in the annotation.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(wgIP("10.41.7.9/16"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.7.9/32"}}},
		},
		"WireguardIPv6": {
			reason:  "An IPv6 WireGuard address is routed as /128.",
			cluster: []clusterOpt{func(c *meshv1alpha1.Cluster) { c.WireguardCIDR = "fd41::/64" }},
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(wgIP("fd41::1/64"))},
			want:    want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "fd41::1/128"}}},
		},
		"NodesDoNotAdvertise": {
			reason:    "With advertiseNodeIPs false no internal address is routed.",
			noAdverts: true,
			nodes:     []kubev1alpha1.ObservedNode{nodeA1(kiloInternalIP("192.168.1.11/24"), internalIPs("192.168.2.11"))},
			want:      want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}}},
		},
		"Duplicates": {
			reason: "Duplicates are removed keeping the first: the internal-ip host repeated as an InternalIP, a pod CIDR listed twice.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(podCIDRs("10.1.1.0/24", "10.1.1.0/24"), kiloInternalIP("192.168.1.11/24"), internalIPs("192.168.1.11", "192.168.2.11"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.11/32", "192.168.2.11/32", "10.41.0.1/32"}}},
		},
		"OwnEndpointNotRouted": {
			reason: "A node whose internal address is its own endpoint does not route it, and that is not a conflict.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIPs("203.0.113.1", "192.168.2.11"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.2.11/32", "10.41.0.1/32"}}},
		},
		"OwnDNSEndpointDoesNotHideAddresses": {
			reason: "A DNS endpoint has no address to compare with: internal addresses are routed.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(forceEndpoint("a1.example.com:51820"), internalIPs("203.0.113.1"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "203.0.113.1/32", "10.41.0.1/32"}}},
		},
		"EndpointOfAnotherSegment": {
			reason: "An internal address equal to the endpoint of another segment of the cluster is not routed: NodeIPConflict.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(internalIPs("203.0.113.2", "192.168.2.11")),
				nodeA2(),
			},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "192.168.2.11/32", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"EndpointOfAnotherCluster": {
			reason: "An internal address equal to the endpoint of a segment of another cluster is not routed: NodeIPConflict.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(kiloInternalIP("198.51.100.1/24"))},
			want: want{
				allowed:  map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"EndpointOfAnotherSegmentByForceEndpoint": {
			reason: "Endpoints from any source count, a force-endpoint too.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(internalIPs("192.0.2.50")),
				nodeA2(forceEndpoint("192.0.2.50:6000")),
			},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"SharedBySegmentsOfOneCluster": {
			reason: "An internal address advertised by two segments is routed by neither: NodeIPConflict.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(internalIPs("192.168.1.50", "192.168.1.1")),
				nodeA2(internalIPs("192.168.1.50", "192.168.1.2")),
			},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "192.168.1.2/32", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"SharedAcrossClusters": {
			reason: "An internal address advertised by segments of two clusters is routed by neither; both report it.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIPs("192.168.1.50", "192.168.1.1"))},
			b1:     []nodeOpt{internalIPs("192.168.1.50")},
			want: want{
				allowed:  map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodeIPConflict}, {"b", ReasonNodeIPConflict}},
			},
		},
		"SharedWithinOneLocation": {
			reason:  "Two members of one location with the same address are one segment: the address is routed once.",
			cluster: []clusterOpt{},
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(location("eu"), internalIPs("192.168.1.50"), granularity("location")),
				observedNode("a2", location("eu"), podCIDRs("10.1.2.0/24"), internalIPs("192.168.1.50")),
			},
			want: want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.50/32", "10.1.2.0/24", "10.41.0.1/32"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{clusterA(tc.cluster...), clusterB()}, map[string]*Observation{
				"a": observation(tc.nodes...),
				"b": observation(nodeB1(tc.b1...)),
			})
			if tc.noAdverts {
				in.Spec.AdvertiseNodeIPs = boolPtr(false)
			}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.allowed, allowedByLeader(p, "b", "a", "a1", "a2")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAllowedIPsPerTarget(t *testing.T) {
	type want struct {
		inB, inC []string // allowedIPs of a1
		warnings []warning
	}
	cases := map[string]struct {
		reason string
		a1     kubev1alpha1.ObservedNode
		nodesB []kubev1alpha1.ObservedNode
		want   want
	}{
		"AddressOfATargetNode": {
			reason: "An internal address that a node of the target uses itself is dropped from the Peer in that target only: NodeIPConflict on the source.",
			a1:     nodeA1(internalIPs("192.168.9.9", "192.168.1.1")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(), observedNode("b2", podCIDRs("10.2.2.0/24"), internalIPs("192.168.9.9"))},
			want: want{
				inB:      []string{"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"},
				inC:      []string{"10.1.1.0/24", "192.168.9.9/32", "192.168.1.1/32", "10.41.0.1/32"},
				warnings: []warning{{"a", ReasonNodeIPConflict}, {"b", ReasonNodeNoWireguardIP}},
			},
		},
		"KiloInternalIPOfATargetNode": {
			reason: "The target's kilo.squat.ai/internal-ip addresses count as its own addresses too.",
			a1:     nodeA1(internalIPs("192.168.9.9")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(), observedNode("b2", podCIDRs("10.2.2.0/24"), kiloInternalIP("192.168.9.9/24"))},
			want: want{
				inB:      []string{"10.1.1.0/24", "10.41.0.1/32"},
				inC:      []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
				warnings: []warning{{"a", ReasonNodeIPConflict}, {"b", ReasonNodeNoWireguardIP}},
			},
		},
		"NoOverlapNoDrop": {
			reason: "Addresses the target does not use are routed everywhere.",
			a1:     nodeA1(internalIPs("192.168.9.9")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(internalIPs("192.168.9.10"))},
			want: want{
				inB: []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
				inC: []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB(), clusterC()}, map[string]*Observation{
				"a": observation(tc.a1),
				"b": observation(tc.nodesB...),
				"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
			})
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.inB, peerOf(p, "b", "a", "a1").Spec.AllowedIPs); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a1 in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inC, peerOf(p, "c", "a", "a1").Spec.AllowedIPs); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a1 in c, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// anchored is a with a Service CIDR and two additional CIDRs.
func anchored() meshv1alpha1.Cluster {
	return clusterA(withService("10.201.0.0/16"), withAdditional("172.16.0.0/16", "172.17.0.0/16"))
}

var anchorCIDRs = []string{"10.201.0.0/16", "172.16.0.0/16", "172.17.0.0/16"}

func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

func TestAnchor(t *testing.T) {
	type want struct {
		inB, inC map[string][]string // allowedIPs of a's Peers by leader
	}
	a1, a2, a3 := []string{"10.1.1.0/24", "10.41.0.1/32"}, []string{"10.1.2.0/24", "10.41.0.2/32"}, []string{"10.1.3.0/24", "10.41.0.3/32"}
	nodeA3 := func(opts ...nodeOpt) kubev1alpha1.ObservedNode {
		return leaderNode("a3", "10.1.3.0/24", "10.41.0.3/16", 3, "203.0.113.3", opts...)
	}
	cases := map[string]struct {
		reason  string
		cluster meshv1alpha1.Cluster
		nodes   []kubev1alpha1.ObservedNode
		foreign []kubev1alpha1.ForeignPeer // in b
		want    want
	}{
		"OneSegment": {
			reason:  "The serviceCIDR, then the additionalCIDRs, follow the WireGuard route of the only Peer.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1()},
			want: want{
				inB: map[string][]string{"a1": with(a1, anchorCIDRs...)},
				inC: map[string][]string{"a1": with(a1, anchorCIDRs...)},
			},
		},
		"OnlyAdditional": {
			reason:  "Without a serviceCIDR the anchor is the additionalCIDRs.",
			cluster: clusterA(withAdditional("172.16.0.0/16")),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1()},
			want: want{
				inB: map[string][]string{"a1": with(a1, "172.16.0.0/16")},
				inC: map[string][]string{"a1": with(a1, "172.16.0.0/16")},
			},
		},
		"NoAnchor": {
			reason:  "A cluster without serviceCIDR and additionalCIDRs has no anchor.",
			cluster: clusterA(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(), nodeA2()},
			want: want{
				inB: map[string][]string{"a1": a1, "a2": a2},
				inC: map[string][]string{"a1": a1, "a2": a2},
			},
		},
		"FirstLeaderByName": {
			reason:  "The anchor goes on exactly one Peer: the segment whose leader sorts first.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA3(), nodeA2(), nodeA1()},
			want: want{
				inB: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2, "a3": a3},
				inC: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2, "a3": a3},
			},
		},
		"SegmentsWithEndpointFirst": {
			reason:  "Roaming segments are passed over when a segment has an endpoint.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(externalIPs()), nodeA2(), nodeA3()},
			want: want{
				inB: map[string][]string{"a1": a1, "a2": with(a2, anchorCIDRs...), "a3": a3},
				inC: map[string][]string{"a1": a1, "a2": with(a2, anchorCIDRs...), "a3": a3},
			},
		},
		"AllRoaming": {
			reason:  "When every segment roams, the first by leader name is the anchor.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA2(externalIPs()), nodeA1(externalIPs())},
			want: want{
				inB: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2},
				inC: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2},
			},
		},
		"BlockedInOneTarget": {
			reason:  "Where a foreign Peer keeps the anchor segment out of a target, the next written Peer of the source carries the anchor there.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(), nodeA3()},
			foreign: []kubev1alpha1.ForeignPeer{{Name: "laptop", PublicKey: testKey(1)}},
			want: want{
				inB: map[string][]string{"a2": with(a2, anchorCIDRs...), "a3": a3},
				inC: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2, "a3": a3},
			},
		},
		"BlockedInOneTargetNextIsRoaming": {
			reason:  "With the only segment with an endpoint blocked in a target, a roaming one carries the anchor there.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(externalIPs()), nodeA2()},
			foreign: []kubev1alpha1.ForeignPeer{{Name: PeerName(testNamespace, testMesh, "a", "a2")}},
			want: want{
				inB: map[string][]string{"a1": with(a1, anchorCIDRs...)},
				inC: map[string][]string{"a1": a1, "a2": with(a2, anchorCIDRs...)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obsB := observation(nodeB1())
			obsB.ForeignPeers = tc.foreign
			in := meshInput([]meshv1alpha1.Cluster{tc.cluster, clusterB(), clusterC()}, map[string]*Observation{
				"a": observation(tc.nodes...),
				"b": obsB,
				"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
			})
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.inB, allowedByLeader(p, "b", "a", "a1", "a2", "a3")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inC, allowedByLeader(p, "c", "a", "a1", "a2", "a3")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in c, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKeepalive(t *testing.T) {
	type want struct {
		inB map[string]int // keepalive of a's Peers in b by leader
		inA map[string]int // keepalive of b's Peers in a by leader
	}
	cases := map[string]struct {
		reason   string
		a, b     []clusterOpt
		nodesA   []kubev1alpha1.ObservedNode
		want     want
		warnings []warning
	}{
		"NoneDeclared": {
			reason: "Without any declared keepalive Peers with an endpoint have none.",
			nodesA: []kubev1alpha1.ObservedNode{nodeA1()},
			want:   want{inB: map[string]int{"a1": 0}, inA: map[string]int{"b1": 0}},
		},
		"MeshWideMaximum": {
			reason: "The largest keepalive of any cluster applies to every Peer in both directions.",
			a:      []clusterOpt{withKeepalive(10)},
			b:      []clusterOpt{withKeepalive(30)},
			nodesA: []kubev1alpha1.ObservedNode{nodeA1()},
			want:   want{inB: map[string]int{"a1": 30}, inA: map[string]int{"b1": 30}},
		},
		"RoamingAtLeast25": {
			reason: "A roaming Peer gets at least 25 s above a lower floor; others keep the floor.",
			a:      []clusterOpt{withKeepalive(10)},
			nodesA: []kubev1alpha1.ObservedNode{nodeA1(externalIPs()), nodeA2()},
			want:   want{inB: map[string]int{"a1": 25, "a2": 10}, inA: map[string]int{"b1": 10}},
		},
		"RoamingAboveFloor": {
			reason: "A floor above 25 s applies to roaming Peers too.",
			b:      []clusterOpt{withKeepalive(40)},
			nodesA: []kubev1alpha1.ObservedNode{nodeA1(externalIPs())},
			want:   want{inB: map[string]int{"a1": 40}, inA: map[string]int{"b1": 40}},
		},
		"LeaderAnnotationRaises": {
			reason: "The leader's kilo.squat.ai/persistent-keepalive raises its own Peer above the floor.",
			a:      []clusterOpt{withKeepalive(10)},
			nodesA: []kubev1alpha1.ObservedNode{nodeA1(nodeKeepalive("60")), nodeA2()},
			want:   want{inB: map[string]int{"a1": 60, "a2": 10}, inA: map[string]int{"b1": 10}},
		},
		"LeaderAnnotationBelowFloor": {
			reason: "A node annotation below the mesh floor does not lower it.",
			a:      []clusterOpt{withKeepalive(10)},
			nodesA: []kubev1alpha1.ObservedNode{nodeA1(nodeKeepalive("5"))},
			want:   want{inB: map[string]int{"a1": 10}, inA: map[string]int{"b1": 10}},
		},
		"LeaderAnnotationBelowRoaming": {
			reason: "A node annotation below 25 s does not lower a roaming Peer's keepalive.",
			nodesA: []kubev1alpha1.ObservedNode{nodeA1(externalIPs(), nodeKeepalive("10"))},
			want:   want{inB: map[string]int{"a1": 25}, inA: map[string]int{"b1": 0}},
		},
		"LeaderAnnotationMalformed": {
			reason:   "A malformed node keepalive is a warning, not a skip: the Peer keeps the floor.",
			a:        []clusterOpt{withKeepalive(10)},
			nodesA:   []kubev1alpha1.ObservedNode{nodeA1(nodeKeepalive("1m"))},
			want:     want{inB: map[string]int{"a1": 10}, inA: map[string]int{"b1": 10}},
			warnings: []warning{{"a", ReasonAnnotationInvalid}},
		},
		"LeaderAnnotationTooLarge": {
			reason:   "A node keepalive beyond 65535 s is malformed.",
			nodesA:   []kubev1alpha1.ObservedNode{nodeA1(nodeKeepalive("70000"))},
			want:     want{inB: map[string]int{"a1": 0}, inA: map[string]int{"b1": 0}},
			warnings: []warning{{"a", ReasonAnnotationInvalid}},
		},
		"MemberAnnotationIgnored": {
			reason: "In a location only the leader's annotation counts.",
			nodesA: []kubev1alpha1.ObservedNode{
				nodeA1(granularity("location"), location("eu")),
				observedNode("a2", location("eu"), podCIDRs("10.1.2.0/24"), nodeKeepalive("90")),
			},
			want: want{inB: map[string]int{"a1": 0}, inA: map[string]int{"b1": 0}},
		},
	}
	keepalives := func(p *Plan, target, source string, leaders ...string) map[string]int {
		out := map[string]int{}
		for _, l := range leaders {
			if peer := peerOf(p, target, source, l); peer.Name != "" {
				out[l] = peer.Spec.PersistentKeepalive
			}
		}
		return out
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{clusterA(tc.a...), clusterB(tc.b...)}, map[string]*Observation{
				"a": observation(tc.nodesA...),
				"b": observation(nodeB1()),
			})
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			got := want{inB: keepalives(p, "b", "a", "a1", "a2"), inA: keepalives(p, "a", "b", "b1")}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nDo(...): -want keepalives, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]skip(nil), skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPlacement(t *testing.T) {
	c1 := leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")
	in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB(), clusterC()}, map[string]*Observation{
		"a": observation(nodeA1(), nodeA2()),
		"b": observation(nodeB1()),
		"c": observation(c1),
	})
	pa1 := wantPeer("a", "a1", 1, ipEndpoint("203.0.113.1", 51820), 0, "10.1.1.0/24", "10.41.0.1/32")
	pa2 := wantPeer("a", "a2", 2, ipEndpoint("203.0.113.2", 51820), 0, "10.1.2.0/24", "10.41.0.2/32")
	pb1 := wantPeer("b", "b1", 101, ipEndpoint("198.51.100.1", 51820), 0, "10.2.1.0/24", "10.42.0.1/32")
	pc1 := wantPeer("c", "c1", 201, ipEndpoint("198.51.100.201", 51820), 0, "10.3.1.0/24", "10.43.0.1/32")
	want := map[string][]kilov1alpha1.Peer{
		"a": {pb1, pc1},
		"b": {pa1, pa2, pc1},
		"c": {pa1, pa2, pb1},
	}
	p, err := Do(in)
	if err != nil {
		t.Fatalf("Do(...): unexpected error: %v", err)
	}
	if diff := cmp.Diff(want, p.Peers); diff != "" {
		t.Errorf("\nEvery segment Peer of every cluster is written into every other cluster, never into its own, sorted by name.\nDo(...): -want, +got:\n%s", diff)
	}
}
