package mesh

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// a1 is the node of cluster a that passes every check; the cases below add
// a2 with one problem next to it.
func nodeA1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	return leaderNode("a1", "10.1.1.0/24", "10.41.0.1/16", 1, "203.0.113.1", opts...)
}

func nodeA2(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	return leaderNode("a2", "10.1.2.0/24", "10.41.0.2/16", 2, "203.0.113.2", opts...)
}

// TestNodeChecks runs the checks of §3 on a node a2 of cluster a (podCIDRs
// 10.1.0.0/16, wireguardCIDR 10.41.0.0/16) in Node granularity.
func TestNodeChecks(t *testing.T) {
	type want struct {
		skipped []skip
		leaders []string // leaders of a's Peers written into b
	}
	cases := map[string]struct {
		reason string
		nodes  []kubev1alpha1.ObservedNode
		want   want
	}{
		"AllValid": {
			reason: "Nodes that pass every check each become a Peer and none is skipped.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2()},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"NoPodCIDR": {
			reason: "A node without spec.podCIDRs is skipped with NodeNoPodCIDR.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs())},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoPodCIDR}}, leaders: []string{"a1"}},
		},
		"UnparseablePodCIDR": {
			reason: "A node whose pod CIDR does not parse is skipped with NodeNoPodCIDR.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.2.0"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoPodCIDR}}, leaders: []string{"a1"}},
		},
		"OneOfTwoPodCIDRsUnparseable": {
			reason: "A node with one good and one unparseable pod CIDR is skipped with NodeNoPodCIDR.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.2.0/24", "fd00::/abc"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoPodCIDR}}, leaders: []string{"a1"}},
		},
		"PodCIDROutOfRange": {
			reason: "A pod CIDR outside the cluster's podCIDRs skips the node with NodePodCIDROutOfRange.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.9.2.0/24"))},
			want:   want{skipped: []skip{{"a2", ReasonNodePodCIDROutOfRange}}, leaders: []string{"a1"}},
		},
		"PodCIDRLargerThanCluster": {
			reason: "A pod CIDR that contains the cluster's podCIDRs is not wholly inside them.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.0.0.0/8"))},
			want:   want{skipped: []skip{{"a2", ReasonNodePodCIDROutOfRange}}, leaders: []string{"a1"}},
		},
		"PodCIDRPartlyInside": {
			reason: "A pod CIDR whose network starts inside the cluster's podCIDRs but is larger is out of range.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.0.0/15"))},
			want:   want{skipped: []skip{{"a2", ReasonNodePodCIDROutOfRange}}, leaders: []string{"a1"}},
		},
		"DualStackOtherFamilyLeftOut": {
			reason: "A dual-stack node's pod CIDR of the other family is left out, not checked: Kilo runs one family.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.2.0/24", "fd09:0:0:2::/64"))},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"OnlyOtherFamilyPodCIDR": {
			reason: "A node whose only pod CIDR is of the other family has none Kilo can use: NodeNoPodCIDR.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("fd01:0:0:2::/64"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoPodCIDR}}, leaders: []string{"a1"}},
		},
		"DualStackFirstOutOfRange": {
			reason: "A bad IPv4 pod CIDR skips a dual-stack node in an IPv4 mesh.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.9.2.0/24", "fd01:0:0:2::/64"))},
			want:   want{skipped: []skip{{"a2", ReasonNodePodCIDROutOfRange}}, leaders: []string{"a1"}},
		},
		"DualStackInRange": {
			reason: "A dual-stack node whose pod CIDRs are each inside one of the cluster's podCIDRs passes.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(podCIDRs("10.1.2.0/24", "fd01:0:0:2::/64"))},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"PodCIDREqualsCluster": {
			reason: "A pod CIDR equal to the cluster's is wholly inside it.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(podCIDRs("10.1.0.0/16"))},
			want:   want{leaders: []string{"a1"}},
		},
		"NoWireguardIP": {
			reason: "A node without kilo.squat.ai/wireguard-ip is skipped with NodeNoWireguardIP.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP(""))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoWireguardIP}}, leaders: []string{"a1"}},
		},
		"NoKiloAnnotationsAtAll": {
			reason: "A node Kilo never ran on (no Kilo annotation) is skipped with NodeNoWireguardIP, the first check it fails after its pod CIDRs pass.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), observedNode("a2", podCIDRs("10.1.2.0/24"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoWireguardIP}}, leaders: []string{"a1"}},
		},
		"WireguardIPWithoutPrefix": {
			reason: "A wireguard-ip that is not <ip>/<prefix> is WGIPInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.41.0.2"))},
			want:   want{skipped: []skip{{"a2", ReasonWGIPInvalid}}, leaders: []string{"a1"}},
		},
		"WireguardIPBadPrefix": {
			reason: "A wireguard-ip with a prefix longer than the address is WGIPInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.41.0.2/33"))},
			want:   want{skipped: []skip{{"a2", ReasonWGIPInvalid}}, leaders: []string{"a1"}},
		},
		"WireguardIPGarbage": {
			reason: "A wireguard-ip that is no address is WGIPInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("kilo/16"))},
			want:   want{skipped: []skip{{"a2", ReasonWGIPInvalid}}, leaders: []string{"a1"}},
		},
		"WireguardIPOutOfRange": {
			reason: "A wireguard-ip whose host is outside wireguardCIDR is WGIPOutOfRange.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.42.0.2/16"))},
			want:   want{skipped: []skip{{"a2", ReasonWGIPOutOfRange}}, leaders: []string{"a1"}},
		},
		"WireguardIPOutOfRangeWithWidePrefix": {
			reason: "Only the host address counts: a prefix that would contain wireguardCIDR does not bring the host into range.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.42.0.2/8"))},
			want:   want{skipped: []skip{{"a2", ReasonWGIPOutOfRange}}, leaders: []string{"a1"}},
		},
		"WireguardIPPrefixWiderThanCIDR": {
			reason: "A host inside wireguardCIDR is in range whatever prefix is written after it.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.41.0.2/8"))},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"WireguardIPHostPrefix": {
			reason: "Forks that write <ip>/32 are accepted.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(wgIP("10.41.0.2/32"))},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"WireguardIPDuplicate": {
			reason: "Of two nodes with the same WireGuard host address the one whose name sorts first keeps it, whatever the list order.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA2(wgIP("10.41.0.1/32")), nodeA1()},
			want:   want{skipped: []skip{{"a2", ReasonWGIPDuplicate}}, leaders: []string{"a1"}},
		},
		"WireguardIPDuplicateLosesToInvalidKey": {
			reason: "The WireGuard IP check comes before the key checks: the first node by name keeps the address even though Kilo does not count it.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(pubKey("bad")), nodeA2(wgIP("10.41.0.1/16"))},
			want:   want{skipped: []skip{{"a1", ReasonNodeKeyInvalid}}, leaders: []string{"a2"}},
		},
		"WireguardIPDuplicateIgnoresSkipped": {
			reason: "A node skipped before the WireGuard IP checks does not hold its address against others.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(podCIDRs()), nodeA2(wgIP("10.41.0.1/16"))},
			want:   want{skipped: []skip{{"a1", ReasonNodeNoPodCIDR}}, leaders: []string{"a2"}},
		},
		"NoPublicKey": {
			reason: "A node without kilo.squat.ai/key is skipped with NodeNoPublicKey.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(""))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNoPublicKey}}, leaders: []string{"a1"}},
		},
		"KeyNotBase64": {
			reason: "A key that is not base64 is NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey("this is not a key"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"KeyTooShort": {
			reason: "Base64 of 31 bytes is NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(base64.StdEncoding.EncodeToString(make([]byte, 31))))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"KeyTooLong": {
			reason: "Base64 of 33 bytes is NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(base64.StdEncoding.EncodeToString(make([]byte, 33))))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"KeyURLEncoding": {
			reason: "URL-safe base64 is not standard base64: NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xfb", 32)))))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"KeyWithoutPadding": {
			reason: "A key without its padding is not standard base64: NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(strings.TrimSuffix(testKey(2), "=")))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"KeyDuplicateInCluster": {
			reason: "Two nodes of a cluster with one key, neither of them delivered: both are skipped, neither wins by name.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA2(keyN(1)), nodeA1()},
			want:   want{skipped: []skip{{"a1", ReasonNodeKeyDuplicate}, {"a2", ReasonNodeKeyDuplicate}}},
		},
		"KeyDuplicateOtherSpelling": {
			reason: "Two spellings of one key are one key: NodeKeyDuplicate.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(pubKey(otherSpelling(testKey(1))))},
			want:   want{skipped: []skip{{"a1", ReasonNodeKeyDuplicate}, {"a2", ReasonNodeKeyDuplicate}}},
		},
		"KeyAllZero": {
			reason: "Kilo reads the all-zero key as no key: NodeKeyInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(keyN(0))},
			want:   want{skipped: []skip{{"a2", ReasonNodeKeyInvalid}}, leaders: []string{"a1"}},
		},
		"ClustermeshEndpointMalformed": {
			reason: "A malformed clustermesh-endpoint skips the node even though force-endpoint and an ExternalIP are fine: no fall-through.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(clustermeshEndpoint("203.0.113.9"), forceEndpoint("203.0.113.8:51820"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"ForceEndpointMalformed": {
			reason: "A malformed force-endpoint skips the node although it has an ExternalIP.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(forceEndpoint("203.0.113.8:0"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"ForceEndpointPortTooLarge": {
			reason: "Port 65536 is out of range: NodeEndpointInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(forceEndpoint("203.0.113.8:65536"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"ForceEndpointIPv6WithoutBrackets": {
			reason: "An IPv6 host must be in brackets: NodeEndpointInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(forceEndpoint("2001:db8::8:51820"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"ForceEndpointBadDNSName": {
			reason: "A host that is neither an IP nor an RFC 1123 name is NodeEndpointInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(forceEndpoint("bad_host:51820"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"ForceEndpointZone": {
			reason: "An address with a zone cannot be dialled from another cluster: NodeEndpointInvalid.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(forceEndpoint("[fe80::1%eth0]:51820"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeEndpointInvalid}}, leaders: []string{"a1"}},
		},
		"KiloEndpointMalformedNoExternalIP": {
			reason: "Kilo counts no node without an endpoint it can parse: NodeNotReady.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(externalIPs(), kiloEndpoint("203.0.113.2"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNotReady}}, leaders: []string{"a1"}},
		},
		"KiloEndpointMalformedBehindExternalIP": {
			reason: "An ExternalIP does not make a node ready: Kilo needs its own endpoint, and leaves out a node with a malformed one.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(kiloEndpoint("203.0.113.2"))},
			want:   want{skipped: []skip{{"a2", ReasonNodeNotReady}}, leaders: []string{"a1"}},
		},
		"KiloEndpointMalformedBehindForceEndpoint": {
			reason: "A force-endpoint Kilo can parse makes the node ready whatever kilo.squat.ai/endpoint holds.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(kiloEndpoint("junk"), forceEndpoint("203.0.113.8:51820"))},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"NoExternalIPUsesKilosEndpoint": {
			reason: "A node without an ExternalIP or user endpoint uses the endpoint Kilo detected.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(externalIPs())},
			want:   want{leaders: []string{"a1", "a2"}},
		},
		"Stale": {
			reason: "A node whose Kilo heartbeat is stale is out of Kilo's topology: NodeNotReady.",
			nodes:  []kubev1alpha1.ObservedNode{nodeA1(), nodeA2(stale())},
			want:   want{skipped: []skip{{"a2", ReasonNodeNotReady}}, leaders: []string{"a1"}},
		},
		"FirstFailingCheckWins": {
			reason: "Checks run in order: pod CIDRs before the WireGuard IP before the key before Kilo's readiness before the endpoint chain.",
			nodes: []kubev1alpha1.ObservedNode{
				observedNode("a1", podCIDRs("10.9.0.0/24"), wgIP("junk"), pubKey("junk"), forceEndpoint("junk")),
				observedNode("a2", podCIDRs("10.1.2.0/24"), wgIP("10.99.0.1/16"), pubKey("junk"), forceEndpoint("junk")),
				observedNode("a3", podCIDRs("10.1.3.0/24"), wgIP("10.41.0.3/16"), forceEndpoint("junk")),
				observedNode("a4", podCIDRs("10.1.4.0/24"), wgIP("10.41.0.4/16"), pubKey("junk"), forceEndpoint("junk")),
				observedNode("a5", podCIDRs("10.1.5.0/24"), wgIP("10.41.0.5/16"), keyN(5), forceEndpoint("junk"), stale()),
				observedNode("a6", podCIDRs("10.1.6.0/24"), wgIP("10.41.0.6/16"), keyN(6), kiloEndpoint("203.0.113.6:51820"), clustermeshEndpoint("junk")),
				observedNode("a7", wgIP("junk")),
			},
			want: want{skipped: []skip{
				{"a1", ReasonNodePodCIDROutOfRange},
				{"a2", ReasonWGIPOutOfRange},
				{"a3", ReasonNodeNoPublicKey},
				{"a4", ReasonNodeKeyInvalid},
				{"a5", ReasonNodeNotReady},
				{"a6", ReasonNodeEndpointInvalid},
				{"a7", ReasonNodeNoPodCIDR},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := twoClusters(meshv1alpha1.GranularityNode, tc.nodes...)
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.skipped, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(peerNames("a", tc.want.leaders...), namesIn(p, "b")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peers of a in b, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKeyDuplicateAcrossClusters(t *testing.T) {
	type want struct {
		skippedA, skippedB []skip
		inA, inB           []string
	}
	nameA1 := PeerName(testNamespace, testMesh, "a", "a1")
	nameB1 := PeerName(testNamespace, testMesh, "b", "b1")
	delivered := func(target, name, key string) map[string]map[string]DeliveredPeer {
		return map[string]map[string]DeliveredPeer{target: {name: {PublicKey: key}}}
	}
	cases := map[string]struct {
		reason    string
		clusters  []meshv1alpha1.Cluster
		a1Key     string
		b1Key     string
		b1        []nodeOpt
		delivered map[string]map[string]DeliveredPeer
		want      want
	}{
		"NoIncumbentEveryHolderSkipped": {
			reason:   "A key held by nodes of two clusters, neither delivered yet, is trusted to neither: both are skipped, whatever the order of names.",
			clusters: []meshv1alpha1.Cluster{clusterB(), clusterA()},
			a1Key:    testKey(1),
			b1Key:    testKey(1),
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodeKeyDuplicate}},
			},
		},
		"IncumbentKeepsItsKey": {
			reason:    "A node of a (sorting first) that copies the key of b1, whose Peer already carries it, never displaces b1.",
			clusters:  []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:     testKey(101),
			b1Key:     testKey(101),
			delivered: delivered("a", nameB1, testKey(101)),
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				inA:      peerNames("b", "b1"),
			},
		},
		"IncumbentFoundInAnyTarget": {
			reason:    "The delivered Peer may be in any member: a1's Peer in b carries the key, so a1 keeps it against b1.",
			clusters:  []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:     testKey(1),
			b1Key:     otherSpelling(testKey(1)),
			delivered: delivered("b", nameA1, testKey(1)),
			want: want{
				skippedB: []skip{{"b1", ReasonNodeKeyDuplicate}},
				inB:      peerNames("a", "a1"),
			},
		},
		"DeliveredWithAnotherKeyIsNoIncumbent": {
			reason:    "A Peer delivered with another key does not make its node the incumbent of a new key it copied.",
			clusters:  []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:     testKey(101),
			b1Key:     testKey(101),
			delivered: delivered("b", nameA1, testKey(1)),
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodeKeyDuplicate}},
			},
		},
		"TwoIncumbentsNoneTrusted": {
			reason:   "When both holders' Peers carry the key, none is trusted with it.",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:    testKey(1),
			b1Key:    testKey(1),
			delivered: map[string]map[string]DeliveredPeer{
				"a": {nameB1: {PublicKey: testKey(1)}},
				"b": {nameA1: {PublicKey: testKey(1)}},
			},
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodeKeyDuplicate}},
			},
		},
		"CopyHeldByNodeWithoutWireguardIPYet": {
			reason:   "b1 holds the key but waits for its WireGuard IP: it still counts as a holder, so a1 is not trusted with the key and is not delivered (it would become the incumbent and displace b1 once b1 is ready).",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:    testKey(1),
			b1Key:    testKey(1),
			b1:       []nodeOpt{wgIP("")},
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodeNoWireguardIP}},
			},
		},
		"CopyHeldByNodeOutOfRange": {
			reason:   "A holder skipped for a pod CIDR out of range still holds the key.",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:    testKey(1),
			b1Key:    testKey(1),
			b1:       []nodeOpt{podCIDRs("10.9.0.0/24")},
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodePodCIDROutOfRange}},
			},
		},
		"CopyHeldByNodeKiloLeavesOut": {
			reason:   "A holder Kilo leaves out (stale heartbeat) still holds the key: it is a Peer identity as soon as it checks in (the duplicate is the check it fails first).",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:    testKey(1),
			b1Key:    testKey(1),
			b1:       []nodeOpt{stale()},
			want: want{
				skippedA: []skip{{"a1", ReasonNodeKeyDuplicate}},
				skippedB: []skip{{"b1", ReasonNodeKeyDuplicate}},
			},
		},
		"IncumbentKeepsItAgainstUnreadyCopy": {
			reason:    "a1, whose Peer already carries the key, keeps it against a node that copies it and is not ready yet.",
			clusters:  []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:     testKey(1),
			b1Key:     testKey(1),
			b1:        []nodeOpt{wgIP("")},
			delivered: delivered("b", nameA1, testKey(1)),
			want: want{
				skippedB: []skip{{"b1", ReasonNodeNoWireguardIP}},
				inB:      peerNames("a", "a1"),
			},
		},
		"DistinctKeys": {
			reason:   "Distinct keys are not duplicates.",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()},
			a1Key:    testKey(1),
			b1Key:    testKey(101),
			want: want{
				inA: peerNames("b", "b1"),
				inB: peerNames("a", "a1"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput(tc.clusters, map[string]*Observation{
				"a": observation(nodeA1(pubKey(tc.a1Key))),
				"b": observation(nodeB1(append([]nodeOpt{pubKey(tc.b1Key)}, tc.b1...)...)),
			})
			in.Delivered = tc.delivered
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.skippedA, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped in a, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.skippedB, skipsOf(p, "b")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped in b, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inA, namesIn(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peers in a, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.inB, namesIn(p, "b")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want Peers in b, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	cases := map[string]struct {
		reason string
		node   kubev1alpha1.ObservedNode
		want   bool
	}{
		"NodeNoPodCIDR":         {reason: "A missing pod CIDR clears once the node is allocated one.", node: nodeA2(podCIDRs()), want: true},
		"NodePodCIDROutOfRange": {reason: "A pod CIDR out of range is a configuration error.", node: nodeA2(podCIDRs("10.9.0.0/24")), want: false},
		"NodeNoWireguardIP":     {reason: "A missing WireGuard IP clears once Kilo starts.", node: nodeA2(wgIP("")), want: true},
		"WGIPInvalid":           {reason: "A malformed WireGuard IP is an error.", node: nodeA2(wgIP("x")), want: false},
		"WGIPOutOfRange":        {reason: "A WireGuard IP out of range is an error.", node: nodeA2(wgIP("10.99.0.1/16")), want: false},
		"WGIPDuplicate":         {reason: "A duplicate WireGuard IP is an error.", node: nodeA2(wgIP("10.41.0.1/16")), want: false},
		"NodeNoPublicKey":       {reason: "A missing key clears once Kilo starts.", node: nodeA2(pubKey("")), want: true},
		"NodeKeyInvalid":        {reason: "A malformed key is an error.", node: nodeA2(pubKey("x")), want: false},
		"NodeKeyDuplicate":      {reason: "A duplicate key is an error.", node: nodeA2(keyN(1)), want: false},
		"NodeNotReady":          {reason: "A stale heartbeat clears when Kilo checks in again.", node: nodeA2(stale()), want: true},
		"NodeEndpointInvalid":   {reason: "A malformed endpoint is an error.", node: nodeA2(forceEndpoint("x")), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := twoClusters(meshv1alpha1.GranularityNode, nodeA1(), tc.node)
			// a1's Peer already carries key 1: a2 copying it is the only
			// one skipped.
			in.Delivered = map[string]map[string]DeliveredPeer{"b": {PeerName(testNamespace, testMesh, "a", "a1"): {PublicKey: testKey(1)}}}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff([]skip{{"a2", name}}, skipsOf(p, "a")); diff != "" {
				t.Fatalf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
			if got := Transient(name); got != tc.want {
				t.Errorf("\n%s\nTransient(%q): want %t, got %t", tc.reason, name, tc.want, got)
			}
			if got := len(p.Pending) > 0; got != tc.want {
				t.Errorf("\n%s\nDo(...).Pending: want pending %t, got %q", tc.reason, tc.want, p.Pending)
			}
		})
	}
}

func TestTransientSegmentNoLeader(t *testing.T) {
	cases := map[string]struct {
		reason string
		want   bool
	}{
		ReasonSegmentNoLeader: {reason: "A location without a leader is converging: Kilo elects one.", want: true},
		"NodeIPConflict":      {reason: "Warnings that are not skip reasons are not transient.", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Transient(name); got != tc.want {
				t.Errorf("\n%s\nTransient(%q): want %t, got %t", tc.reason, name, tc.want, got)
			}
		})
	}
}

// TestStaleNodeSettles pins that a node whose Kilo agent stopped for good
// stops holding the mesh back once Kilo itself has dropped it (its next
// resync after the heartbeat went stale), while it is still listed as
// skipped.
func TestStaleNodeSettles(t *testing.T) {
	// The plan's time is the inventory's: since is a heartbeat that stopped
	// so long ago that the inventory says the node has been stale for d.
	now := observedAt.Time
	since := func(d time.Duration) nodeOpt {
		return func(n *nodefixture.Node) { *n = n.Seen(now.Add(-d - nodefixture.StaleAfter)) }
	}
	cases := map[string]struct {
		reason      string
		a2          nodeOpt
		now         time.Time
		wantReason  string
		wantPending bool
	}{
		"JustStale": {
			reason: "A heartbeat stale for less than Kilo's resync may come back: the mesh is converging.",
			a2:     since(20 * time.Second), now: now,
			wantReason: ReasonNodeNotReady, wantPending: true,
		},
		"LongStale": {
			reason: "A heartbeat stale for longer than Kilo's resync: Kilo has dropped the node, the mesh has converged without it.",
			a2:     since(5 * time.Minute), now: now,
			wantReason: ReasonNodeHeartbeatLost,
		},
		"StaleSinceUnknown": {
			reason: "An inventory that does not say since when a node is stale keeps it transient.",
			a2:     stale(), now: now,
			wantReason: ReasonNodeNotReady, wantPending: true,
		},
		"DryRun": {
			reason:     "Without a time (a dry run) no stale node is old.",
			a2:         since(5 * time.Minute),
			wantReason: ReasonNodeNotReady, wantPending: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := twoClusters(meshv1alpha1.GranularityNode, nodeA1(), nodeA2(tc.a2))
			in.Now = tc.now
			p, err := Do(in)
			if err != nil {
				t.Fatalf("\n%s\nDo(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff([]skip{{"a2", tc.wantReason}}, skipsOf(p, "a")); diff != "" {
				t.Errorf("\n%s\nDo(...): -want skipped, +got:\n%s", tc.reason, diff)
			}
			if got := len(p.Pending) > 0; got != tc.wantPending {
				t.Errorf("\n%s\nDo(...): pending = %t (%q), want %t", tc.reason, got, p.Pending, tc.wantPending)
			}
		})
	}
}
