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

package nodeinventory

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// ObserveNodes returns what an inventory publishes of the Nodes that sel
// selects, sorted by name. Values are copied verbatim: the planner judges
// them, and nothing here depends on a Node being well-formed.
func ObserveNodes(nodes []*corev1.Node, sel labels.Selector) []v1alpha1.ObservedNode {
	var out []v1alpha1.ObservedNode
	for _, n := range nodes {
		if n == nil || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		out = append(out, observeNode(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func observeNode(n *corev1.Node) v1alpha1.ObservedNode {
	o := v1alpha1.ObservedNode{Name: n.Name}
	switch {
	case len(n.Spec.PodCIDRs) > 0:
		o.PodCIDRs = append([]string(nil), n.Spec.PodCIDRs...)
	case n.Spec.PodCIDR != "":
		o.PodCIDRs = []string{n.Spec.PodCIDR}
	}
	for _, a := range n.Status.Addresses {
		switch a.Type { //nolint:exhaustive // Only the two address types of the contract are published.
		case corev1.NodeInternalIP:
			o.InternalIPs = append(o.InternalIPs, a.Address)
		case corev1.NodeExternalIP:
			o.ExternalIPs = append(o.ExternalIPs, a.Address)
		}
	}
	o.Location = n.Annotations[kilov1alpha1.AnnotationLocation]
	if o.Location == "" {
		o.Location = n.Labels[kilov1alpha1.LabelRegion]
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			o.Ready = c.Status == corev1.ConditionTrue
		}
	}
	a := n.Annotations
	k := v1alpha1.KiloAnnotations{
		Key:                 a[kilov1alpha1.AnnotationKey],
		WireguardIP:         a[kilov1alpha1.AnnotationWireguardIP],
		Endpoint:            a[kilov1alpha1.AnnotationEndpoint],
		InternalIP:          a[kilov1alpha1.AnnotationInternalIP],
		ForceEndpoint:       a[kilov1alpha1.AnnotationForceEndpoint],
		ClustermeshEndpoint: a[kilov1alpha1.AnnotationClustermeshEndpoint],
		Granularity:         a[kilov1alpha1.AnnotationGranularity],
		PersistentKeepalive: a[kilov1alpha1.AnnotationPersistentKeepalive],
		DiscoveredEndpoints: a[kilov1alpha1.AnnotationDiscoveredEndpoints],
	}
	if k != (v1alpha1.KiloAnnotations{}) {
		o.Kilo = &k
	}
	return o
}

// ObserveForeignPeers returns the Peers that do not carry every one of the
// owned labels, sorted by name. With no owned labels it reports none.
func ObserveForeignPeers(peers []*kilov1alpha1.Peer, owned map[string]string) []v1alpha1.ForeignPeer {
	if len(owned) == 0 {
		return nil
	}
	var out []v1alpha1.ForeignPeer
	for _, p := range peers {
		if p == nil || carries(p.Labels, owned) {
			continue
		}
		out = append(out, v1alpha1.ForeignPeer{Name: p.Name, PublicKey: p.Spec.PublicKey})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
