package mesh

import (
	"strings"
	"testing"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// TestPasses pins that checking a Peer as it is placed agrees with
// Peer.Validate, whether the Peer is made of its segment's parts (checked
// once per segment) or holds routes or an endpoint of its own.
func TestPasses(t *testing.T) {
	const good, bad = "9V/xb2b0M2Ama5Xbb4/sAddgMQVDBq5KSzgFmPbP0RQ=", "not a key"
	ep := &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "203.0.113.1"}, Port: 51820}
	peer := func(key string, allowed []string, e *kilov1alpha1.PeerEndpoint) *kilov1alpha1.Peer {
		return &kilov1alpha1.Peer{Spec: kilov1alpha1.PeerSpec{PublicKey: key, AllowedIPs: allowed, Endpoint: e}}
	}
	routes, badRoutes := []string{"10.1.0.0/24"}, []string{"10.1.0.0"}
	cases := map[string]struct {
		b     *builtSegment
		peers []*kilov1alpha1.Peer
	}{
		"SharedPasses": {
			b:     &builtSegment{key: good, strs: routes, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, routes, ep), peer(good, routes, ep)},
		},
		"SharedFails": {
			b:     &builtSegment{key: good, strs: badRoutes, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, badRoutes, ep), peer(good, badRoutes, ep)},
		},
		"OwnRoutesFail": {
			b:     &builtSegment{key: good, strs: routes, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, append(routes[:1:1], "x"), ep), peer(good, routes, ep)},
		},
		"OwnRoutesPass": {
			b:     &builtSegment{key: bad, strs: routes, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, []string{"10.1.0.0/24"}, ep), peer(bad, routes, ep)},
		},
		"OwnEndpointFails": {
			b:     &builtSegment{key: good, strs: routes, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, routes, &kilov1alpha1.PeerEndpoint{Port: 51820}), peer(good, routes, ep)},
		},
		"NoRoutes": {
			b:     &builtSegment{key: good, endpoint: ep},
			peers: []*kilov1alpha1.Peer{peer(good, nil, ep)},
		},
	}
	for name, tc := range cases {
		p := &planner{}
		for i, pe := range tc.peers {
			if got, want := p.passes(tc.b, pe), len(pe.Validate()) == 0; got != want {
				t.Errorf("%s: Peer %d passes %v, Validate says %v", name, i, got, want)
			}
		}
	}
}

// TestValidatePeersFirstError pins that a plan with an invalid Peer fails
// on the first one, targets in spec order and Peers by name, as every Peer
// is checked again.
func TestValidatePeersFirstError(t *testing.T) {
	ok := kilov1alpha1.PeerSpec{PublicKey: "9V/xb2b0M2Ama5Xbb4/sAddgMQVDBq5KSzgFmPbP0RQ=", AllowedIPs: []string{"10.1.0.0/24"}}
	bad := kilov1alpha1.PeerSpec{PublicKey: "x", AllowedIPs: []string{"10.1.0.0/24"}}
	named := func(name string, s kilov1alpha1.PeerSpec) kilov1alpha1.Peer {
		p := kilov1alpha1.Peer{Spec: s}
		p.Name = name
		return p
	}
	p := &planner{invalid: true, sources: []*sourceCluster{
		{cluster: &cluster{spec: meshv1alpha1.Cluster{Name: "b"}}},
		{cluster: &cluster{spec: meshv1alpha1.Cluster{Name: "a"}}},
	}}
	p.plan.Peers = map[string][]kilov1alpha1.Peer{
		"a": {named("a1", bad)},
		"b": {named("b1", ok), named("b2", bad), named("b3", bad)},
	}
	err := p.validatePeers()
	if err == nil || !strings.HasPrefix(err.Error(), "planned Peer b2 for cluster b fails Kilo's validation") {
		t.Errorf("validatePeers: %v, want the error of b2 in b", err)
	}
	p.invalid = false
	if err := p.validatePeers(); err != nil {
		t.Errorf("validatePeers with every Peer passed as placed: %v", err)
	}
}
