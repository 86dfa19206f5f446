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

package inventory

import (
	"testing"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

const (
	evKeyA = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	evKeyB = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
)

func evPeer(key, ip string, port uint32) *kilov1alpha1.Peer {
	p := &kilov1alpha1.Peer{}
	p.Name = "p-" + ip
	p.Spec.PublicKey = key
	p.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: ip}, Port: port}
	return p
}

func evNode(discovered string, mutate ...func(*v1alpha1.ObservedNode)) []v1alpha1.ObservedNode {
	n := v1alpha1.ObservedNode{Name: "n1", Ready: true, Kilo: &v1alpha1.KiloAnnotations{Key: evKeyB, WireguardIP: "10.4.0.1/16", DiscoveredEndpoints: discovered}}
	for _, m := range mutate {
		m(&n)
	}
	return []v1alpha1.ObservedNode{n}
}

// TestEvidenceOnly follows Kilo's agent as it starts: "{}" and then one
// entry per handshake are evidence while they match the Peers' endpoints;
// what may change a Peer is not.
func TestEvidenceOnly(t *testing.T) {
	peers := []*kilov1alpha1.Peer{evPeer(evKeyA, "192.0.2.1", 51820)}
	entryA := `{"` + evKeyA + `":{"IP":"192.0.2.1","Port":51820,"Zone":""}}`
	natA := `{"` + evKeyA + `":{"IP":"198.51.100.7","Port":40000,"Zone":""}}`
	otherKey := `{"` + evKeyB + `":{"IP":"198.51.100.7","Port":40000,"Zone":""}}`
	cases := map[string]struct {
		published, observed []v1alpha1.ObservedNode
		peers               []*kilov1alpha1.Peer
		unknown             bool
		want                bool
	}{
		"FirstEmptyMap":            {published: evNode(""), observed: evNode("{}"), peers: peers, want: true},
		"HandshakeAtPeerEndpoint":  {published: evNode("{}"), observed: evNode(entryA), peers: peers, want: true},
		"FromAbsentToEntry":        {published: evNode(""), observed: evNode(entryA), peers: peers, want: true},
		"KilonilToEmptyMap":        {published: evNode("", func(n *v1alpha1.ObservedNode) { n.Kilo = nil }), observed: evNode("{}", func(n *v1alpha1.ObservedNode) { n.Kilo = &v1alpha1.KiloAnnotations{DiscoveredEndpoints: "{}"} }), peers: peers, want: true},
		"KeyNoPeerHolds":           {published: evNode("{}"), observed: evNode(otherKey), peers: peers, want: true},
		"KeyNoPeerHoldsRemoved":    {published: evNode(otherKey), observed: evNode("{}"), peers: peers, want: true},
		"NATEndpoint":              {published: evNode("{}"), observed: evNode(natA), peers: peers, want: false},
		"EntryOfAPeerRemoved":      {published: evNode(entryA), observed: evNode("{}"), peers: peers, want: false},
		"InvalidJSON":              {published: evNode("{}"), observed: evNode("{"), peers: peers, want: false},
		"PeersUnknown":             {published: evNode(""), observed: evNode("{}"), peers: peers, unknown: true, want: false},
		"KeyChangedToo":            {published: evNode(""), observed: evNode("{}", func(n *v1alpha1.ObservedNode) { n.Kilo.Key = evKeyA }), peers: peers, want: false},
		"WireGuardIPChanged":       {published: evNode("{}"), observed: evNode("{}", func(n *v1alpha1.ObservedNode) { n.Kilo.WireguardIP = "10.4.0.2/16" }), peers: peers, want: false},
		"ReadyChangedNoDiscovered": {published: evNode(entryA), observed: evNode(entryA, func(n *v1alpha1.ObservedNode) { n.Ready = false }), peers: peers, want: false},
		"NodeAdded":                {published: evNode("{}"), observed: append(evNode("{}"), v1alpha1.ObservedNode{Name: "n2"}), peers: peers, want: false},
		"PeerWithDNSEndpoint": {published: evNode("{}"), observed: evNode(entryA), peers: []*kilov1alpha1.Peer{{Spec: kilov1alpha1.PeerSpec{
			PublicKey: evKeyA, Endpoint: &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: "a.example.com"}, Port: 51820},
		}}}, want: false},
		"TwoPeersOfTheKeyDisagree": {published: evNode("{}"), observed: evNode(entryA), peers: append([]*kilov1alpha1.Peer{evPeer(evKeyA, "192.0.2.9", 51820)}, peers...), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := EvidenceOnly(tc.published, tc.observed, tc.peers, !tc.unknown); got != tc.want {
				t.Errorf("EvidenceOnly: want %v, got %v", tc.want, got)
			}
		})
	}
}
