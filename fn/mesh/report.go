package mesh

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Reasons of problems that leave nodes in the mesh but change or withhold
// Peers or routes. Like skip reasons they are exact strings.
const (
	// ReasonNodeIPConflict: an internal address of a node is not routed
	// because routing it would break another route.
	ReasonNodeIPConflict = "NodeIPConflict"
	// ReasonNodeIPOutOfRange: a node's internal address is not inside the
	// cluster's declared nodeCIDRs, so it is not routed.
	ReasonNodeIPOutOfRange = "NodeIPOutOfRange"
	// ReasonNodePodCIDRConflict: a node's pod CIDR overlaps one of a node
	// of another segment, so neither routes it.
	ReasonNodePodCIDRConflict = "NodePodCIDRConflict"
	// ReasonAllowedLocationIPOutOfRange: a range of a node's
	// kilo.squat.ai/allowed-location-ips is not inside the cluster's
	// declared additionalCIDRs, so it is not routed.
	ReasonAllowedLocationIPOutOfRange = "AllowedLocationIPOutOfRange"
	// ReasonAllowedLocationIPConflict: ranges of
	// kilo.squat.ai/allowed-location-ips of two segments overlap, so
	// neither routes them.
	ReasonAllowedLocationIPConflict = "AllowedLocationIPConflict"
	// ReasonNodeNotLeader: a node carries a WireGuard IP but Kilo elects
	// another node to lead its segment; it is routed as a member.
	ReasonNodeNotLeader = "NodeNotLeader"
	// ReasonPeerNameConflict: a Peer of the same name that the mesh does not
	// own is in a member cluster.
	ReasonPeerNameConflict = kubev1alpha1.ReasonPeerNameConflict
	// ReasonPeerKeyConflict: a Peer the mesh does not own already uses the
	// segment's public key in a member cluster.
	ReasonPeerKeyConflict = kubev1alpha1.ReasonPeerKeyConflict
	// ReasonPeerRouteConflict: a Peer the mesh does not own routes an
	// address the segment's Peer would route in a member cluster.
	ReasonPeerRouteConflict = "PeerRouteConflict"
	// ReasonAnnotationInvalid: an optional Kilo annotation of a node is
	// malformed and was not used.
	ReasonAnnotationInvalid = "NodeAnnotationInvalid"
	// ReasonForeignPeersIncomplete: the Peers a member holds that the mesh
	// does not own are not known whole (a bound of the provider or of the
	// planner was reached), so no new route is written into it.
	ReasonForeignPeersIncomplete = "ForeignPeersIncomplete"
	// ReasonNATWithoutKeepalive: another member reaches a segment at an
	// address learned from a handshake (it is behind NAT), but its leader
	// sends no keepalives: the NAT mapping closes whenever the tunnel is
	// idle.
	ReasonNATWithoutKeepalive = "NATWithoutKeepalive"
	// ReasonMoreWarnings sums up the warnings of a plan past maxWarnings.
	ReasonMoreWarnings = "MoreWarnings"
	// ReasonDiscoveredEndpointsDisagree: two leaders of a member recorded
	// different endpoints of one key in kilo.squat.ai/discovered-endpoints;
	// the Peer of that key keeps its own endpoint there.
	ReasonDiscoveredEndpointsDisagree = "DiscoveredEndpointsDisagree"
)

// WarningReasons returns the reason of every warning a plan may carry.
func WarningReasons() []string {
	return []string{
		ReasonNodeIPConflict,
		ReasonNodeIPOutOfRange,
		ReasonNodePodCIDRConflict,
		ReasonAllowedLocationIPOutOfRange,
		ReasonAllowedLocationIPConflict,
		ReasonNodeNotLeader,
		ReasonPeerNameConflict,
		ReasonPeerKeyConflict,
		ReasonPeerRouteConflict,
		ReasonAnnotationInvalid,
		ReasonForeignPeersIncomplete,
		ReasonNATWithoutKeepalive,
		ReasonMoreWarnings,
		ReasonDiscoveredEndpointsDisagree,
	}
}

