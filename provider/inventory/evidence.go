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
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// EvidenceOnly reports whether the observed Nodes differ from the
// published ones only in kilo.squat.ai/discovered-endpoints entries that
// decide no Peer of the cluster, given the cluster's Peers. Such a change
// is evidence (which handshakes a leader recorded): an inventory may
// publish it later, at a bounded rate, while a change that may decide a
// Peer is published at once.
//
// Kilo's agent writes its discovered endpoints as it starts (first "{}",
// then one entry per handshake) and whenever a handshake moves an
// endpoint; in a mesh without NAT every entry is the endpoint its Peer
// already has. The planner uses an entry only for the Peer of that key
// written into this cluster (MESH-SPEC §5), so an entry is evidence when:
//
//   - it is added or changed to the endpoint every Peer of its key in the
//     cluster already has (the Peer keeps it whether or not the entry is
//     believed), or
//   - no Peer of the cluster has its key (added, changed or removed).
//
// Anything else may decide a Peer: a removed entry of a key a Peer has, an
// entry that differs from its Peer's endpoint, a value that does not
// parse, and every change of any other field. While the cluster's Peers are
// unknown (peersKnown false) nothing is evidence.
func EvidenceOnly(published, observed []v1alpha1.ObservedNode, peers []*kilov1alpha1.Peer, peersKnown bool) bool {
	if !peersKnown || len(published) != len(observed) {
		return false
	}
	var endpoints map[[kilov1alpha1.KeyLen]byte][]mesh.Endpoint
	for i := range observed {
		p, o := &published[i], &observed[i]
		pd, od := discovered(p), discovered(o)
		if pd == od {
			if !equality.Semantic.DeepEqual(p, o) {
				return false
			}
			continue
		}
		// Everything but the discovered endpoints must be as published.
		if !sameBut(p, o) {
			return false
		}
		if endpoints == nil {
			endpoints = peerEndpoints(peers)
		}
		if !evidence(pd, od, endpoints) {
			return false
		}
	}
	return true
}

// discovered returns a node's kilo.squat.ai/discovered-endpoints, or "".
func discovered(n *v1alpha1.ObservedNode) string {
	if n.Kilo == nil {
		return ""
	}
	return n.Kilo.DiscoveredEndpoints
}

// sameBut reports whether two observed nodes are equal but for their
// discovered endpoints.
func sameBut(a, b *v1alpha1.ObservedNode) bool {
	x, y := *a, *b
	ka, kb := v1alpha1.KiloAnnotations{}, v1alpha1.KiloAnnotations{}
	if a.Kilo != nil {
		ka = *a.Kilo
	}
	if b.Kilo != nil {
		kb = *b.Kilo
	}
	ka.DiscoveredEndpoints, kb.DiscoveredEndpoints = "", ""
	x.Kilo, y.Kilo = nil, nil
	return ka == kb && equality.Semantic.DeepEqual(&x, &y)
}

// peerEndpoints maps each public key of the cluster's Peers to their
// endpoints. A Peer without an endpoint has the zero Endpoint, which no
// discovered entry equals.
func peerEndpoints(peers []*kilov1alpha1.Peer) map[[kilov1alpha1.KeyLen]byte][]mesh.Endpoint {
	out := make(map[[kilov1alpha1.KeyLen]byte][]mesh.Endpoint, len(peers))
	for _, p := range peers {
		if p == nil {
			continue
		}
		k, ok := kilov1alpha1.ParseKey(p.Spec.PublicKey)
		if !ok {
			continue
		}
		var e mesh.Endpoint
		if pe := p.Spec.Endpoint; pe != nil && pe.DNSOrIP.DNS == "" && pe.Port > 0 && pe.Port <= 65535 {
			if a, err := netip.ParseAddr(pe.DNSOrIP.IP); err == nil {
				e = mesh.Endpoint{IP: a.Unmap(), Port: uint16(pe.Port)}
			}
		}
		out[k] = append(out[k], e)
	}
	return out
}

// evidence reports whether a change of one node's discovered endpoints
// from a to b decides no Peer (see EvidenceOnly).
func evidence(a, b string, peers map[[kilov1alpha1.KeyLen]byte][]mesh.Endpoint) bool {
	da, ok := parseDiscovered(a)
	if !ok {
		return false
	}
	db, ok := parseDiscovered(b)
	if !ok {
		return false
	}
	for k, e := range db {
		if old, had := da[k]; had && old == e {
			continue
		}
		for _, pe := range peers[k] {
			if pe != e {
				return false
			}
		}
	}
	for k := range da {
		if _, kept := db[k]; !kept && len(peers[k]) > 0 {
			return false
		}
	}
	return true
}

// parseDiscovered parses discovered endpoints as the planner does; absent
// ones are none.
func parseDiscovered(s string) (map[[kilov1alpha1.KeyLen]byte]mesh.Endpoint, bool) {
	if s == "" {
		return nil, true
	}
	d, err := mesh.ParseDiscoveredEndpoints(s)
	return d, err == nil
}
