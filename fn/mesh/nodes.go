package mesh

import (
	"fmt"
	"net/netip"
	"sort"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Reasons a node is left out of the mesh. They are exact strings: they
// appear in status and events, and the troubleshooting guide explains each.
const (
	ReasonNodeNoPodCIDR         = "NodeNoPodCIDR"
	ReasonNodePodCIDROutOfRange = "NodePodCIDROutOfRange"
	ReasonNodeNoWireguardIP     = "NodeNoWireguardIP"
	ReasonWGIPInvalid           = "WGIPInvalid"
	ReasonWGIPOutOfRange        = "WGIPOutOfRange"
	ReasonWGIPDuplicate         = "WGIPDuplicate"
	ReasonNodeNoPublicKey       = "NodeNoPublicKey"
	ReasonNodeKeyInvalid        = "NodeKeyInvalid"
	ReasonNodeKeyDuplicate      = "NodeKeyDuplicate"
	ReasonNodeEndpointInvalid   = "NodeEndpointInvalid"
	ReasonSegmentNoLeader       = "SegmentNoLeader"
)

// Transient reports whether a skip reason is expected to clear by itself,
// e.g. while Kilo starts on a new node. A mesh with transient skips is
// converging, not failed.
func Transient(reason string) bool {
	switch reason {
	case ReasonNodeNoPodCIDR, ReasonNodeNoWireguardIP, ReasonNodeNoPublicKey, ReasonSegmentNoLeader:
		return true
	}
	return false
}

// A node is an observed Node being planned.
type node struct {
	obs     *kubev1alpha1.ObservedNode
	kilo    kubev1alpha1.KiloAnnotations
	cluster *cluster
	pods    []netip.Prefix

	// Set once the node passed the checks of a segment leader.
	wgIP     netip.Addr
	key      [kilov1alpha1.KeyLen]byte
	endpoint *Endpoint

	skipped *meshv1alpha1.SkippedNode
}

func (n *node) skipf(reason, format string, a ...any) {
	n.skipped = &meshv1alpha1.SkippedNode{Node: n.obs.Name, Reason: reason, Message: fmt.Sprintf(format, a...)}
}

// A segment is one WireGuard identity of a cluster: one node (Node
// granularity) or the nodes of one location (Location granularity). It
// becomes one Peer in every other cluster.
type segment struct {
	cluster *cluster
	leader  *node
	members []*node // sorted by name; includes the leader
}

// sourceCluster is a member of the mesh with its observed nodes.
type sourceCluster struct {
	*cluster
	obs      *Observation
	nodes    []*node // every observed node, sorted by name
	segments []*segment
	location bool // Location granularity
}

// newSourceCluster sorts the observed nodes of a cluster by name and drops
// repeated names (an API server never lists two; a hand-written observation
// might).
func newSourceCluster(c *cluster, obs *Observation) *sourceCluster {
	sc := &sourceCluster{cluster: c, obs: obs}
	if obs == nil {
		return sc
	}
	sc.nodes = make([]*node, 0, len(obs.Nodes))
	for i := range obs.Nodes {
		n := &node{obs: &obs.Nodes[i], cluster: c}
		if obs.Nodes[i].Kilo != nil {
			n.kilo = *obs.Nodes[i].Kilo
		}
		sc.nodes = append(sc.nodes, n)
	}
	sort.SliceStable(sc.nodes, func(i, j int) bool { return sc.nodes[i].obs.Name < sc.nodes[j].obs.Name })
	out := sc.nodes[:0]
	for i, n := range sc.nodes {
		if i > 0 && n.obs.Name == sc.nodes[i-1].obs.Name {
			continue
		}
		out = append(out, n)
	}
	sc.nodes = out
	return sc
}

// useLocation decides the granularity of a cluster. Auto reads Kilo's
// kilo.squat.ai/granularity from the first node (by name) that has a
// recognised value; Kilo writes the same value on every node.
func (sc *sourceCluster) useLocation(g meshv1alpha1.Granularity) bool {
	switch g {
	case meshv1alpha1.GranularityNode:
		return false
	case meshv1alpha1.GranularityLocation:
		return true
	case meshv1alpha1.GranularityAuto:
	}
	for _, n := range sc.nodes {
		switch n.kilo.Granularity {
		case kilov1alpha1.GranularityLocation:
			return true
		case kilov1alpha1.GranularityFull:
			return false
		}
	}
	return false
}

// checkPodCIDRs runs the first two node checks, which every node of the
// mesh must pass, leader or not.
func (n *node) checkPodCIDRs() bool {
	if len(n.obs.PodCIDRs) == 0 {
		n.skipf(ReasonNodeNoPodCIDR, "the node has no pod CIDR (spec.podCIDRs is empty)")
		return false
	}
	n.pods = make([]netip.Prefix, 0, len(n.obs.PodCIDRs))
	for _, s := range n.obs.PodCIDRs {
		p, err := ParseNodeCIDR(s)
		if err != nil {
			n.skipf(ReasonNodeNoPodCIDR, "pod CIDR %q cannot be parsed: %v", s, err)
			return false
		}
		n.pods = append(n.pods, p)
	}
	for _, p := range n.pods {
		if !containedInAny(p, n.cluster.pods) {
			n.skipf(ReasonNodePodCIDROutOfRange, "pod CIDR %s is not inside the cluster's podCIDRs %v", p, n.cluster.pods)
			return false
		}
	}
	return true
}

func containedInAny(p netip.Prefix, nets []netip.Prefix) bool {
	for _, c := range nets {
		if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// checkWireguardIP runs the WireGuard IP checks of a would-be leader (all
// but the duplicate check, which needs every leader of the cluster).
func (n *node) checkWireguardIP() bool {
	if n.kilo.WireguardIP == "" {
		n.skipf(ReasonNodeNoWireguardIP, "kilo.squat.ai/wireguard-ip is not set (Kilo sets it on segment leaders)")
		return false
	}
	a, err := ParseWireguardIP(n.kilo.WireguardIP)
	if err != nil {
		n.skipf(ReasonWGIPInvalid, "kilo.squat.ai/wireguard-ip %q is not <ip>/<prefix>: %v", n.kilo.WireguardIP, err)
		return false
	}
	if !n.cluster.wireguard.Contains(a) {
		n.skipf(ReasonWGIPOutOfRange, "kilo.squat.ai/wireguard-ip %s is outside the cluster's wireguardCIDR %s", a, n.cluster.wireguard)
		return false
	}
	n.wgIP = a
	return true
}

// checkKey runs the key checks of a would-be leader (all but the duplicate
// check, which needs every leader of the mesh).
func (n *node) checkKey() bool {
	if n.kilo.Key == "" {
		n.skipf(ReasonNodeNoPublicKey, "kilo.squat.ai/key is not set (Kilo sets it when it starts on the node)")
		return false
	}
	k, err := ParseKey(n.kilo.Key)
	if err != nil {
		n.skipf(ReasonNodeKeyInvalid, "kilo.squat.ai/key is not a WireGuard public key: %v", err)
		return false
	}
	n.key = k
	return true
}

// checkEndpoint resolves the endpoint of a leader by the strict chain: the
// first source that is present wins, and if it is malformed the node is
// skipped rather than falling through to the next source.
func (n *node) checkEndpoint() bool {
	for _, src := range []struct{ annotation, value string }{
		{kilov1alpha1.AnnotationClustermeshEndpoint, n.kilo.ClustermeshEndpoint},
		{kilov1alpha1.AnnotationForceEndpoint, n.kilo.ForceEndpoint},
	} {
		if src.value == "" {
			continue
		}
		e, err := ParseEndpoint(src.value)
		if err != nil {
			n.skipf(ReasonNodeEndpointInvalid, "%s %q: %v", src.annotation, src.value, err)
			return false
		}
		n.endpoint = &e
		return true
	}
	if a, ok := firstExternalIP(n.obs.ExternalIPs); ok {
		n.endpoint = &Endpoint{IP: a, Port: n.cluster.port}
		return true
	}
	if v := n.kilo.Endpoint; v != "" {
		e, err := ParseEndpoint(v)
		if err != nil {
			n.skipf(ReasonNodeEndpointInvalid, "%s %q: %v", kilov1alpha1.AnnotationEndpoint, v, err)
			return false
		}
		n.endpoint = &e
	}
	return true
}

// firstExternalIP is the first IPv4 ExternalIP, else the first IPv6 one.
// Addresses that do not parse are not addresses and are passed over.
func firstExternalIP(ips []string) (netip.Addr, bool) {
	var v6 netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			continue
		}
		a = a.Unmap()
		if a.Is4() {
			return a, true
		}
		if !v6.IsValid() {
			v6 = a
		}
	}
	return v6, v6.IsValid()
}

// planSegments checks the nodes of a cluster and groups the valid ones into
// segments, up to the mesh-wide key check. Leaders still need checkEndpoint.
func (sc *sourceCluster) planSegments(g meshv1alpha1.Granularity) {
	sc.location = sc.useLocation(g)
	var leaders []*node
	if sc.location {
		leaders = sc.locationSegments()
	} else {
		leaders = sc.nodeSegments()
	}

	// WGIPDuplicate: the first node by name keeps the address.
	sort.Slice(leaders, func(i, j int) bool { return leaders[i].obs.Name < leaders[j].obs.Name })
	byIP := map[netip.Addr]*node{}
	for _, n := range leaders {
		if first, ok := byIP[n.wgIP]; ok {
			n.skipf(ReasonWGIPDuplicate, "wireguard IP %s is also used by node %s", n.wgIP, first.obs.Name)
			continue
		}
		byIP[n.wgIP] = n
		n.checkKey()
	}
}

// nodeSegments makes every node its own segment, and returns the nodes that
// passed the checks up to the WireGuard IP.
func (sc *sourceCluster) nodeSegments() []*node {
	var leaders []*node
	for _, n := range sc.nodes {
		if n.checkPodCIDRs() && n.checkWireguardIP() {
			leaders = append(leaders, n)
		}
		sc.segments = append(sc.segments, &segment{cluster: sc.cluster, leader: n, members: []*node{n}})
	}
	return leaders
}

// locationSegments groups the nodes with valid pod CIDRs by location, and
// returns the leaders that passed the checks up to the WireGuard IP.
func (sc *sourceCluster) locationSegments() []*node {
	byLocation := map[string]*segment{}
	var order []string
	for _, n := range sc.nodes {
		if !n.checkPodCIDRs() {
			continue
		}
		s, ok := byLocation[n.obs.Location]
		if !ok {
			s = &segment{cluster: sc.cluster}
			byLocation[n.obs.Location] = s
			order = append(order, n.obs.Location)
		}
		s.members = append(s.members, n)
		// Kilo writes a WireGuard IP only on the leader of a location; the
		// first node by name that carries one leads.
		if s.leader == nil && n.kilo.WireguardIP != "" {
			s.leader = n
		}
	}
	leaders := make([]*node, 0, len(order))
	for _, loc := range order {
		s := byLocation[loc]
		sc.segments = append(sc.segments, s)
		if s.leader != nil && s.leader.checkWireguardIP() {
			leaders = append(leaders, s.leader)
		}
	}
	return leaders
}

// finishSegments drops the segments whose leader was skipped, reporting the
// other members of a location without a valid leader.
func (sc *sourceCluster) finishSegments() {
	out := sc.segments[:0]
	for _, s := range sc.segments {
		if s.leader != nil && s.leader.skipped == nil && s.leader.checkEndpoint() {
			out = append(out, s)
			continue
		}
		if !sc.location {
			continue
		}
		for _, m := range s.members {
			if m == s.leader {
				continue
			}
			if s.leader == nil {
				m.skipf(ReasonSegmentNoLeader, "no node of location %q carries kilo.squat.ai/wireguard-ip", m.obs.Location)
			} else {
				m.skipf(ReasonSegmentNoLeader, "the leader of location %q, node %s, is skipped (%s)", m.obs.Location, s.leader.obs.Name, s.leader.skipped.Reason)
			}
		}
	}
	sc.segments = out
	sort.Slice(sc.segments, func(i, j int) bool { return sc.segments[i].leader.obs.Name < sc.segments[j].leader.obs.Name })
}

// dedupeKeys skips every leader whose key another leader of the mesh already
// uses; the first by (cluster name, node name) keeps it. Kilo keeps one Peer
// per key, so two would overwrite each other.
func dedupeKeys(clusters []*sourceCluster) {
	type owner struct{ cluster, node string }
	var leaders []*node
	for _, sc := range clusters {
		for _, s := range sc.segments {
			if s.leader != nil && s.leader.skipped == nil {
				leaders = append(leaders, s.leader)
			}
		}
	}
	sort.Slice(leaders, func(i, j int) bool {
		a, b := leaders[i], leaders[j]
		if a.cluster.spec.Name != b.cluster.spec.Name {
			return a.cluster.spec.Name < b.cluster.spec.Name
		}
		return a.obs.Name < b.obs.Name
	})
	byKey := make(map[[kilov1alpha1.KeyLen]byte]owner, len(leaders))
	for _, n := range leaders {
		if o, ok := byKey[n.key]; ok {
			n.skipf(ReasonNodeKeyDuplicate, "public key is also used by node %s of cluster %s", o.node, o.cluster)
			continue
		}
		byKey[n.key] = owner{cluster: n.cluster.spec.Name, node: n.obs.Name}
	}
}
