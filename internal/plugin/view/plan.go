// Package view turns a snapshot of a management cluster into what the
// kubectl plugin shows: the status of a mesh and whether it converged, a
// picture of the whole mesh, and a diagnosis. It is pure: a snapshot in,
// plain values out.
//
// Segments and leaders are never computed here: the mesh's spec and its
// inventories are run through the planner of function-kilomesh (fn/mesh),
// exactly as the function runs it, and the segments are read back from the
// Peers it plans, so the picture cannot drift from the rules.
package view

import (
	"net/netip"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// maxSiblings is how many other meshes sharing a member the function reads.
const maxSiblings = 32

// maxProblem is how much of a member's error the function quotes.
const maxProblem = 300

// A Planned mesh is what the planner makes of a mesh now.
type Planned struct {
	// Plan is the planner's answer; nil when the mesh is frozen.
	Plan *mesh.Plan
	// Err is why there is no plan: a *mesh.OverlapError or a
	// *mesh.InvalidSpecError freezes the mesh.
	Err error
	// Peers are the Peers shown, by target member: the plan's, or, when
	// the mesh is frozen, those its PeerSets and Objects deliver.
	Peers map[string][]kilov1alpha1.Peer
	// Delivered are the Peers the mesh's PeerSets and Objects hold, by
	// target member, then name.
	Delivered map[string]map[string]kilov1alpha1.Peer
	// Segments by member, sorted by leader.
	Segments map[string][]Segment
}

// A Segment is one WireGuard identity of a member: a node, or a Kilo
// location led by one node.
type Segment struct {
	// Leader is the node whose key and endpoint the segment's Peer carries.
	Leader string `json:"leader"`
	// Location of the leader, empty when it has none.
	Location string `json:"location,omitempty"`
	// Members are the nodes the segment routes, sorted, the leader among
	// them.
	Members []string `json:"members"`
	// Peer is the name of the segment's Peer.
	Peer string `json:"peer"`
}

// Plan runs the planner on a mesh as the function would now: its spec, its
// inventories' published status, the other meshes that share a member with
// it, and the Peers it delivered so far.
func Plan(s *snapshot.Snapshot, m *snapshot.Mesh) *Planned {
	p := &Planned{Delivered: delivered(m)}
	in := &mesh.Input{
		Namespace:    m.Namespace,
		Name:         m.Name,
		Spec:         m.Spec.ClusterMeshSpec,
		Now:          s.Now,
		Observations: observations(m),
		Others:       siblings(s, m),
		Delivered:    map[string]map[string]mesh.DeliveredPeer{},
	}
	for target, peers := range p.Delivered {
		in.Delivered[target] = map[string]mesh.DeliveredPeer{}
		for name, peer := range peers {
			in.Delivered[target][name] = mesh.DeliveredPeer{PublicKey: peer.Spec.PublicKey, AllowedIPs: peer.Spec.AllowedIPs}
		}
	}
	p.Plan, p.Err = mesh.Do(in)
	if p.Plan != nil {
		p.Peers = p.Plan.Peers
	} else {
		p.Peers = map[string][]kilov1alpha1.Peer{}
		for target, peers := range p.Delivered {
			for _, peer := range peers {
				p.Peers[target] = append(p.Peers[target], peer)
			}
			sort.Slice(p.Peers[target], func(i, j int) bool { return p.Peers[target][i].Name < p.Peers[target][j].Name })
		}
	}
	status := m.Status.ClusterMeshStatus
	if p.Plan != nil {
		status = p.Plan.Status
	}
	var held []string
	for _, c := range status.Clusters {
		for _, x := range c.Conflicts {
			held = append(held, x.Peer)
		}
	}
	p.Segments = segments(m, p.Peers, held)
	return p
}

// observations reads what each member's inventory published, as the
// function reads it: nil while the inventory has neither observed its
// cluster nor failed to.
func observations(m *snapshot.Mesh) map[string]*mesh.Observation {
	out := map[string]*mesh.Observation{}
	for _, c := range m.Spec.Clusters {
		inv, ok := m.Inventories[c.Name]
		if !ok {
			continue
		}
		if o := observation(inv); o != nil {
			out[c.Name] = o
		}
	}
	return out
}

func observation(inv *kubev1alpha1.NodeInventory) *mesh.Observation {
	o := &mesh.Observation{NodeInventoryObservation: inv.Status.AtProvider, Reachable: true}
	if c, ok := snapshot.InventoryCondition(inv, snapshot.TypeSynced); ok && c.Status == "False" {
		o.Reachable = false
		if !c.LastTransitionTime.IsZero() {
			t := c.LastTransitionTime
			o.UnreachableSince = &t
		}
		o.Problem = safetext.Truncate(c.Message, maxProblem)
	}
	if o.ObservedAt == nil && o.Reachable {
		return nil
	}
	return o
}

// siblings are the other meshes of the namespace that share a member with
// this one and are older, found as the function finds them: through the
// member label of their NodeInventories.
func siblings(s *snapshot.Snapshot, m *snapshot.Mesh) []mesh.OtherMesh {
	ids := map[string]bool{}
	for _, c := range m.Spec.Clusters {
		ids[mesh.MemberID(m.Namespace, c)] = true
	}
	names := map[string]bool{}
	for _, inv := range s.Inventories {
		n := inv.Annotations[meshv1alpha1.AnnotationMeshName]
		if ids[inv.Labels[meshv1alpha1.LabelMember]] && n != "" && n != m.Name {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	if len(sorted) > maxSiblings {
		sorted = sorted[:maxSiblings]
	}
	var out []mesh.OtherMesh
	for _, n := range sorted {
		o, ok := s.All[n]
		if !ok || !olderThan(&m.ClusterMesh, o.CreationTimestamp.Time, n) {
			continue
		}
		out = append(out, mesh.OtherMesh{Name: n, Spec: o.Spec.ClusterMeshSpec})
	}
	return out
}

// olderThan tells whether a mesh created at t, named name, came before m:
// of two meshes whose networks overlap the younger freezes. A time unknown
// on either side counts as older; at the same time, the name that sorts
// first is older.
func olderThan(m *snapshot.ClusterMesh, t time.Time, name string) bool {
	created := m.CreationTimestamp.Time
	if created.IsZero() || t.IsZero() || !t.Equal(created) {
		return created.IsZero() || t.IsZero() || t.Before(created)
	}
	return name < m.Name
}

// delivered lists the Peers the mesh's PeerSets and Objects hold, by target
// member, then name.
func delivered(m *snapshot.Mesh) map[string]map[string]kilov1alpha1.Peer {
	out := map[string]map[string]kilov1alpha1.Peer{}
	add := func(target string, p kilov1alpha1.Peer) {
		if out[target] == nil {
			out[target] = map[string]kilov1alpha1.Peer{}
		}
		if _, ok := out[target][p.Name]; !ok {
			out[target][p.Name] = p
		}
	}
	for target, ps := range m.PeerSets {
		for _, d := range ps.Spec.ForProvider.Peers {
			add(target, kilov1alpha1.Peer{
				TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
				ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: d.Labels},
				Spec:       d.Spec.Kilo(),
			})
		}
	}
	for target, objects := range m.Objects {
		for _, o := range objects {
			add(target, o.Spec.ForProvider.Manifest)
		}
	}
	return out
}

// segments reads the segments of every member back from the Peers: a
// Peer's name says which node leads it (the function names every Peer
// after its source member and leader), and its routes say which nodes it
// carries (each member's pod CIDR is routed through its own segment's Peer
// only). held names the Peers a conflict keeps out of a member: a segment
// whose Peer no member holds is known by its name only.
func segments(m *snapshot.Mesh, peers map[string][]kilov1alpha1.Peer, held []string) map[string][]Segment {
	out := map[string][]Segment{}
	for _, c := range m.Spec.Clusters {
		if inv := m.Inventories[c.Name]; inv != nil {
			out[c.Name] = memberSegments(m, c.Name, inv.Status.AtProvider.Nodes, peers, held)
		}
	}
	return out
}

// memberSegments reads the segments of one member back from the Peers.
func memberSegments(m *snapshot.Mesh, member string, nodes []kubev1alpha1.ObservedNode, peers map[string][]kilov1alpha1.Peer, held []string) []Segment {
	leaderOf := make(map[string]*kubev1alpha1.ObservedNode, len(nodes))
	byPod := map[netip.Prefix]*kubev1alpha1.ObservedNode{}
	for i := range nodes {
		leaderOf[mesh.PeerName(m.Namespace, m.Name, member, nodes[i].Name)] = &nodes[i]
		for _, pc := range nodes[i].PodCIDRs {
			if p, err := netip.ParsePrefix(strings.TrimSpace(pc)); err == nil {
				byPod[p.Masked()] = &nodes[i]
			}
		}
	}
	source := meshv1alpha1.LabelValue(member)
	members := map[string]map[string]bool{} // by Peer
	for _, target := range sortedKeys(peers) {
		for _, p := range peers[target] {
			leader := leaderOf[p.Name]
			if p.Labels[meshv1alpha1.LabelSourceCluster] != source || leader == nil {
				continue
			}
			if members[p.Name] == nil {
				members[p.Name] = map[string]bool{leader.Name: true}
			}
			for _, r := range p.Spec.AllowedIPs {
				if pr, err := netip.ParsePrefix(r); err == nil && byPod[pr.Masked()] != nil {
					members[p.Name][byPod[pr.Masked()].Name] = true
				}
			}
		}
	}
	for _, name := range held {
		if leader := leaderOf[name]; leader != nil && members[name] == nil {
			members[name] = map[string]bool{leader.Name: true}
		}
	}
	segs := make([]Segment, 0, len(members))
	for peer, ms := range members {
		leader := leaderOf[peer]
		segs = append(segs, Segment{Leader: leader.Name, Location: leader.Location, Peer: peer, Members: sortedKeys(ms)})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Leader < segs[j].Leader })
	return segs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
