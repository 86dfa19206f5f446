package view

import (
	"errors"
	"net/netip"
	"reflect"
	"sort"
	"strconv"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
)

// States of a Peer in a picture of the mesh.
const (
	// PeerApplied: the member holds the Peer, its PeerSet or Object says.
	PeerApplied = "applied"
	// PeerDelivered: the Peer is in the member's PeerSet or Object, which
	// has not reported it applied yet.
	PeerDelivered = "delivered"
	// PeerPlanned: the planner plans the Peer, but no PeerSet or Object
	// holds it as planned yet.
	PeerPlanned = "planned"
	// PeerProblem: the member's PeerSet or Object cannot apply the Peer.
	PeerProblem = "problem"
)

// A Graph is the whole mesh in one picture: every member with its segments
// and skipped nodes, and every Peer from a segment to a member.
type Graph struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Frozen says why the planner makes no plan; the Peers shown are then
	// those the mesh's PeerSets and Objects deliver.
	Frozen  string        `json:"frozen,omitempty"`
	Members []GraphMember `json:"members"`
	Peers   []GraphPeer   `json:"peers"`
}

// A GraphMember is one member cluster.
type GraphMember struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	Observed  bool   `json:"observed"`
	Message   string `json:"message,omitempty"`
	Nodes     int    `json:"nodes"`
	// AnchorCIDRs are the member's serviceCIDR and additionalCIDRs, which
	// one Peer of it carries into every other member: its anchor.
	AnchorCIDRs []string       `json:"anchorCIDRs,omitempty"`
	Segments    []GraphSegment `json:"segments,omitempty"`
	// Skipped nodes with their reason, as many as the status lists.
	Skipped []meshv1alpha1.SkippedNode `json:"skipped,omitempty"`
	// Unlisted are observed nodes in no segment that the status does not
	// list as skipped (it lists 20 per member at most).
	Unlisted  []string                    `json:"unlisted,omitempty"`
	Conflicts []meshv1alpha1.PeerConflict `json:"conflicts,omitempty"`
	// Received counts the Peers shown into this member; Desired and
	// Applied are what its PeerSet or Objects report.
	Received int  `json:"received"`
	Desired  *int `json:"desired,omitempty"`
	Applied  *int `json:"applied,omitempty"`
}

// A GraphSegment is one segment of a member.
type GraphSegment struct {
	Segment `json:",inline"`

	// Endpoint of the segment's Peer, as written into the first member
	// that receives it.
	Endpoint string `json:"endpoint,omitempty"`
	// Nodes are the segment's members with their pod CIDRs.
	Nodes []GraphNode `json:"nodes"`
	// Routes are what the segment's Peer routes into every member that
	// receives it, without the member's anchor CIDRs.
	Routes []string `json:"routes,omitempty"`
}

// A GraphNode is a node of a segment.
type GraphNode struct {
	Name     string   `json:"name"`
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	Leader   bool     `json:"leader,omitempty"`
}

// A GraphPeer is one Peer written into one member.
type GraphPeer struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Target string `json:"target"`
	// Leader of the source segment; empty when the Peer's segment is not
	// known (its leader is no longer observed).
	Leader     string   `json:"leader,omitempty"`
	AllowedIPs []string `json:"allowedIPs"`
	Endpoint   string   `json:"endpoint,omitempty"`
	// Anchor lists the source's anchor CIDRs this Peer carries.
	Anchor  []string `json:"anchor,omitempty"`
	State   string   `json:"state"`
	Problem string   `json:"problem,omitempty"`
	// Handshake is true when a segment leader of the target recorded a
	// WireGuard handshake with this Peer (kilo.squat.ai/discovered-endpoints):
	// evidence that the tunnel worked once, not that it works now.
	Handshake bool `json:"handshake,omitempty"`
}

