package mesh

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// allowedByLeader maps the leader of each of a's Peers in target to its
// allowedIPs.
func allowedByLeader(p *Plan, target string, leaders ...string) map[string][]string {
	out := map[string][]string{}
	for _, l := range leaders {
		if peer := peerOf(p, target, "a", l); peer.Name != "" {
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
			reason: "The pod CIDR, then the host of kilo.squat.ai/internal-ip, then the WireGuard host route. status.addresses are not routed (Kilo does not route them either), nor a dual-stack node's pod CIDR of the other family.",
			nodes: []kubev1alpha1.ObservedNode{nodeA1(
				podCIDRs("10.1.1.0/24", "fd01:1:0:1::/64"),
				internalIP("192.168.1.11/24"),
				statusInternalIPs("192.168.2.11", "fd02::11"),
			)},
			want: want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.11/32", "10.41.0.1/32"}}},
		},
		"NoNodeCIDRsNoInternalRoute": {
			reason:  "Without declared nodeCIDRs no internal address is routed, and nothing is reported per node.",
			cluster: []clusterOpt{withNodeCIDRs()},
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.1.11/24"))},
			want:    want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}}},
		},
		"InternalIPOutsideNodeCIDRs": {
			reason: "An internal address outside the cluster's nodeCIDRs is not routed: NodeIPOutOfRange.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("172.20.0.5/24"))},
			want: want{
				allowed:  map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodeIPOutOfRange}},
			},
		},
		"ForgedInternalIPOfAnotherMember": {
			reason: "A node annotated with an address of another member (a pod, a leader, an API server there) cannot route it to itself: it is outside its own cluster's nodeCIDRs.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.16.5/32")), nodeA2(internalIP("10.2.1.7/32"))},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPOutOfRange}},
			},
		},
		"ForgedForceInternalIP": {
			reason: "force-internal-ip is node data like internal-ip: the same bound applies.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.1.11/24"), forceInternalIP("192.168.16.1/32"))},
			want: want{
				allowed:  map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodeIPOutOfRange}},
			},
		},
		"InternalIPOfTheOtherFamily": {
			reason: "An IPv6 internal address in an IPv4 mesh is left out silently.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("fd02::11/64"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}}},
		},
		"WireguardHostRouteNotSubnet": {
			reason: "The WireGuard address is routed as /32, never as the /16 written in the annotation.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(wgIP("10.41.7.9/16"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.7.9/32"}}},
		},
		"NodesDoNotAdvertise": {
			reason:    "With advertiseNodeIPs false no internal address is routed.",
			noAdverts: true,
			nodes:     []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.1.11/24"))},
			want:      want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}}},
		},
		"Duplicates": {
			reason: "Duplicates are removed keeping the first: a pod CIDR listed twice.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(podCIDRs("10.1.1.0/24", "10.1.1.0/24"), internalIP("192.168.1.11/24"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.11/32", "10.41.0.1/32"}}},
		},
		"OwnEndpointNotRouted": {
			reason: "A node whose internal address is its own endpoint does not route it, and that is not a conflict.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.1.1/24"), forceEndpoint("192.168.1.1:51820"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}}},
		},
		"OwnDNSEndpointDoesNotHideAddresses": {
			reason: "A DNS endpoint has no address to compare with: the internal address is routed.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(forceEndpoint("a1.example.com:51820"), internalIP("192.168.1.1/24"))},
			want:   want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"}}},
		},
		"EndpointOfAnotherSegment": {
			reason: "An internal address equal to the endpoint of another segment is not routed: NodeIPConflict.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(internalIP("192.168.1.50/24")),
				nodeA2(forceEndpoint("192.168.1.50:6000")),
			},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"EndpointOfAnotherCluster": {
			reason:  "An internal address equal to the endpoint of a segment of another cluster is not routed: NodeIPConflict.",
			cluster: []clusterOpt{withNodeCIDRs("192.168.0.0/20", "198.51.100.0/24")},
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(internalIP("198.51.100.1/24"))},
			want: want{
				allowed:  map[string][]string{"a1": {"10.1.1.0/24", "10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"SharedBySegmentsOfOneCluster": {
			reason: "An internal address advertised by two segments is routed by neither: NodeIPConflict.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(internalIP("192.168.1.50/24")), nodeA2(internalIP("192.168.1.50/24"))},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodeIPConflict}},
			},
		},
		"SharedWithinOneLocation": {
			reason: "Two members of one location with the same address are one segment: the address is routed once.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(location("eu"), internalIP("192.168.1.50/24"), granularity("location")),
				memberNode("a2", "10.1.2.0/24", 2, "192.168.1.50/24", location("eu")),
			},
			want: want{allowed: map[string][]string{"a1": {"10.1.1.0/24", "192.168.1.50/32", "10.1.2.0/24", "10.41.0.1/32"}}},
		},
		"PodCIDRClaimedByTwoSegments": {
			reason: "A pod CIDR that two segments claim (a Node can be created with any) is routed by neither: NodePodCIDRConflict.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.1.128/25"))},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.41.0.1/32"},
					"a2": {"10.41.0.2/32"},
				},
				warnings: []warning{{"a", ReasonNodePodCIDRConflict}},
			},
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
			if diff := cmp.Diff(tc.want.allowed, allowedByLeader(p, "b", "a1", "a2")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLocationIPs(t *testing.T) {
	type want struct {
		allowed  map[string][]string // a's Peers in b by leader
		warnings []warning
	}
	eu := func(opts ...nodeOpt) kubev1alpha1.ObservedNode {
		return nodeA1(append([]nodeOpt{location("eu"), internalIP("192.168.1.1/24")}, opts...)...)
	}
	us := func(opts ...nodeOpt) kubev1alpha1.ObservedNode {
		return nodeA2(append([]nodeOpt{location("us"), internalIP("192.168.2.1/24")}, opts...)...)
	}
	euIPs := []string{"10.1.1.0/24", "192.168.1.1/32"}
	usIPs := []string{"10.1.2.0/24", "192.168.2.1/32"}
	cases := map[string]struct {
		reason string
		a      meshv1alpha1.Cluster
		nodes  []kubev1alpha1.ObservedNode
		want   want
	}{
		"RoutedToTheOwningLocation": {
			reason: "A location's allowed-location-ips inside the declared additionalCIDRs go on its own Peer, after its node's addresses; the anchor keeps the wider CIDR and the most specific prefix wins.",
			a:      clusterA(withAdditional("172.16.0.0/16")),
			nodes:  []kubev1alpha1.ObservedNode{eu(locationIPs("172.16.5.0/24")), us()},
			want: want{allowed: map[string][]string{
				"a1": with(euIPs, "172.16.5.0/24", "10.41.0.1/32", "172.16.0.0/16"),
				"a2": with(usIPs, "10.41.0.2/32"),
			}},
		},
		"EqualToAnAdditionalCIDRMoves": {
			reason: "A range equal to a declared additionalCIDR moves from the anchor to the owning location.",
			a:      clusterA(withAdditional("172.16.0.0/16", "172.17.0.0/16")),
			nodes:  []kubev1alpha1.ObservedNode{eu(), us(locationIPs("172.17.0.0/16"))},
			want: want{allowed: map[string][]string{
				"a1": with(euIPs, "10.41.0.1/32", "172.16.0.0/16"),
				"a2": with(usIPs, "172.17.0.0/16", "10.41.0.2/32"),
			}},
		},
		"OutsideAdditionalCIDRs": {
			reason: "A range outside the declared additionalCIDRs is never routed from node data: AllowedLocationIPOutOfRange.",
			a:      clusterA(withAdditional("172.16.0.0/16")),
			nodes:  []kubev1alpha1.ObservedNode{eu(locationIPs("10.2.0.0/16,172.16.5.0/24")), us()},
			want: want{
				allowed: map[string][]string{
					"a1": with(euIPs, "172.16.5.0/24", "10.41.0.1/32", "172.16.0.0/16"),
					"a2": with(usIPs, "10.41.0.2/32"),
				},
				warnings: []warning{{"a", ReasonAllowedLocationIPOutOfRange}},
			},
		},
		"NoAdditionalCIDRs": {
			reason: "Without additionalCIDRs no location range is routed.",
			a:      clusterA(),
			nodes:  []kubev1alpha1.ObservedNode{eu(locationIPs("172.16.5.0/24")), us()},
			want: want{
				allowed: map[string][]string{
					"a1": with(euIPs, "10.41.0.1/32"),
					"a2": with(usIPs, "10.41.0.2/32"),
				},
				warnings: []warning{{"a", ReasonAllowedLocationIPOutOfRange}},
			},
		},
		"OverlapBetweenLocations": {
			reason: "Ranges of two locations that overlap are routed by neither, as Kilo's own filter does; the anchor still covers them.",
			a:      clusterA(withAdditional("172.16.0.0/16")),
			nodes:  []kubev1alpha1.ObservedNode{eu(locationIPs("172.16.5.0/24")), us(locationIPs("172.16.5.128/25,172.16.9.0/24"))},
			want: want{
				allowed: map[string][]string{
					"a1": with(euIPs, "10.41.0.1/32", "172.16.0.0/16"),
					"a2": with(usIPs, "172.16.9.0/24", "10.41.0.2/32"),
				},
				warnings: []warning{{"a", ReasonAllowedLocationIPConflict}},
			},
		},
		"KiloParsing": {
			reason: "Kilo reads each range as <ip>/<prefix> and skips the rest; the mesh reports them. Host bits are masked.",
			a:      clusterA(withAdditional("172.16.0.0/16")),
			nodes:  []kubev1alpha1.ObservedNode{eu(locationIPs("172.16.5.9/24, 172.16.6.0/24,nope")), us()},
			want: want{
				allowed: map[string][]string{
					"a1": with(euIPs, "172.16.5.0/24", "10.41.0.1/32", "172.16.0.0/16"),
					"a2": with(usIPs, "10.41.0.2/32"),
				},
				warnings: []warning{{"a", ReasonAnnotationInvalid}},
			},
		},
		"MemberOfALocation": {
			reason: "In Location granularity a member's ranges go on its location's Peer too.",
			a:      clusterA(withAdditional("172.16.0.0/16")),
			nodes: []kubev1alpha1.ObservedNode{
				eu(granularity("location")),
				memberNode("a3", "10.1.3.0/24", 3, "192.168.1.3/24", location("eu"), locationIPs("172.16.7.0/24")),
			},
			want: want{allowed: map[string][]string{
				"a1": with(euIPs, "10.1.3.0/24", "192.168.1.3/32", "172.16.7.0/24", "10.41.0.1/32", "172.16.0.0/16"),
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(meshInput([]meshv1alpha1.Cluster{tc.a, clusterB()}, map[string]*Observation{
				"a": observation(tc.nodes...),
				"b": observation(nodeB1()),
			}))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.allowed, allowedByLeader(p, "b", "a1", "a2")); diff != "" {
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
			a1:     nodeA1(internalIP("192.168.9.9/24")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(), memberNode("b2", "10.2.2.0/24", 102, "192.168.9.9/24")},
			want: want{
				inB:      []string{"10.1.1.0/24", "10.41.0.1/32"},
				inC:      []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
				warnings: []warning{{"a", ReasonNodeIPConflict}, {"b", ReasonNodeNoWireguardIP}},
			},
		},
		"StatusAddressOfATargetNodeDoesNotCount": {
			reason: "A target node's status.addresses are not Kilo's internal address: nothing is dropped for them.",
			a1:     nodeA1(internalIP("192.168.9.9/24")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(statusInternalIPs("192.168.9.9"))},
			want: want{
				inB: []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
				inC: []string{"10.1.1.0/24", "192.168.9.9/32", "10.41.0.1/32"},
			},
		},
		"NoOverlapNoDrop": {
			reason: "Addresses the target does not use are routed everywhere.",
			a1:     nodeA1(internalIP("192.168.9.9/24")),
			nodesB: []kubev1alpha1.ObservedNode{nodeB1(internalIP("192.168.16.10/24"))},
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
		"BlockedByNameInOneTarget": {
			reason:  "A segment held back by a Peer of its name in a target passes the anchor to the next one there.",
			cluster: anchored(),
			nodes:   []kubev1alpha1.ObservedNode{nodeA1(), nodeA2()},
			foreign: []kubev1alpha1.ForeignPeer{{Name: PeerName(testNamespace, testMesh, "a", "a1")}},
			want: want{
				inB: map[string][]string{"a2": with(a2, anchorCIDRs...)},
				inC: map[string][]string{"a1": with(a1, anchorCIDRs...), "a2": a2},
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
			if diff := cmp.Diff(tc.want.inB, allowedByLeader(p, "b", "a1", "a2", "a3")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inC, allowedByLeader(p, "c", "a1", "a2", "a3")); diff != "" {
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
			reason: "Without any declared keepalive Peers have none.",
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
				nodeA1(granularity("location"), location("eu"), internalIP("192.168.1.1/24")),
				memberNode("a2", "10.1.2.0/24", 2, "192.168.1.2/24", location("eu"), nodeKeepalive("90")),
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
	pa1 := wantPeer("a", "a1", 1, ipEndpoint("203.0.113.1", 51820), "10.1.1.0/24", "10.41.0.1/32")
	pa2 := wantPeer("a", "a2", 2, ipEndpoint("203.0.113.2", 51820), "10.1.2.0/24", "10.41.0.2/32")
	pb1 := wantPeer("b", "b1", 101, ipEndpoint("198.51.100.1", 51820), "10.2.1.0/24", "10.42.0.1/32")
	pc1 := wantPeer("c", "c1", 201, ipEndpoint("198.51.100.201", 51820), "10.3.1.0/24", "10.43.0.1/32")
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

func TestPodCIDRIncumbency(t *testing.T) {
	type want struct {
		allowed  map[string][]string // a's Peers in b by leader
		skipped  []skip
		warnings []warning
	}
	evil := leaderNode("zz-evil", "10.1.0.0/16", "10.41.0.99/16", 99, "203.0.113.99")
	routes := func(leaders ...string) map[string]map[string]DeliveredPeer {
		out := map[string]DeliveredPeer{}
		pods := map[string]string{"a1": "10.1.1.0/24", "a2": "10.1.2.0/24", "a3": "10.1.3.0/24", "zz-evil": "10.1.0.0/16"}
		for _, l := range leaders {
			out[PeerName(testNamespace, testMesh, "a", l)] = DeliveredPeer{AllowedIPs: []string{pods[l]}}
		}
		return map[string]map[string]DeliveredPeer{"b": out}
	}
	cases := map[string]struct {
		reason    string
		nodes     []kubev1alpha1.ObservedNode
		location  bool
		delivered map[string]map[string]DeliveredPeer
		want      want
	}{
		"NewcomerCannotBlankTheMember": {
			reason: "A new Node claiming the member's whole pod range overlaps a1, a2 and a3, whose Peers already route their pod CIDRs: the newcomer is skipped, the others keep their routes.",
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(), nodeA2(), leaderNode("a3", "10.1.3.0/24", "10.41.0.3/16", 3, "203.0.113.3"), evil,
			},
			delivered: routes("a1", "a2", "a3"),
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "10.41.0.2/32"},
				},
				skipped:  []skip{{"zz-evil", ReasonNodePodCIDRTaken}},
				warnings: []warning{{"a", ReasonNodePodCIDRTaken}},
			},
		},
		"IncumbentNewcomerRoutesTheWiderPrefix": {
			reason:    "Whoever routed first keeps it, whatever the prefix length: a /16 delivered before a1 appeared keeps it, and a1 is the newcomer.",
			nodes:     []kubev1alpha1.ObservedNode{nodeA1(), evil},
			delivered: routes("zz-evil"),
			want: want{
				allowed:  map[string][]string{},
				skipped:  []skip{{"a1", ReasonNodePodCIDRTaken}},
				warnings: []warning{{"a", ReasonNodePodCIDRTaken}},
			},
		},
		"NoIncumbentBothWithheld": {
			reason: "On a mesh that routes neither yet, both overlapping pod CIDRs are withheld (NodePodCIDRConflict), as before.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), evil},
			want: want{
				allowed:  map[string][]string{"a1": {"10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodePodCIDRConflict}},
			},
		},
		"OtherRoutesDoNotMakeAnIncumbent": {
			reason: "A delivered Peer that routes another prefix (its WireGuard address only) is no incumbent of the pod CIDR.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), evil},
			delivered: map[string]map[string]DeliveredPeer{"b": {
				PeerName(testNamespace, testMesh, "a", "a1"): {AllowedIPs: []string{"10.41.0.1/32"}},
			}},
			want: want{
				allowed:  map[string][]string{"a1": {"10.41.0.1/32"}},
				warnings: []warning{{"a", ReasonNodePodCIDRConflict}},
			},
		},
		"LocationMemberNewcomerLeavesItsSegment": {
			reason:   "In Location granularity a member node of another location that claims the incumbent's pod CIDR is skipped; its location goes on without it.",
			location: true,
			nodes: []kubev1alpha1.ObservedNode{
				nodeA1(location("eu"), internalIP("192.168.1.1/24")),
				nodeA2(location("us"), internalIP("192.168.1.2/24"), wgIP("10.41.0.2/16")),
				memberNode("a9", "10.1.1.128/25", 9, "192.168.1.9/24", location("us")),
			},
			delivered: map[string]map[string]DeliveredPeer{"b": {
				PeerName(testNamespace, testMesh, "a", "a1"): {AllowedIPs: []string{"10.1.1.0/24"}},
			}},
			want: want{
				allowed: map[string][]string{
					"a1": {"10.1.1.0/24", "192.168.1.1/32", "10.41.0.1/32"},
					"a2": {"10.1.2.0/24", "192.168.1.2/32", "10.41.0.2/32"},
				},
				skipped:  []skip{{"a9", ReasonNodePodCIDRTaken}},
				warnings: []warning{{"a", ReasonNodePodCIDRTaken}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
				"a": observation(tc.nodes...),
				"b": observation(nodeB1()),
			})
			if tc.location {
				in.Spec.Granularity = meshv1alpha1.GranularityLocation
			}
			in.Delivered = tc.delivered
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.allowed, allowedByLeader(p, "b", "a1", "a2"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nDo(...): -want allowedIPs of a's Peers in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.skipped, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped in a, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, sortedWarnings(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
