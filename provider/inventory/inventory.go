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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// noInternalIP is how an empty kilo.squat.ai/force-internal-ip is
// published: Kilo reads "" and "-" alike, as "no internal IP", and "-"
// survives omitempty.
const noInternalIP = "-"

// leaderValue is how a present kilo.squat.ai/leader is published.
const leaderValue = "true"

// ObserveNodes returns what an inventory publishes of the Nodes that sel
// selects at now, sorted by name, and the bounds that kept Nodes out, if
// any (see Unpublishable). A Node that is not published is reported whether
// or not sel selects it: its labels, or its name, cannot be trusted to say.
func ObserveNodes(nodes []*corev1.Node, sel labels.Selector, now time.Time) ([]v1alpha1.ObservedNode, string) {
	var (
		out []v1alpha1.ObservedNode
		cut Reasons
	)
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if r := Unpublishable(&n.ObjectMeta); r != "" {
			cut.Add(r)
			continue
		}
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		out = append(out, ObserveNode(n, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, cut.String()
}

// NextStale returns the earliest moment after now at which a Node that sel
// selects, fresh at now, turns stale: the moment the inventory must look
// again, since a heartbeat that stops causes no event.
func NextStale(nodes []*corev1.Node, sel labels.Selector, now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for _, n := range nodes {
		if n == nil || Unpublishable(&n.ObjectMeta) != "" || !sel.Matches(labels.Set(n.Labels)) {
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
	if o.Stale {
		since := StaleSince(n, now)
		o.StaleSince = &since
	}
	switch {
	case len(n.Spec.PodCIDRs) > 0:
		o.PodCIDRs = make([]string, 0, len(n.Spec.PodCIDRs))
		for _, c := range n.Spec.PodCIDRs {
			o.PodCIDRs = append(o.PodCIDRs, safetext.Cut(c, MaxAddressBytes))
		}
	case n.Spec.PodCIDR != "":
		o.PodCIDRs = []string{safetext.Cut(n.Spec.PodCIDR, MaxAddressBytes)}
	}
	for _, a := range n.Status.Addresses {
		switch a.Type { //nolint:exhaustive // Only the two address types of the contract are published.
		case corev1.NodeInternalIP:
			if len(o.InternalIPs) < MaxAddresses {
				o.InternalIPs = append(o.InternalIPs, safetext.Cut(a.Address, MaxAddressBytes))
			}
		case corev1.NodeExternalIP:
			if len(o.ExternalIPs) < MaxAddresses {
				o.ExternalIPs = append(o.ExternalIPs, safetext.Cut(a.Address, MaxAddressBytes))
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
		return safetext.Cut(l, MaxLocationBytes)
	}
	return safetext.Cut(n.Labels[kilov1alpha1.LabelRegion], MaxLocationBytes)
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
// name, identity, version, creation and labels (for node selectors and the
// region), the annotations of Fields cut to their caps, its heartbeat as
// Kilo parses it, pod CIDRs, internal and external addresses, and the
// status of the Ready condition without its heartbeat times. A Node of
// 5-20 KB becomes a few hundred bytes, and no Node, whatever its API server
// sends, keeps more than the caps of limits.go. Slim of a slim Node is the
// same Node, as a watch's transform must be.
func Slim(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: slimMeta(&n.ObjectMeta)}
	out.CreationTimestamp = n.CreationTimestamp
	ann := make(map[string]string, 8)
	for _, f := range Fields {
		if v, ok := n.Annotations[f.Annotation]; ok {
			ann[f.Annotation] = f.Cut(v)
		}
	}
	if _, ok := n.Annotations[kilov1alpha1.AnnotationLastSeen]; ok {
		ann[kilov1alpha1.AnnotationLastSeen] = strconv.FormatInt(LastSeen(n), 10)
	}
	if out.Labels == nil && len(n.Labels) > 0 || n.Annotations[annotationCut] == ReasonLabels {
		ann[annotationCut] = ReasonLabels
	}
	if len(ann) > 0 {
		out.Annotations = ann
	}
	out.Spec.PodCIDR = safetext.Cut(n.Spec.PodCIDR, MaxAddressBytes)
	if len(n.Spec.PodCIDRs) > 0 {
		out.Spec.PodCIDRs = make([]string, 0, min(len(n.Spec.PodCIDRs), MaxAddresses))
		for _, c := range n.Spec.PodCIDRs[:min(len(n.Spec.PodCIDRs), MaxAddresses)] {
			out.Spec.PodCIDRs = append(out.Spec.PodCIDRs, safetext.Cut(c, MaxAddressBytes))
		}
	}
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
		out.Status.Addresses = append(out.Status.Addresses, corev1.NodeAddress{Type: a.Type, Address: safetext.Cut(a.Address, MaxAddressBytes)})
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: corev1.ConditionStatus(safetext.Cut(string(c.Status), MaxWordBytes))}}
		}
	}
	return out
}

// SlimPeer returns what the provider reads of a Peer: its name, identity,
// version, labels (ownership) and spec, every value cut to its cap. It
// keeps one allowed IP more than MaxPeerAllowedIPs, so that a Peer with too
// many is known to have them. Slim of a slim Peer is the same Peer.
func SlimPeer(p *kilov1alpha1.Peer) *kilov1alpha1.Peer {
	out := &kilov1alpha1.Peer{ObjectMeta: slimMeta(&p.ObjectMeta)}
	if out.Labels == nil && len(p.Labels) > 0 || p.Annotations[annotationCut] == ReasonLabels {
		out.Annotations = map[string]string{annotationCut: ReasonLabels}
	}
	s := &p.Spec
	if len(s.AllowedIPs) > 0 {
		keep := s.AllowedIPs[:min(len(s.AllowedIPs), MaxPeerAllowedIPs+1)]
		out.Spec.AllowedIPs = make([]string, len(keep))
		for i, a := range keep {
			out.Spec.AllowedIPs[i] = safetext.Cut(a, MaxAddressBytes)
		}
	} else if s.AllowedIPs != nil {
		out.Spec.AllowedIPs = []string{}
	}
	if e := s.Endpoint; e != nil {
		out.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{
			DNSOrIP: kilov1alpha1.DNSOrIP{DNS: safetext.Cut(e.DNSOrIP.DNS, MaxNameBytes+1), IP: safetext.Cut(e.DNSOrIP.IP, MaxAddressBytes)},
			Port:    e.Port,
		}
	}
	out.Spec.PersistentKeepalive = s.PersistentKeepalive
	out.Spec.PresharedKey = safetext.Cut(s.PresharedKey, MaxKeyBytes)
	out.Spec.PublicKey = safetext.Cut(s.PublicKey, MaxKeyBytes)
	return out
}

// LabelsKey returns a string that equal label sets, and only they, share:
// the pairs sorted by key, each key and value ended by a NUL, which no
// label holds.
func LabelsKey(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	n := 0
	for _, k := range keys {
		n += len(k) + len(l[k]) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// annotationCut marks an object kept without its labels, in the provider's
// cache only. Slim keeps no other annotation of that name.
const annotationCut = "kube.kilomesh.io/labels-cut"

// slimMeta returns the metadata kept of a Node or Peer: its name (see
// SlimName), UID and version cut, and its labels unless they are over
// MaxLabels or MaxLabelBytes.
func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:            SlimName(m.Name),
		UID:             types.UID(safetext.Cut(string(m.UID), MaxMetaBytes)),
		ResourceVersion: safetext.Cut(m.ResourceVersion, MaxMetaBytes),
	}
	if len(m.Labels) > MaxLabels {
		return out
	}
	size := 0
	for k, v := range m.Labels {
		if size += len(k) + len(v); size > MaxLabelBytes {
			return out
		}
	}
	out.Labels = m.Labels
	return out
}

// SlimName returns a name as it is kept: a name of at most MaxNameBytes
// as it is, a longer one cut, with a digest of the whole after a "~", which
// no valid name holds. The result is unique for every name, never longer
// than MaxNameBytes, and invalid when the name was.
func SlimName(name string) string {
	if len(name) <= MaxNameBytes {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "~" + hex.EncodeToString(sum[:16])
	return safetext.Cut(name, MaxNameBytes-len(suffix)) + suffix
}

// ValidName reports whether a Node or Peer of this name can exist: a DNS
// subdomain of at most MaxNameBytes.
func ValidName(name string) bool {
	return len(name) <= MaxNameBytes && len(validation.IsDNS1123Subdomain(name)) == 0
}

// Unpublishable returns why an object the provider keeps is not published,
// or "": its name is not one the API server accepts, or it was kept
// without its labels.
func Unpublishable(m *metav1.ObjectMeta) string {
	switch {
	case !ValidName(m.Name):
		return ReasonBadName
	case m.Annotations[annotationCut] == ReasonLabels:
		return ReasonLabels
	}
	return ""
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
// to their caps, and the bounds that cut something, if any. With no owned
// labels it reports none.
//
// The bounds are MaxPeerAllowedIPs, MaxForeignAllowedIPs, MaxForeignPeers
// and MaxForeignBytes: names and keys are published first, routes after
// them in name order, so a Peer past the route budget still has its name
// and key published. A Peer whose name cannot exist is left out, and one
// kept without its labels is foreign, since it may not be owned; both are
// reported too. Whenever anything is left out the text says which bound
// did it: the owner then knows the cluster's foreign routes only in part.
func ObserveForeignPeers(peers []*kilov1alpha1.Peer, owned map[string]string) ([]v1alpha1.ForeignPeer, string) {
	if len(owned) == 0 {
		return nil, ""
	}
	var cut Reasons
	foreign := foreignOf(peers, owned, &cut)
	if len(foreign) == 0 {
		return nil, cut.String()
	}
	// The JSON of the list so far: its brackets, its entries and the commas
	// between them.
	size := 2
	out := publishIDs(foreign, &size, &cut)
	publishRoutes(out, foreign, &size, &cut)
	return out, cut.String()
}

// foreignOf returns the Peers that do not carry every owned label, sorted
// by name, leaving out those whose name cannot exist.
func foreignOf(peers []*kilov1alpha1.Peer, owned map[string]string, cut *Reasons) []*kilov1alpha1.Peer {
	var foreign []*kilov1alpha1.Peer
	for _, p := range peers {
		if p == nil {
			continue
		}
		switch r := Unpublishable(&p.ObjectMeta); r {
		case ReasonBadName:
			cut.Add(r)
			continue
		case ReasonLabels:
			cut.Add(r)
		default:
			if carries(p.Labels, owned) {
				continue
			}
		}
		foreign = append(foreign, p)
	}
	sort.Slice(foreign, func(i, j int) bool { return foreign[i].Name < foreign[j].Name })
	return foreign
}

// publishIDs returns the names and keys of the first foreign Peers that fit
// MaxForeignPeers and MaxForeignBytes, adding their JSON to size.
func publishIDs(foreign []*kilov1alpha1.Peer, size *int, cut *Reasons) []v1alpha1.ForeignPeer {
	out := make([]v1alpha1.ForeignPeer, 0, min(len(foreign), MaxForeignPeers))
	for i, p := range foreign {
		if i == MaxForeignPeers {
			cut.Add(fmt.Sprintf(fmtMorePeers, MaxForeignPeers))
			break
		}
		fp := v1alpha1.ForeignPeer{Name: p.Name, PublicKey: safetext.Cut(p.Spec.PublicKey, MaxKeyBytes)}
		b := len(`{"name":}`) + jsonLen(fp.Name)
		if fp.PublicKey != "" {
			b += len(`,"publicKey":`) + jsonLen(fp.PublicKey)
		}
		if i > 0 {
			b++
		}
		if *size+b > MaxForeignBytes {
			cut.Add(fmt.Sprintf(fmtMoreForeignBytes, MaxForeignBytes))
			break
		}
		*size += b
		out = append(out, fp)
	}
	return out
}

// publishRoutes adds the routes of the published Peers, in name order,
// within MaxPeerAllowedIPs, MaxForeignAllowedIPs and MaxForeignBytes.
func publishRoutes(out []v1alpha1.ForeignPeer, foreign []*kilov1alpha1.Peer, size *int, cut *Reasons) {
	budget := MaxForeignAllowedIPs
	for i := range out {
		ips := foreign[i].Spec.AllowedIPs
		if len(ips) > MaxPeerAllowedIPs {
			cut.Add(fmt.Sprintf(fmtMorePeerRoutes, MaxPeerAllowedIPs))
			ips = ips[:MaxPeerAllowedIPs]
		}
		for j, ip := range ips {
			if budget == 0 {
				cut.Add(fmt.Sprintf(fmtMoreRoutes, MaxForeignAllowedIPs))
				return
			}
			ip = safetext.Cut(ip, MaxAddressBytes)
			// Each route costs its comma, or the list's closing bracket.
			b := jsonLen(ip) + 1
			if j == 0 {
				b += len(`,"allowedIPs":[`)
			}
			if *size+b > MaxForeignBytes {
				cut.Add(fmt.Sprintf(fmtMoreForeignBytes, MaxForeignBytes))
				return
			}
			if j == 0 {
				out[i].AllowedIPs = make([]string, 0, min(len(ips), budget))
			}
			*size += b
			budget--
			out[i].AllowedIPs = append(out[i].AllowedIPs, ip)
		}
	}
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