// MeshGraph builds the picture of a mesh from what the planner makes of it.
func MeshGraph(m *snapshot.Mesh, p *Planned) Graph {
	g := Graph{Namespace: m.Namespace, Name: m.Name}
	var overlap *mesh.OverlapError
	var invalid *mesh.InvalidSpecError
	switch {
	case errors.As(p.Err, &overlap), errors.As(p.Err, &invalid):
		g.Frozen = p.Err.Error()
	case p.Err != nil:
		g.Frozen = "the planner failed: " + p.Err.Error()
	}
	status := m.Status.ClusterMeshStatus
	if p.Plan != nil {
		status = p.Plan.Status
	}
	byName := map[string]*meshv1alpha1.ClusterStatus{}
	for i := range status.Clusters {
		byName[status.Clusters[i].Name] = &status.Clusters[i]
	}
	sources := map[string]string{} // member by source label
	anchors := map[string]map[netip.Prefix]bool{}
	for _, c := range m.Spec.Clusters {
		sources[meshv1alpha1.LabelValue(c.Name)] = c.Name
		gm, anchor := graphMember(m, c, byName[c.Name], p)
		anchors[c.Name] = anchor
		g.Members = append(g.Members, gm)
	}
	leaders := map[string]string{} // by Peer name
	for _, segs := range p.Segments {
		for _, s := range segs {
			leaders[s.Peer] = s.Leader
		}
	}
	for i := range g.Members {
		gm := &g.Members[i]
		shook := handshakes(m, p, gm.Name)
		for _, peer := range p.Peers[gm.Name] {
			source := sources[peer.Labels[meshv1alpha1.LabelSourceCluster]]
			gp := GraphPeer{
				Name: peer.Name, Source: source, Target: gm.Name, Leader: leaders[peer.Name],
				AllowedIPs: peer.Spec.AllowedIPs, Endpoint: endpoint(peer.Spec.Endpoint),
			}
			for _, r := range peer.Spec.AllowedIPs {
				if pr, err := netip.ParsePrefix(r); err == nil && anchors[source][pr.Masked()] {
					gp.Anchor = append(gp.Anchor, r)
				}
			}
			gp.State, gp.Problem = peerState(m, p, gm.Name, &peer)
			if k, ok := kilov1alpha1.ParseKey(peer.Spec.PublicKey); ok && peer.Spec.PersistentKeepalive > 0 {
				gp.Handshake = shook[k]
			}
			g.Peers = append(g.Peers, gp)
			gm.Received++
		}
	}
	routes(&g, anchors)
	return g
}

// handshakes are the keys a member's segment leaders recorded a handshake
// with, as Kilo publishes them on the leaders' Nodes.
func handshakes(m *snapshot.Mesh, p *Planned, member string) map[[kilov1alpha1.KeyLen]byte]bool {
	out := map[[kilov1alpha1.KeyLen]byte]bool{}
	inv := m.Inventories[member]
	if inv == nil {
		return out
	}
	leaders := map[string]bool{}
	for _, s := range p.Segments[member] {
		leaders[s.Leader] = true
	}
	for _, n := range inv.Status.AtProvider.Nodes {
		if !leaders[n.Name] || n.Kilo == nil || n.Kilo.DiscoveredEndpoints == "" {
			continue
		}
		d, err := mesh.ParseDiscoveredEndpoints(n.Kilo.DiscoveredEndpoints)
		if err != nil {
			continue // the mesh reports it
		}
		for k := range d {
			out[k] = true
		}
	}
	return out
}

// graphMember builds a member without its Peers, and returns its anchor
// CIDRs.
func graphMember(m *snapshot.Mesh, c meshv1alpha1.Cluster, cs *meshv1alpha1.ClusterStatus, p *Planned) (GraphMember, map[netip.Prefix]bool) {
	gm := GraphMember{Name: c.Name}
	anchor := map[netip.Prefix]bool{}
	cidrs := append([]meshv1alpha1.CIDR(nil), c.AdditionalCIDRs...)
	if c.ServiceCIDR != nil {
		cidrs = append([]meshv1alpha1.CIDR{*c.ServiceCIDR}, cidrs...)
	}
	for _, a := range cidrs {
		gm.AnchorCIDRs = append(gm.AnchorCIDRs, string(a))
		if pr, err := netip.ParsePrefix(string(a)); err == nil {
			anchor[pr.Masked()] = true
		}
	}
	if cs != nil {
		gm.Reachable, gm.Observed, gm.Message = cs.Reachable, cs.LastObserved != nil, cs.Message
		gm.Skipped, gm.Conflicts = cs.Skipped, cs.Conflicts
	}
	var nodes []kubev1alpha1.ObservedNode
	if inv := m.Inventories[c.Name]; inv != nil {
		nodes = inv.Status.AtProvider.Nodes
	}
	gm.Nodes = len(nodes)
	byNode := make(map[string]*kubev1alpha1.ObservedNode, len(nodes))
	for i := range nodes {
		byNode[nodes[i].Name] = &nodes[i]
	}
	placed := map[string]bool{}
	for _, s := range p.Segments[c.Name] {
		gs := GraphSegment{Segment: s}
		for _, name := range s.Members {
			n := GraphNode{Name: name, Leader: name == s.Leader}
			if o := byNode[name]; o != nil {
				n.PodCIDRs = o.PodCIDRs
			}
			gs.Nodes = append(gs.Nodes, n)
			placed[name] = true
		}
		gm.Segments = append(gm.Segments, gs)
	}
	for _, s := range gm.Skipped {
		placed[s.Node] = true
	}
	for _, n := range nodes {
		if !placed[n.Name] {
			gm.Unlisted = append(gm.Unlisted, n.Name)
		}
	}
	sort.Strings(gm.Unlisted)
	gm.Desired, gm.Applied = peersIn(m, c.Name)
	return gm, anchor
}

