package mesh

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

func TestEndpointChain(t *testing.T) {
	type want struct {
		endpoint  *kilov1alpha1.PeerEndpoint
		keepalive int
	}
	cases := map[string]struct {
		reason  string
		cluster []clusterOpt
		node    kubev1alpha1.ObservedNode
		want    want
	}{
		"ClustermeshEndpointFirst": {
			reason: "kilo.squat.ai/clustermesh-endpoint wins over every other source.",
			node: nodeA1(clustermeshEndpoint("mesh.example.com:4000"), forceEndpoint("203.0.113.8:51820"),
				kiloEndpoint("203.0.113.9:51820")),
			want: want{endpoint: dnsEndpoint("mesh.example.com", 4000)},
		},
		"ForceEndpointSecond": {
			reason: "kilo.squat.ai/force-endpoint wins over the ExternalIP and Kilo's endpoint.",
			node:   nodeA1(forceEndpoint("203.0.113.8:5000"), kiloEndpoint("203.0.113.9:51820")),
			want:   want{endpoint: ipEndpoint("203.0.113.8", 5000)},
		},
		"ForceEndpointIPv6": {
			reason: "An IPv6 force-endpoint is written in brackets and rendered as a bare address.",
			node:   nodeA1(forceEndpoint("[2001:db8::8]:5000")),
			want:   want{endpoint: ipEndpoint("2001:db8::8", 5000)},
		},
		"ForceEndpointDNS": {
			reason: "A DNS name goes to dnsOrIP.dns.",
			node:   nodeA1(forceEndpoint("a1.nodes.example.com:51820")),
			want:   want{endpoint: dnsEndpoint("a1.nodes.example.com", 51820)},
		},
		"ExternalIPThird": {
			reason: "Without user endpoints the ExternalIP is used with the cluster's wireguardPort, before Kilo's endpoint.",
			node:   nodeA1(kiloEndpoint("203.0.113.9:51820")),
			want:   want{endpoint: ipEndpoint("203.0.113.1", 51820)},
		},
		"ExternalIPClusterPort": {
			reason:  "The port of an ExternalIP endpoint is the source cluster's wireguardPort.",
			cluster: []clusterOpt{withPort(51999)},
			node:    nodeA1(),
			want:    want{endpoint: ipEndpoint("203.0.113.1", 51999)},
		},
		"ExternalIPv4First": {
			reason: "The first IPv4 ExternalIP wins over an IPv6 one listed before it.",
			node:   nodeA1(externalIPs("2001:db8::1", "203.0.113.11", "203.0.113.12")),
			want:   want{endpoint: ipEndpoint("203.0.113.11", 51820)},
		},
		"ExternalIPv6Only": {
			reason: "Without an IPv4 ExternalIP the first IPv6 one is used.",
			node:   nodeA1(externalIPs("2001:db8::1", "2001:db8::2")),
			want:   want{endpoint: ipEndpoint("2001:db8::1", 51820)},
		},
		"KiloEndpointFourth": {
			reason: "Without an ExternalIP the endpoint Kilo detected is used.",
			node:   nodeA1(externalIPs(), kiloEndpoint("[2001:db8::9]:51821")),
			want:   want{endpoint: ipEndpoint("2001:db8::9", 51821)},
		},
		"KiloEndpointDNS": {
			reason: "Kilo's endpoint may be a DNS name.",
			node:   nodeA1(externalIPs(), kiloEndpoint("a1.example.org:51820")),
			want:   want{endpoint: dnsEndpoint("a1.example.org", 51820)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{clusterA(tc.cluster...), clusterB()}, map[string]*Observation{
				"a": observation(tc.node),
				"b": observation(nodeB1()),
			})
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if len(p.Peers["b"]) != 1 {
				t.Fatalf("\n%s\nDo(...): want 1 Peer in b, got %d; skipped %v", tc.reason, len(p.Peers["b"]), skipsOf(p, "a"))
			}
			got := p.Peers["b"][0].Spec
			if diff := cmp.Diff(tc.want, want{endpoint: got.Endpoint, keepalive: got.PersistentKeepalive}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nDo(...): -want endpoint, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestEndpointReadiness pins which endpoints make a node count for Kilo
// (Node.Ready: force-endpoint, else endpoint, as Kilo parses them) and which
// the mesh's stricter chain then refuses for other clusters.
func TestEndpointReadiness(t *testing.T) {
	cases := map[string]struct {
		reason string
		node   kubev1alpha1.ObservedNode
		want   []skip
	}{
		"NoEndpointAtAll": {
			reason: "A node with neither force-endpoint nor endpoint is out of Kilo's topology: NodeNotReady, although it has an ExternalIP.",
			node:   nodeA1(kiloEndpoint("")),
			want:   []skip{{"a1", ReasonNodeNotReady}},
		},
		"ClustermeshEndpointIsNotKilos": {
			reason: "Kilo ignores this project's clustermesh-endpoint: without an endpoint of Kilo's own the node is NodeNotReady.",
			node:   nodeA1(kiloEndpoint(""), clustermeshEndpoint("203.0.113.8:51820")),
			want:   []skip{{"a1", ReasonNodeNotReady}},
		},
		"ForceEndpointIsEnough": {
			reason: "A force-endpoint makes the node ready without an endpoint annotation.",
			node:   nodeA1(kiloEndpoint(""), forceEndpoint("203.0.113.8:51820")),
		},
		"UnparseableEndpoint": {
			reason: "An endpoint Kilo cannot parse counts as none.",
			node:   nodeA1(kiloEndpoint("203.0.113.1")),
			want:   []skip{{"a1", ReasonNodeNotReady}},
		},
		"KiloAcceptsLeadingZerosInPorts": {
			reason: "Kilo reads the port with strconv.ParseUint: 051820 is a port to Kilo, so the node is ready (the ExternalIP is used).",
			node:   nodeA1(kiloEndpoint("203.0.113.1:051820")),
		},
		"StaleHeartbeat": {
			reason: "A node whose Kilo heartbeat is stale is NodeNotReady.",
			node:   nodeA1(stale()),
			want:   []skip{{"a1", ReasonNodeNotReady}},
		},
		"LoopbackForceEndpoint": {
			reason: "Kilo accepts a loopback force-endpoint, but no other cluster can reach it: NodeEndpointInvalid.",
			node:   nodeA1(forceEndpoint("127.0.0.1:51820")),
			want:   []skip{{"a1", ReasonNodeEndpointInvalid}},
		},
		"LinkLocalClustermeshEndpoint": {
			reason: "A link-local endpoint cannot be reached from another cluster: NodeEndpointInvalid.",
			node:   nodeA1(clustermeshEndpoint("169.254.1.1:51820")),
			want:   []skip{{"a1", ReasonNodeEndpointInvalid}},
		},
		"UnspecifiedExternalIPPassedOver": {
			reason: "An ExternalIP that cannot be reached is passed over; Kilo's endpoint follows in the chain.",
			node:   nodeA1(externalIPs("0.0.0.0", "127.0.0.1")),
		},
		"MulticastKiloEndpoint": {
			reason: "Kilo's own endpoint, when it is the one the chain reaches, is refused if it cannot be reached.",
			node:   nodeA1(externalIPs(), kiloEndpoint("224.0.0.1:51820")),
			want:   []skip{{"a1", ReasonNodeEndpointInvalid}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Do(twoClusters(meshv1alpha1.GranularityNode, tc.node))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
			if got, want := len(p.Peers["b"]), 1-len(tc.want); got != want {
				t.Errorf("\n%s\nDo(...): want %d Peers in b, got %d", tc.reason, want, got)
			}
		})
	}
}

// discoveredJSON is kilo.squat.ai/discovered-endpoints with one entry.
func discoveredJSON(key, ip string, port int) string {
	return fmt.Sprintf(`{%q:{"IP":%q,"Port":%d,"Zone":""}}`, key, ip, port)
}

func TestDiscoveredEndpoints(t *testing.T) {
	type want struct {
		inB, inC kilov1alpha1.Peer // the Peer of a1
		warnings []warning
	}
	own := ipEndpoint("203.0.113.1", 51820)
	cases := map[string]struct {
		reason string
		a1     kubev1alpha1.ObservedNode
		b1     kubev1alpha1.ObservedNode
		// bNodes are more nodes of b, in Location granularity.
		bNodes      []kubev1alpha1.ObservedNode
		noKeepalive bool
		want        want
	}{
		"UsedPerTarget": {
			reason: "A target that discovered an endpoint of a segment's key dials it; other targets keep the segment's own.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"IPv6": {
			reason: "A discovered IPv6 endpoint is rendered as a bare address.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "2001:db8::77", 40000))),
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("2001:db8::77", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"OtherSpellingOfKey": {
			reason: "Discovered endpoints are matched by key bytes, not by spelling.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(otherSpelling(testKey(1)), "192.0.2.7", 40000))),
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"Loopback": {
			reason: "A loopback discovered address is ignored.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "127.0.0.1", 40000))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"LinkLocalIPv4": {
			reason: "A link-local IPv4 discovered address is ignored.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "169.254.10.1", 40000))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"LinkLocalIPv6": {
			reason: "A link-local IPv6 discovered address is ignored.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "fe80::1", 40000))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"PortZero": {
			reason: "A discovered endpoint with port 0 is ignored.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 0))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"OtherKey": {
			reason: "An endpoint discovered for another key does not change the Peer.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(9), "192.0.2.7", 40000))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"DiscoveredBySourceItself": {
			reason: "Only the target's nodes count: what the source's own nodes discovered is not used.",
			a1:     nodeA1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			b1:     nodeB1(),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"DiscoveredAddressNotRouted": {
			reason: "An internal address equal to the discovered endpoint a target dials is dropped from that target's Peer, silently.",
			a1:     nodeA1(internalIP("192.168.1.7/24")),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.168.1.7", 40000))),
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.168.1.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "192.168.1.7/32", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"OwnEndpointNotRoutedWhereDiscovered": {
			reason: "The segment's own endpoint address stays out of its Peer in a target that dials a discovered endpoint instead.",
			a1:     nodeA1(internalIP("192.168.1.1/24"), forceEndpoint("192.168.1.1:51820")),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, ipEndpoint("192.168.1.1", 51820), "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"NoKeepaliveNoRoaming": {
			reason:      "Without a keepalive on the Peer Kilo dials the Peer's own endpoint and learns none: a discovered one is not used.",
			a1:          nodeA1(),
			b1:          nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			noKeepalive: true,
			want: want{
				inB:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"NonLeaderOfTargetNotBelieved": {
			reason: "A node of b that does not lead its location runs no WireGuard towards a1: what its annotation says is not used, even when it sorts first.",
			a1:     nodeA1(),
			b1:     nodeB1(location("eu"), internalIP("192.168.16.1/24"), granularity("location"), volunteer()),
			bNodes: []kubev1alpha1.ObservedNode{
				memberNode("b0", "10.2.0.0/24", 100, "192.168.16.10/24", location("eu"), discovered(discoveredJSON(testKey(1), "192.0.2.66", 9))),
			},
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"LeaderOfTargetBelieved": {
			reason: "The leader of b's location learned a1's address: it is used, whatever a member of its location says.",
			a1:     nodeA1(),
			b1:     nodeB1(location("eu"), internalIP("192.168.16.1/24"), granularity("location"), volunteer(), discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			bNodes: []kubev1alpha1.ObservedNode{
				memberNode("b0", "10.2.0.0/24", 100, "192.168.16.10/24", location("eu"), discovered(discoveredJSON(testKey(1), "192.0.2.66", 9))),
			},
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"LeadersAgree": {
			reason: "Two leaders of b that recorded the same endpoint of a1's key agree: it is used.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			bNodes: []kubev1alpha1.ObservedNode{
				leaderNode("b2", "10.2.2.0/24", "10.42.0.2/16", 102, "198.51.100.2", discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			},
			want: want{
				inB:      wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"a", ReasonNATWithoutKeepalive}},
			},
		},
		"LeadersDisagree": {
			reason: "Two leaders of b recorded different endpoints of a1's key: each is its node owner's word, and neither is taken over the other; the Peer keeps its own endpoint, and b is warned.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			bNodes: []kubev1alpha1.ObservedNode{
				leaderNode("b2", "10.2.2.0/24", "10.42.0.2/16", 102, "198.51.100.2", discovered(discoveredJSON(testKey(1), "192.0.2.66", 9))),
			},
			want: want{
				inB:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"b", ReasonDiscoveredEndpointsDisagree}},
			},
		},
		"NATWithKeepalive": {
			reason: "A leader reached through NAT that sends keepalives (its own kilo.squat.ai/persistent-keepalive) is not reported.",
			a1:     nodeA1(nodeKeepalive("25")),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			want: want{
				inB: wantPeer("a", "a1", 1, ipEndpoint("192.0.2.7", 40000), "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"LearnedItsOwnEndpoint": {
			reason: "A target that learned the segment's own endpoint does not say it is behind NAT.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "203.0.113.1", 51820))),
			want: want{
				inB: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC: wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
			},
		},
		"MalformedJSON": {
			reason: "Malformed discovered-endpoints are not used and are reported on the cluster whose node carries them.",
			a1:     nodeA1(),
			b1:     nodeB1(discovered(`{"broken"`)),
			want: want{
				inB:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				inC:      wantPeer("a", "a1", 1, own, "10.1.1.0/24", "10.41.0.1/32"),
				warnings: []warning{{"b", ReasonAnnotationInvalid}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := clusterA(withKeepalive(25))
			if tc.noKeepalive {
				a = clusterA()
			}
			in := meshInput([]meshv1alpha1.Cluster{a, clusterB(), clusterC()}, map[string]*Observation{
				"a": observation(tc.a1),
				"b": observation(append([]kubev1alpha1.ObservedNode{tc.b1}, tc.bNodes...)...),
				"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
			})
			if !tc.noKeepalive {
				tc.want.inB.Spec.PersistentKeepalive, tc.want.inC.Spec.PersistentKeepalive = 25, 25
			}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.inB, peerOf(p, "b", "a", "a1")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peer of a1 in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inC, peerOf(p, "c", "a", "a1")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peer of a1 in c, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.warnings, warningsOf(p)); diff != "" {
				t.Errorf("\n%s\nDo(...): -want warnings, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// peerOf is the Peer of the segment of source led by leader in target, or
// a zero Peer.
func peerOf(p *Plan, target, source, leader string) kilov1alpha1.Peer {
	name := PeerName(testNamespace, testMesh, source, leader)
	for _, peer := range p.Peers[target] {
		if peer.Name == name {
			return peer
		}
	}
	return kilov1alpha1.Peer{}
}

// TestHandshakes pins the evidence a member's status gives of the data
// plane: how many Peers written into it its leaders recorded a handshake
// with, among those Kilo would record (with a keepalive).
func TestHandshakes(t *testing.T) {
	cases := map[string]struct {
		reason    string
		keepalive int32
		b1        kubev1alpha1.ObservedNode
		bNodes    []kubev1alpha1.ObservedNode
		want      *meshv1alpha1.Handshakes
	}{
		"OneOfTwo": {
			reason:    "b1 recorded a handshake with a1, not with c1: one of the two Peers in b.",
			keepalive: 25,
			b1:        nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			want:      &meshv1alpha1.Handshakes{Seen: 1, Peers: 2},
		},
		"Disputed": {
			reason:    "Two leaders of b recorded a handshake with a1 at different endpoints: the endpoint is disputed, the handshake each claims is counted, once.",
			keepalive: 25,
			b1:        nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			bNodes:    []kubev1alpha1.ObservedNode{leaderNode("b2", "10.2.2.0/24", "10.42.0.2/16", 102, "198.51.100.2", discovered(discoveredJSON(testKey(1), "192.0.2.66", 9)))},
			want:      &meshv1alpha1.Handshakes{Seen: 1, Peers: 2},
		},
		"NoRecord": {
			reason:    "A member whose leaders recorded nothing says nothing.",
			keepalive: 25,
			b1:        nodeB1(),
		},
		"NoKeepalive": {
			reason: "Peers without a keepalive are never recorded by Kilo, and are not counted.",
			b1:     nodeB1(discovered(discoveredJSON(testKey(1), "192.0.2.7", 40000))),
			want:   &meshv1alpha1.Handshakes{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := clusterA()
			if tc.keepalive > 0 {
				a = clusterA(withKeepalive(tc.keepalive))
			}
			p, err := Do(meshInput([]meshv1alpha1.Cluster{a, clusterB(), clusterC()}, map[string]*Observation{
				"a": observation(nodeA1()),
				"b": observation(append([]kubev1alpha1.ObservedNode{tc.b1}, tc.bNodes...)...),
				"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201")),
			}))
			if err != nil {
				t.Fatalf("\n%s\nDo(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, statusOf(p, "b").Handshakes); diff != "" {
				t.Errorf("\n%s\nDo(...): -want handshakes in b, +got:\n%s", tc.reason, diff)
			}
			if h := statusOf(p, "c").Handshakes; h != nil {
				t.Errorf("\n%s\nDo(...): c recorded nothing, but its status says %+v", tc.reason, h)
			}
		})
	}
}