// Bounds of what the status and the warnings say. Node names, annotation
// values and the Peers in a member's way are anyone's to write, so every
// text is cut and every list is bounded, for the whole mesh: text alone
// must never bring the response near its limit (a fatal result that would
// freeze the mesh).
const (
	// maxListedPerMember is how many skipped nodes, and how many conflicts, one
	// member's status lists, and maxListedPerMesh how many the whole mesh
	// lists: a mesh of more than 8 members lists fewer per member.
	maxListedPerMember = 20
	maxListedPerMesh   = 160
	// maxNameBytes cuts a node or Peer name: a Kubernetes name is at most
	// 253 bytes, but a member's API server may send anything.
	maxNameBytes = 253
	// maxMessageBytes cuts the message of a skipped node or a conflict.
	maxMessageBytes = 512
	// maxWarningBytes cuts a warning; maxWarnings bounds how many one plan
	// gives (each becomes an event), the rest summed up in one more.
	maxWarningBytes = 1024
	maxWarnings     = 100
)

// listedPerMember is how many skipped nodes, and conflicts, each member of a
// mesh of n members lists: maxListedPerMember, fewer in large meshes, at
// least 2.
func listedPerMember(n int) int {
	if n <= 0 {
		return maxListedPerMember
	}
	return max(2, min(maxListedPerMember, maxListedPerMesh/n))
}

// report writes the status and the warnings.
func (p *planner) report() {
	st := &p.plan.Status
	st.ClusterCount = len(p.sources)
	for _, sc := range p.sources {
		cs := p.clusterStatus(sc)
		st.PeerCount += len(p.plan.PeerRefs[sc.spec.Name])
		st.SkippedNodeCount += cs.SkippedNodes
		st.Clusters = append(st.Clusters, cs)
		p.problemWarnings(sc.spec.Name)
		p.conflictWarnings(sc.spec.Name, p.conflicts[sc.spec.Name])
		if msg, ok := p.plan.Withheld[sc.spec.Name]; ok {
			p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: sc.spec.Name, Reason: ReasonForeignPeersIncomplete,
				Message: fmt.Sprintf("cluster %s: %s", sc.spec.Name, msg)})
		}
	}
	p.bound()
}

// bound sanitises every text of the status and the warnings (node owners
// and members write part of them) and cuts it on a character boundary, and
// bounds the number of warnings.
func (p *planner) bound() {
	for i := range p.plan.Status.Clusters {
		c := &p.plan.Status.Clusters[i]
		c.Message = safetext.Message(c.Message, maxWarningBytes)
		for j := range c.Skipped {
			s := &c.Skipped[j]
			s.Node, s.Message = safetext.Message(s.Node, maxNameBytes), safetext.Message(s.Message, maxMessageBytes)
		}
		for j := range c.Conflicts {
			x := &c.Conflicts[j]
			x.Peer, x.Message = safetext.Message(x.Peer, maxNameBytes), safetext.Message(x.Message, maxMessageBytes)
		}
	}
	for i := range p.plan.Warnings {
		p.plan.Warnings[i].Message = safetext.Message(p.plan.Warnings[i].Message, maxWarningBytes)
	}
	if n := len(p.plan.Warnings); n > maxWarnings {
		p.plan.Warnings = append(p.plan.Warnings[:maxWarnings-1], Warning{Reason: ReasonMoreWarnings,
			Message: fmt.Sprintf("%d more warnings of this mesh are not given; its status lists what each member skipped and what is in the way", n-maxWarnings+1)})
	}
	for i := range p.plan.Pending {
		p.plan.Pending[i] = safetext.Message(p.plan.Pending[i], maxMessageBytes)
	}
	for m, msg := range p.plan.Withheld {
		p.plan.Withheld[m] = safetext.Message(msg, maxMessageBytes)
	}
}

