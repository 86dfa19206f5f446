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

// Package inventory is the NodeInventory contract in code: what an
// inventory publishes of the Nodes and Peers of a member cluster. Values are
// copied verbatim but cut to bounded lengths, Kilo's heartbeat is reduced to
// whether it is stale, and nothing depends on a Node being well-formed: the
// planner judges the values. Test fixtures use it to build the status a
// real inventory would publish.
package inventory

import (
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// noInternalIP is how an empty kilo.squat.ai/force-internal-ip is
// published: Kilo reads "" and "-" alike, as "no internal IP", and "-"
// survives omitempty.
const noInternalIP = "-"

// leaderValue is how a present kilo.squat.ai/leader is published.
const leaderValue = "true"

// ObserveNodes returns what an inventory publishes of the Nodes that sel
// selects at now, sorted by name.
func ObserveNodes(nodes []*corev1.Node, sel labels.Selector, now time.Time) []v1alpha1.ObservedNode {
	var out []v1alpha1.ObservedNode
	for _, n := range nodes {
		if n == nil || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		out = append(out, ObserveNode(n, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NextStale returns the earliest moment after now at which a Node that sel
// selects, fresh at now, turns stale: the moment the inventory must look
// again, since a heartbeat that stops causes no event.
func NextStale(nodes []*corev1.Node, sel labels.Selector, now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for _, n := range nodes {
		if n == nil || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		if at, ok := StaleAt(LastSeen(n), now); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// ObserveNode returns what an inventory publishes of one Node at now.
func ObserveNode(n *corev1.Node, now time.Time) v1alpha1.ObservedNode {
	o := v1alpha1.ObservedNode{Name: n.Name, Stale: Stale(LastSeen(n), now)}
	switch {
	case len(n.Spec.PodCIDRs) > 0:
		o.PodCIDRs = make([]string, 0, len(n.Spec.PodCIDRs))
		for _, c := range n.Spec.PodCIDRs {
			o.PodCIDRs = append(o.PodCIDRs, Cut(c, MaxAddressBytes))
		}
	case n.Spec.PodCIDR != "":
		o.PodCIDRs = []string{Cut(n.Spec.PodCIDR, MaxAddressBytes)}
	}
	for _, a := range n.Status.Addresses {
		switch a.Type { //nolint:exhaustive // Only the two address types of the contract are published.
		case corev1.NodeInternalIP:
			if len(o.InternalIPs) < MaxAddresses {
				o.InternalIPs = append(o.InternalIPs, Cut(a.Address, MaxAddressBytes))
			}
		case corev1.NodeExternalIP:
			if len(o.ExternalIPs) < MaxAddresses {
				o.ExternalIPs = append(o.ExternalIPs, Cut(a.Address, MaxAddressBytes))
			}
		}
	}
	o.Location = Location(n)
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			o.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if k := kiloAnnotations(n.Annotations); k != (v1alpha1.KiloAnnotations{}) {
		o.Kilo = &k
	}
	return o
}

// Location returns a Node's location as Kilo reads it: the
// kilo.squat.ai/location annotation when it is present, even empty, else
// the topology.kubernetes.io/region label.
func Location(n *corev1.Node) string {
	if l, ok := n.Annotations[kilov1alpha1.AnnotationLocation]; ok {
		return Cut(l, MaxLocationBytes)
	}
	return Cut(n.Labels[kilov1alpha1.LabelRegion], MaxLocationBytes)
}

func kiloAnnotations(a map[string]string) v1alpha1.KiloAnnotations {
	k := v1alpha1.KiloAnnotations{}
	for _, f := range Fields {
		v, ok := a[f.Annotation]
		if !ok {
			continue
		}
		switch f.Annotation {
		case kilov1alpha1.AnnotationLeader:
			k.Leader = leaderValue
		case kilov1alpha1.AnnotationForceInternalIP:
			k.ForceInternalIP = f.Cut(v)
			if v == "" {
				k.ForceInternalIP = noInternalIP
			}
		default:
			if p := kiloField(&k, f.Annotation); p != nil {
				*p = f.Cut(v)
			}
		}
	}
	return k
}

// kiloField returns the field of k that publishes an annotation copied
// verbatim, or nil.
func kiloField(k *v1alpha1.KiloAnnotations, annotation string) *string {
	switch annotation {
	case kilov1alpha1.AnnotationKey:
		return &k.Key
	case kilov1alpha1.AnnotationWireguardIP:
		return &k.WireguardIP
	case kilov1alpha1.AnnotationEndpoint:
		return &k.Endpoint
	case kilov1alpha1.AnnotationInternalIP:
		return &k.InternalIP
	case kilov1alpha1.AnnotationForceEndpoint:
		return &k.ForceEndpoint
	case kilov1alpha1.AnnotationClustermeshEndpoint:
		return &k.ClustermeshEndpoint
	case kilov1alpha1.AnnotationGranularity:
		return &k.Granularity
	case kilov1alpha1.AnnotationPersistentKeepalive:
		return &k.PersistentKeepalive
	case kilov1alpha1.AnnotationDiscoveredEndpoints:
		return &k.DiscoveredEndpoints
	case kilov1alpha1.AnnotationAllowedLocationIPs:
		return &k.AllowedLocationIPs
	}
	return nil
}

// Slim returns what an inventory reads of a Node, and nothing else: its
// name, identity, version and labels (for node selectors and the region),
// the annotations of Fields cut to their caps, its heartbeat as Kilo
// parses it, pod CIDRs, internal and external addresses, and the status of
// the Ready condition without its heartbeat times. A Node of 5-20 KB
// becomes a few hundred bytes. Slim of a slim Node is the same Node, as a
// watch's transform must be.
func Slim(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:            n.Name,
		UID:             n.UID,
		ResourceVersion: n.ResourceVersion,
		Labels:          n.Labels,
	}}
	ann := make(map[string]string, 8)
	for _, f := range Fields {
		if v, ok := n.Annotations[f.Annotation]; ok {
			ann[f.Annotation] = f.Cut(v)
		}
	}
	if _, ok := n.Annotations[kilov1alpha1.AnnotationLastSeen]; ok {
		ann[kilov1alpha1.AnnotationLastSeen] = strconv.FormatInt(LastSeen(n), 10)
	}
	if len(ann) > 0 {
		out.Annotations = ann
	}
	out.Spec.PodCIDR = n.Spec.PodCIDR
	out.Spec.PodCIDRs = n.Spec.PodCIDRs
	var internal, external int
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			if internal++; internal > MaxAddresses {
				continue
			}
		case corev1.NodeExternalIP:
			if external++; external > MaxAddresses {
				continue
			}
		default:
			continue
		}
		out.Status.Addresses = append(out.Status.Addresses, corev1.NodeAddress{Type: a.Type, Address: Cut(a.Address, MaxAddressBytes)})
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out
}

// Changed reports whether an update of a slim Node from a to b changes
// what an inventory publishes at now. A heartbeat that leaves the node as
// fresh (or as stale) as it was changes nothing: Kilo's heartbeats every
// 30 s must not wake anyone.
func Changed(a, b *corev1.Node, now time.Time) bool {
	if Stale(LastSeen(a), now) != Stale(LastSeen(b), now) {
		return true
	}
	x, y := *a, *b
	x.ResourceVersion, y.ResourceVersion = "", ""
	x.Annotations, y.Annotations = withoutHeartbeat(a.Annotations), withoutHeartbeat(b.Annotations)
	return !equality.Semantic.DeepEqual(&x, &y)
}

func withoutHeartbeat(a map[string]string) map[string]string {
	if _, ok := a[kilov1alpha1.AnnotationLastSeen]; !ok {
		return a
	}
	out := make(map[string]string, len(a))
	for k, v := range a {
		if k != kilov1alpha1.AnnotationLastSeen {
			out[k] = v
		}
	}
	return out
}

// ObserveForeignPeers returns the Peers that do not carry every one of the
// owned labels, sorted by name, with their public keys and allowed IPs cut
// to their caps. With no owned labels it reports none.
func ObserveForeignPeers(peers []*kilov1alpha1.Peer, owned map[string]string) []v1alpha1.ForeignPeer {
	if len(owned) == 0 {
		return nil
	}
	var foreign []*kilov1alpha1.Peer
	for _, p := range peers {
		if p != nil && !carries(p.Labels, owned) {
			foreign = append(foreign, p)
		}
	}
	sort.Slice(foreign, func(i, j int) bool { return foreign[i].Name < foreign[j].Name })
	out := make([]v1alpha1.ForeignPeer, 0, len(foreign))
	budget := MaxForeignAllowedIPs
	for _, p := range foreign {
		fp := v1alpha1.ForeignPeer{Name: p.Name, PublicKey: Cut(p.Spec.PublicKey, MaxKeyBytes)}
		n := min(len(p.Spec.AllowedIPs), MaxPeerAllowedIPs, budget)
		if n > 0 {
			fp.AllowedIPs = make([]string, n)
			for i := range n {
				fp.AllowedIPs[i] = Cut(p.Spec.AllowedIPs[i], MaxAddressBytes)
			}
		}
		budget -= n
		out = append(out, fp)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// carries reports whether have holds every label of want.
func carries(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}
