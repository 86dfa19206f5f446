package mesh

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// An anchor CIDR equal to a route already in the Peer was listed twice
// (MESH-SPEC §6: duplicates removed keeping the first).
func TestAnchorSkipsRoutedCIDR(t *testing.T) {
	in := meshInput([]meshv1alpha1.Cluster{clusterA(withAdditional("172.16.50.7/32")), clusterB()}, map[string]*Observation{
		"a": observation(nodeA1(locationIPs("172.16.50.7/32"))),
		"b": observation(nodeB1()),
	})
	p, err := Do(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.1.1.0/24", "172.16.50.7/32", "10.41.0.1/32"}
	if diff := cmp.Diff(want, peerOf(p, "b", "a", "a1").Spec.AllowedIPs); diff != "" {
		t.Errorf("-want allowedIPs, +got:\n%s", diff)
	}
}

// Two spellings of one key in discovered-endpoints: which endpoint
// wins depends on Go's map iteration order.
func TestDiscoveredEndpointsDeterministic(t *testing.T) {
	s := `{"` + testKey(1) + `":{"IP":"192.0.2.1","Port":1},"` + otherSpelling(testKey(1)) + `":{"IP":"192.0.2.2","Port":2}}`
	first, err := ParseDiscoveredEndpoints(s)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, _ := ParseDiscoveredEndpoints(s)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("not deterministic: %v then %v", first, again)
		}
	}
}

// Through the planner: the endpoint of a Peer never flips between runs.
func TestDiscoveredEndpointStable(t *testing.T) {
	disc := `{"` + testKey(1) + `":{"IP":"192.0.2.1","Port":1},"` + otherSpelling(testKey(1)) + `":{"IP":"192.0.2.2","Port":2}}`
	var seen []string
	for range 50 {
		p, err := Do(twoClustersWithB(nodeA1(), nodeB1(discovered(disc))))
		if err != nil {
			t.Fatal(err)
		}
		ep := peerOf(p, "b", "a", "a1").Spec.Endpoint.DNSOrIP.IP
		if len(seen) == 0 || seen[len(seen)-1] != ep {
			seen = append(seen, ep)
		}
	}
	if len(seen) > 1 {
		t.Errorf("endpoint of a1 in b changes between identical runs: %v", seen)
	}
}

func twoClustersWithB(a1, b1 kubev1alpha1.ObservedNode) *Input {
	return meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
		"a": observation(a1), "b": observation(b1),
	})
}

// The NodeIPConflict message names "the endpoint of" the first segment by
// (cluster, node), whatever the spec order.
func TestEndpointConflictMessageOrder(t *testing.T) {
	mk := func(order ...meshv1alpha1.Cluster) string {
		in := meshInput(order, map[string]*Observation{
			"a": observation(nodeA1(forceEndpoint("192.168.32.50:1000"))),
			"b": observation(nodeB1(forceEndpoint("192.168.32.50:2000"))),
			"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201", internalIP("192.168.32.50/24"))),
		})
		p, err := Do(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range p.Warnings {
			if w.Cluster == "c" && w.Reason == ReasonNodeIPConflict {
				return w.Message
			}
		}
		return ""
	}
	m1 := mk(clusterA(), clusterB(), clusterC())
	m2 := mk(clusterB(), clusterA(), clusterC())
	if m1 != m2 {
		t.Errorf("warning depends on spec order:\n%s\n%s", m1, m2)
	}
}

// Per-target NodeIPConflict items do not follow the spec order.
func TestTargetConflictMessageOrder(t *testing.T) {
	mk := func(order ...meshv1alpha1.Cluster) string {
		in := meshInput(order, map[string]*Observation{
			"a": observation(nodeA1(internalIP("192.168.9.9/24"))),
			"b": observation(nodeB1(), observedNode("b2", podCIDRs("10.2.2.0/24"), internalIP("192.168.9.9/24"))),
			"c": observation(leaderNode("c1", "10.3.1.0/24", "10.43.0.1/16", 201, "198.51.100.201"),
				observedNode("c2", podCIDRs("10.3.2.0/24"), internalIP("192.168.9.9/24"))),
		})
		p, err := Do(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range p.Warnings {
			if w.Cluster == "a" && w.Reason == ReasonNodeIPConflict {
				return w.Message
			}
		}
		return ""
	}
	m1 := mk(clusterA(), clusterB(), clusterC())
	m2 := mk(clusterA(), clusterC(), clusterB())
	if m1 != m2 {
		t.Errorf("warning depends on spec order:\n%s\n%s", m1, m2)
	}
}

// RFC 1123 limits DNS labels to 63 characters.
func TestEndpointLongDNSLabel(t *testing.T) {
	s := strings.Repeat("a", 64) + ".example.com:51820"
	if e, err := ParseEndpoint(s); err == nil {
		t.Errorf("ParseEndpoint(%q) = %+v: a label of 64 characters is not an RFC 1123 name", s, e)
	}
}

// Kilo elects a location's leader among the nodes it counts, whatever this
// mesh thinks of their pod CIDRs: when Kilo's leader has a pod CIDR outside
// the cluster's podCIDRs, the location has no Peer, and no other node is
// promoted (it would route to a node Kilo does not forward through).
func TestLocationLeaderOutOfRangeIsNotReplaced(t *testing.T) {
	nodes := []kubev1alpha1.ObservedNode{
		leaderNode("e1", "10.9.1.0/24", "10.41.0.1/16", 1, "203.0.113.1", location("eu"), internalIP("192.168.1.1/24")),
		leaderNode("e2", "10.1.2.0/24", "10.41.0.2/16", 2, "203.0.113.2", location("eu"), internalIP("192.168.1.2/24")),
		memberNode("e3", "10.1.3.0/24", 3, "192.168.1.3/24", location("eu")),
	}
	p, err := Do(twoClusters(meshv1alpha1.GranularityLocation, nodes...))
	if err != nil {
		t.Fatal(err)
	}
	want := []skip{{"e1", ReasonNodePodCIDROutOfRange}, {"e2", ReasonSegmentNoLeader}, {"e3", ReasonSegmentNoLeader}}
	if diff := cmp.Diff(want, skipsOf(p, "a")); diff != "" {
		t.Errorf("-want skipped, +got:\n%s", diff)
	}
	if len(p.Peers["b"]) != 0 {
		t.Errorf("want no Peer of a in b, got %v", namesIn(p, "b"))
	}
}

// An unspecified address is never routed, from either source.
func TestUnspecifiedInternalIP(t *testing.T) {
	p, err := Do(meshInput([]meshv1alpha1.Cluster{clusterA(withNodeCIDRs("0.0.0.0/8")), clusterB()}, map[string]*Observation{
		"a": observation(nodeA1(internalIP("0.0.0.0/24"))),
		"b": observation(nodeB1()),
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.1.1.0/24", "10.41.0.1/32"}
	if diff := cmp.Diff(want, peerOf(p, "b", "a", "a1").Spec.AllowedIPs); diff != "" {
		t.Errorf("-want allowedIPs, +got:\n%s", diff)
	}
}

// DNS names are case-insensitive and may end in a dot: they are written in
// the lower-case form Kilo accepts.
func TestEndpointDNSNormalised(t *testing.T) {
	for _, s := range []string{"VPN.Example.com:51820", "vpn.example.com.:51820"} {
		e, err := ParseEndpoint(s)
		if err != nil || e.DNS != "vpn.example.com" {
			t.Errorf("ParseEndpoint(%q) = %+v, %v: want DNS vpn.example.com", s, e, err)
		}
	}
}
