package view

import (
	"fmt"
	"sort"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
)

// A Status reports one mesh: its conditions, every member, and whether it
// converged.
type Status struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Delivery    string `json:"delivery"`
	Granularity string `json:"granularity,omitempty"`
	// Converged is true when every condition says the mesh works and every
	// member holds every Peer meant for it.
	Converged bool `json:"converged"`
	// Waiting lists why the mesh has not converged.
	Waiting    []string    `json:"waiting,omitempty"`
	Peers      int         `json:"peers"`
	Skipped    int         `json:"skippedNodes"`
	Conditions []Condition `json:"conditions"`
	Members    []Member    `json:"members"`
}

// A Condition of a mesh.
type Condition struct {
	Type    string     `json:"type"`
	Status  string     `json:"status"`
	Reason  string     `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	// Stale is true when the condition was set for an older generation of
	// the mesh's spec.
	Stale bool `json:"stale,omitempty"`
}

// A Member reports one member cluster of a mesh.
type Member struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	// Observed is false while the member was never observed.
	Observed bool `json:"observed"`
	Nodes    int  `json:"nodes"`
	Segments int  `json:"segments"`
	// Leaders lead the member's segments, as the planner elects them.
	Leaders []string `json:"leaders,omitempty"`
	// PeersOut counts the member's Peers written into the other members.
	PeersOut int `json:"peersOut"`
	// Desired and Applied count the Peers meant for this member and those
	// its PeerSet applied (or its Ready Objects); nil while unknown.
	Desired *int `json:"desired,omitempty"`
	Applied *int `json:"applied,omitempty"`
	// Skipped counts the member's skipped nodes by reason; MoreSkipped
	// counts those the status does not list.
	Skipped      map[string]int `json:"skipped,omitempty"`
	MoreSkipped  int            `json:"moreSkipped,omitempty"`
	SkippedNodes int            `json:"skippedNodes"`
	Conflicts    int            `json:"conflicts"`
	LastObserved *time.Time     `json:"lastObserved,omitempty"`
	Message      string         `json:"message,omitempty"`
	// Handshakes are the Peers written into the member that its leaders
	// recorded a WireGuard handshake with; nil while they record none.
	Handshakes *meshv1alpha1.Handshakes `json:"handshakes,omitempty"`
}

// MeshStatus reports a mesh from a snapshot.
func MeshStatus(s *snapshot.Snapshot, m *snapshot.Mesh, p *Planned) Status {
	st := Status{
		Namespace:   m.Namespace,
		Name:        m.Name,
		Delivery:    string(m.Delivery()),
		Granularity: string(m.Spec.Granularity),
		Peers:       m.Status.PeerCount,
		Skipped:     m.Status.SkippedNodeCount,
	}
	for _, t := range snapshot.ConditionOrder {
		c, ok := m.Condition(t)
		if !ok {
			continue
		}
		st.Conditions = append(st.Conditions, condition(c, m.Generation))
	}
	for _, c := range m.Status.Conditions {
		if !known(c.Type) {
			st.Conditions = append(st.Conditions, condition(c, m.Generation))
		}
	}
	byName := map[string]*meshv1alpha1.ClusterStatus{}
	for i := range m.Status.Clusters {
		byName[m.Status.Clusters[i].Name] = &m.Status.Clusters[i]
	}
	for _, c := range m.Spec.Clusters {
		st.Members = append(st.Members, member(m, c.Name, byName[c.Name], p))
	}
	st.Waiting = waiting(m, st)
	st.Converged = len(st.Waiting) == 0
	return st
}

func known(t xpv2.ConditionType) bool {
	for _, k := range snapshot.ConditionOrder {
		if k == t {
			return true
		}
	}
	return false
}

func condition(c xpv2.Condition, generation int64) Condition {
	out := Condition{Type: string(c.Type), Status: string(c.Status), Reason: string(c.Reason), Message: c.Message}
	if !c.LastTransitionTime.IsZero() {
		t := c.LastTransitionTime.UTC()
		out.Since = &t
	}
	out.Stale = c.ObservedGeneration != 0 && generation != 0 && c.ObservedGeneration < generation
	return out
}

func member(m *snapshot.Mesh, name string, cs *meshv1alpha1.ClusterStatus, p *Planned) Member {
	out := Member{Name: name}
	if cs != nil {
		out.Reachable = cs.Reachable
		out.Observed = cs.LastObserved != nil
		out.Nodes = cs.Nodes
		out.Segments = cs.Segments
		out.PeersOut = cs.Peers
		out.SkippedNodes = cs.SkippedNodes
		out.MoreSkipped = cs.MoreSkipped
		out.Conflicts = len(cs.Conflicts) + cs.MoreConflicts
		out.Message = cs.Message
		out.Handshakes = cs.Handshakes
		if cs.LastObserved != nil {
			t := cs.LastObserved.UTC()
			out.LastObserved = &t
		}
		for _, sk := range cs.Skipped {
			if out.Skipped == nil {
				out.Skipped = map[string]int{}
			}
			out.Skipped[sk.Reason]++
		}
	}
	for _, s := range p.Segments[name] {
		out.Leaders = append(out.Leaders, s.Leader)
	}
	out.Desired, out.Applied = peersIn(m, name)
	return out
}

// peersIn counts the Peers meant for a member and those applied: as its
// PeerSet reports them (before it reported, the Peers its spec holds, and
// applied nil), or its Objects and the Ready ones among them. The mesh's
// own delivery comes first, while a mesh moves from one to the other.
func peersIn(m *snapshot.Mesh, name string) (*int, *int) {
	ps, hasSet := m.PeerSets[name]
	objects, hasObjects := m.Objects[name]
	if hasObjects && (!hasSet || m.Delivery() == meshv1alpha1.DeliveryObjects) {
		desired, ready := len(objects), 0
		for _, o := range objects {
			if c, ok := o.Condition(snapshot.TypeReady); ok && c.Status == "True" {
				ready++
			}
		}
		return &desired, &ready
	}
	if !hasSet {
		return nil, nil
	}
	desired := m.Keeps(ps)
	if _, ok := snapshot.PeerSetCondition(ps, snapshot.TypeSynced); !ok {
		return &desired, nil
	}
	desired, applied := ps.Status.AtProvider.Desired, ps.Status.AtProvider.Applied
	return &desired, &applied
}

// Conditions a converged mesh has, with the status each must have.
var convergedConditions = []struct {
	t      xpv2.ConditionType
	status string
}{
	{snapshot.TypeReady, "True"},
	{snapshot.TypeSynced, "True"},
	{snapshot.TypeNetworksOverlap, "False"},
	{snapshot.TypeClustersReachable, "True"},
	{snapshot.TypePeersDelivered, "True"},
	{snapshot.TypeConverged, "True"},
}

// waiting lists why a mesh has not converged: a condition that is not as it
// must be (or that was set for an older spec), a member whose status is
// missing or that cannot be reached, and a member that does not hold every
// Peer meant for it.
func waiting(m *snapshot.Mesh, st Status) []string {
	var out []string
	for _, want := range convergedConditions {
		c, ok := m.Condition(want.t)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s is not set yet", want.t))
		case string(c.Status) != want.status:
			msg := fmt.Sprintf("%s is %s (%s)", want.t, c.Status, c.Reason)
			if c.Message != "" {
				msg += ": " + c.Message
			}
			out = append(out, msg)
		case c.ObservedGeneration != 0 && m.Generation != 0 && c.ObservedGeneration < m.Generation:
			out = append(out, fmt.Sprintf("%s was set for generation %d of the spec, which is at %d now", want.t, c.ObservedGeneration, m.Generation))
		}
	}
	for _, mb := range st.Members {
		switch {
		case !mb.Observed:
			out = append(out, fmt.Sprintf("member %s has not been observed", mb.Name))
		case !mb.Reachable:
			out = append(out, fmt.Sprintf("member %s is unreachable", mb.Name))
		}
		out = append(out, delivery(m, mb)...)
	}
	return out
}

// delivery says why a member does not hold every Peer meant for it yet.
func delivery(m *snapshot.Mesh, mb Member) []string {
	ps, hasSet := m.PeerSets[mb.Name]
	_, hasObjects := m.Objects[mb.Name]
	switch {
	case hasObjects && (!hasSet || m.Delivery() == meshv1alpha1.DeliveryObjects):
		if *mb.Applied < *mb.Desired {
			return []string{fmt.Sprintf("member %s: %d of %d Objects ready", mb.Name, *mb.Applied, *mb.Desired)}
		}
		return nil
	case !hasSet && m.Delivery() == meshv1alpha1.DeliveryObjects:
		return []string{fmt.Sprintf("member %s has no Object yet", mb.Name)}
	case !hasSet:
		return []string{fmt.Sprintf("member %s has no PeerSet yet", mb.Name)}
	}
	var out []string
	switch {
	case mb.Applied == nil:
		out = append(out, fmt.Sprintf("member %s: its PeerSet has not been applied yet", mb.Name))
	case ps.Status.AtProvider.Desired != m.Keeps(ps):
		out = append(out, fmt.Sprintf("member %s: its PeerSet reports %d desired Peers, its spec holds %d", mb.Name, ps.Status.AtProvider.Desired, m.Keeps(ps)))
	case ps.Status.AtProvider.Applied != ps.Status.AtProvider.Desired:
		out = append(out, fmt.Sprintf("member %s: %d of %d Peers applied", mb.Name, ps.Status.AtProvider.Applied, ps.Status.AtProvider.Desired))
	}
	if c, ok := snapshot.PeerSetCondition(ps, snapshot.TypeSynced); ok && c.Status == "False" {
		out = append(out, fmt.Sprintf("member %s: its PeerSet cannot sync: %s", mb.Name, c.Message))
	}
	return out
}

// SkippedReasons lists the reasons of a member's skipped nodes, sorted.
func (mb Member) SkippedReasons() []string {
	out := make([]string, 0, len(mb.Skipped))
	for r := range mb.Skipped {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