// clusterStatus reports one member, and warns once per skip reason.
func (p *planner) clusterStatus(sc *sourceCluster) meshv1alpha1.ClusterStatus {
	name := sc.spec.Name
	conflicts := p.conflicts[name]
	sort.SliceStable(conflicts, func(i, j int) bool {
		if conflicts[i].Peer != conflicts[j].Peer {
			return conflicts[i].Peer < conflicts[j].Peer
		}
		return conflicts[i].Reason < conflicts[j].Reason
	})
	cs := meshv1alpha1.ClusterStatus{Name: name, Nodes: len(sc.nodes), Segments: len(sc.segments), Peers: p.placed[name], Conflicts: conflicts}
	listed := listedPerMember(len(p.sources))
	if len(conflicts) > listed {
		cs.Conflicts, cs.MoreConflicts = conflicts[:listed], len(conflicts)-listed
	}
	cs.Handshakes = p.handshakes[name]
	if sc.obs == nil || sc.obs.ObservedAt == nil {
		p.plan.Pending = append(p.plan.Pending, fmt.Sprintf("cluster %s has not been observed yet", name))
	} else {
		cs.Reachable = sc.obs.Reachable
		cs.LastObserved = sc.obs.ObservedAt
	}
	if sc.obs != nil && !sc.obs.Reachable {
		cs.UnreachableSince = sc.obs.UnreachableSince
		cs.Message = sc.obs.Problem
	}
	if p.plan.Conflicts == nil {
		p.plan.Conflicts, p.plan.Skipped = map[string]map[string]int{}, map[string]map[string]int{}
	}
	p.plan.Conflicts[name], p.plan.Skipped[name] = map[string]int{}, map[string]int{}
	for _, c := range conflicts {
		p.plan.Conflicts[name][c.Reason]++
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, n := range sc.nodes {
		if n.skipped == nil {
			continue
		}
		p.plan.Skipped[name][n.skipped.Reason]++
		cs.SkippedNodes++
		if len(cs.Skipped) < listed {
			cs.Skipped = append(cs.Skipped, *n.skipped)
		} else {
			cs.MoreSkipped++
		}
		if byReason[n.skipped.Reason] == nil {
			reasons = append(reasons, n.skipped.Reason)
		}
		byReason[n.skipped.Reason] = append(byReason[n.skipped.Reason], n.obs.Name)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		msg := fmt.Sprintf("cluster %s: %s skipped (%s): %s", name, plural(len(byReason[r]), "node"), r, listSome(byReason[r]))
		p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: name, Reason: r, Message: msg})
		if Transient(r) {
			p.plan.Pending = append(p.plan.Pending, msg)
		}
	}
	return cs
}

// problemWarnings warns once per problem kind found in a cluster.
func (p *planner) problemWarnings(cluster string) {
	kinds := make([]string, 0, len(p.problems[cluster]))
	for k := range p.problems[cluster] {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		what := k
		if h, ok := problemHeadlines[k]; ok {
			what += " (" + h + ")"
		}
		p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: cluster, Reason: k,
			Message: fmt.Sprintf("cluster %s: %s: %s", cluster, what, listSome(sortedUnique(p.problems[cluster][k])))})
	}
}

// problemHeadlines say in words what each problem kind withholds.
var problemHeadlines = map[string]string{
	ReasonNodeIPConflict:              "internal addresses not routed, routing them would break another route",
	ReasonNodeIPOutOfRange:            "internal addresses outside the cluster's nodeCIDRs, not routed",
	ReasonNodePodCIDRConflict:         "pod CIDRs two segments claim, routed by neither",
	ReasonAllowedLocationIPOutOfRange: "allowed-location-ips outside the cluster's additionalCIDRs, not routed",
	ReasonAllowedLocationIPConflict:   "allowed-location-ips of two segments overlap, routed by neither",
	ReasonNodeNotLeader:               "nodes that carry kilo.squat.ai/wireguard-ip but do not lead, routed as members",
	ReasonAnnotationInvalid:           "annotations that do not parse, ignored",
	ReasonNATWithoutKeepalive:         "leaders reached through NAT that send no keepalives: set kilo.squat.ai/persistent-keepalive on them",
	ReasonDiscoveredEndpointsDisagree: "leaders that recorded different endpoints of one key from handshakes: neither is believed, the Peer keeps its own endpoint",
}

// conflictWarnings warns once per kind of conflict with foreign Peers in a
// cluster.
func (p *planner) conflictWarnings(cluster string, conflicts []meshv1alpha1.PeerConflict) {
	byReason := map[string][]string{}
	for _, c := range conflicts {
		byReason[c.Reason] = append(byReason[c.Reason], c.Peer)
	}
	for _, r := range []string{ReasonPeerKeyConflict, ReasonPeerNameConflict, ReasonPeerRouteConflict} {
		if len(byReason[r]) > 0 {
			p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: cluster, Reason: r,
				Message: fmt.Sprintf("cluster %s: %s not written as planned, a Peer this mesh does not own is in the way (%s): %s",
					cluster, plural(len(byReason[r]), "Peer"), r, listSome(sortedUnique(byReason[r])))})
		}
	}
}

const maxListed = 10

// listSome lists up to maxListed items and counts the rest.
func listSome(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// sortedUnique sorts and deduplicates problem descriptions, found in an
// order that depends on the spec's order of clusters.
func sortedUnique(items []string) []string {
	out := slices.Clone(items)
	slices.Sort(out)
	return slices.Compact(out)
}