// routes sets each segment's endpoint and the routes its Peer carries into
// every member that receives it, the anchor's CIDRs left out.
func routes(g *Graph, anchors map[string]map[netip.Prefix]bool) {
	byPeer := map[string][]*GraphPeer{}
	for i := range g.Peers {
		byPeer[g.Peers[i].Name] = append(byPeer[g.Peers[i].Name], &g.Peers[i])
	}
	for i := range g.Members {
		gm := &g.Members[i]
		for j := range gm.Segments {
			s := &gm.Segments[j]
			peers := byPeer[s.Peer]
			if len(peers) == 0 {
				continue
			}
			s.Endpoint = peers[0].Endpoint
			count := map[string]int{}
			for _, gp := range peers {
				for _, r := range gp.AllowedIPs {
					count[r]++
				}
			}
			for _, r := range peers[0].AllowedIPs {
				pr, err := netip.ParsePrefix(r)
				if count[r] == len(peers) && (err != nil || !anchors[gm.Name][pr.Masked()]) {
					s.Routes = append(s.Routes, r)
				}
			}
		}
	}
}

// peerState says how far a Peer got into its member.
func peerState(m *snapshot.Mesh, p *Planned, target string, peer *kilov1alpha1.Peer) (string, string) {
	d, ok := p.Delivered[target][peer.Name]
	if !ok || !reflect.DeepEqual(normal(d.Spec), normal(peer.Spec)) {
		return PeerPlanned, ""
	}
	if objects, ok := m.Objects[target]; ok {
		for _, o := range objects {
			if o.Spec.ForProvider.Manifest.Name != peer.Name {
				continue
			}
			if c, ok := o.Condition(snapshot.TypeSynced); ok && c.Status == "False" {
				return PeerProblem, c.Message
			}
			if c, ok := o.Condition(snapshot.TypeReady); ok && c.Status == "True" {
				return PeerApplied, ""
			}
		}
	}
	ps, ok := m.PeerSets[target]
	if !ok {
		return PeerDelivered, ""
	}
	for _, pr := range ps.Status.AtProvider.Problems {
		if pr.Peer == peer.Name {
			return PeerProblem, pr.Reason + ": " + pr.Message
		}
	}
	if c, ok := snapshot.PeerSetCondition(ps, snapshot.TypeSynced); ok && c.Status == "False" {
		return PeerProblem, c.Message
	}
	if c, ok := snapshot.PeerSetCondition(ps, snapshot.TypeReady); ok && c.Status == "True" {
		return PeerApplied, ""
	}
	return PeerDelivered, ""
}

// normal is a Peer spec with an empty list of routes as nil, so that specs
// read from JSON and built in Go compare equal.
func normal(s kilov1alpha1.PeerSpec) kilov1alpha1.PeerSpec {
	if len(s.AllowedIPs) == 0 {
		s.AllowedIPs = nil
	}
	return s
}

func endpoint(e *kilov1alpha1.PeerEndpoint) string {
	if e == nil {
		return ""
	}
	host := e.DNSOrIP.DNS
	if e.DNSOrIP.IP != "" {
		host = e.DNSOrIP.IP
		if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
			host = "[" + host + "]"
		}
	}
	return host + ":" + strconv.FormatUint(uint64(e.Port), 10)
}
