// Package mesh is the planner of kilomesh: given the declared members of one
// ClusterMesh and the Nodes observed in each, it decides which Kilo Peers
// every member must hold, and what to report. It is pure: plain Go values
// in, plain Go values out, no client and no protobuf. Its rules are written
// down in the project's docs (docs/how-it-works.md) and pinned by its tests.
//
// The planner is split along its rules: kilosegments.go forms Kilo's segments
// and elects their leaders, allowed.go decides what each segment's Peer
// routes, place.go writes the Peers into every other member, and report.go
// says what was left out and why.
package mesh

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// An Observation is what the mesh knows of the Nodes of one member cluster.
type Observation struct {
	kubev1alpha1.NodeInventoryObservation

	// Reachable is false while the cluster cannot be observed. The
	// observation is then the last one known.
	Reachable bool
	// UnreachableSince is when the cluster stopped answering.
	UnreachableSince *metav1.Time
	// Problem is why the cluster cannot be observed.
	Problem string
}

// A DeliveredPeer is a Peer the mesh has already composed for a member: what
// the observed composed resources hold.
type DeliveredPeer struct {
	PublicKey  string
	AllowedIPs []string
}

// Input is everything the planner reads.
type Input struct {
	// Namespace and Name of the ClusterMesh.
	Namespace, Name string
	// Spec of the ClusterMesh.
	Spec meshv1alpha1.ClusterMeshSpec
	// Observations by cluster name. A cluster without one was never
	// observed: it contributes no Peers and receives those of the others.
	Observations map[string]*Observation
	// Others are the other ClusterMeshes of the namespace.
	Others []OtherMesh
	// Now is the time of the plan: a node whose heartbeat has been stale
	// for longer than Kilo keeps it no longer holds the mesh back. Zero in
	// a dry run, where no stale node is that old.
	Now time.Time
	// Delivered are the Peers the mesh has composed so far, by the member
	// they are written into, then by Peer name. Whoever holds a key or a
	// route first keeps it: a node that copies a key, or a Peer someone
	// adds later over a route, never displaces what is delivered.
	Delivered map[string]map[string]DeliveredPeer
	// PeerRefs asks for Plan.PeerRefs instead of Plan.Peers.
	PeerRefs bool
}

// A Warning summarises one kind of problem in one cluster.
type Warning struct {
	Cluster string
	Reason  string
	Message string
}

// A Plan is the planner's answer.
type Plan struct {
	// Peers holds, by member cluster, the Peers it must hold, sorted by
	// name.
	Peers map[string][]kilov1alpha1.Peer
	// PeerRefs holds the same Peers instead, when Input.PeerRefs asks for
	// them, and Peers is then nil. The members that receive a segment's
	// Peer as most do share one: a mesh of C clusters of N nodes holds
	// about C x N Peers, not C x (C-1) x N. They are read, never written.
	PeerRefs map[string][]*kilov1alpha1.Peer
	// Status of the mesh.
	Status meshv1alpha1.ClusterMeshStatus
	// Warnings, one per problem kind per cluster.
	Warnings []Warning
	// Pending lists transient problems: while it is not empty the mesh is
	// converging.
	Pending []string
	// Withheld names, by member, why no new route is written into it: the
	// Peers there that the mesh does not own are not known whole.
	Withheld map[string]string
	// Skipped counts, by member and reason, every skipped node, and
	// Conflicts every conflict in a member, by reason: the status lists
	// only some of them.
	Skipped, Conflicts map[string]map[string]int
}

// Do plans a mesh. It returns an *InvalidSpecError or an *OverlapError when
// the mesh must be frozen: then no Peer may be created, changed or deleted.
func Do(in *Input) (*Plan, error) {
	clusters, fam, errs := validateSpec(&in.Spec)
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errors: errs}
	}
	var r overlapReport
	overlaps(clusters, &r)
	crossMeshOverlaps(clusters, in.Others, &r)
	if err := r.err(); err != nil {
		return nil, err
	}

	p := &planner{in: in, family: fam, advertise: in.Spec.AdvertiseNodeIPs == nil || *in.Spec.AdvertiseNodeIPs}
	p.sources = make([]*sourceCluster, len(clusters))
	for i, c := range clusters {
		p.sources[i] = newSourceCluster(c, in.Observations[c.spec.Name])
		p.sources[i].planSegments(in.Spec.Granularity, fam, in.Now)
		if c.keepalive > p.keepalive {
			p.keepalive = c.keepalive
		}
	}
	byName := append([]*sourceCluster(nil), p.sources...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].spec.Name < byName[j].spec.Name })
	dedupeKeys(byName, p.peerNameOf, p.deliveredKeys())
	routed := p.deliveredRoutes()
	for _, sc := range p.sources {
		p.keepPodIncumbents(sc, routed)
		sc.finishSegments()
		for _, n := range sc.notLeaders {
			p.problem(sc.spec.Name, ReasonNodeNotLeader, fmt.Sprintf("%s (Kilo elects %s)", n[0].obs.Name, n[1].obs.Name))
		}
	}
	p.buildSegments()
	p.place()
	if err := p.validatePeers(); err != nil {
		return nil, err
	}
	p.report()
	if !in.PeerRefs {
		p.plan.Peers = copyPeers(p.plan.PeerRefs)
		p.plan.PeerRefs = nil
	}
	return &p.plan, nil
}

// planner holds the state of one call of Do.
type planner struct {
	in        *Input
	family    family
	advertise bool
	keepalive int
	sources   []*sourceCluster
	plan      Plan

	// problems by cluster, then reason, in the order found.
	problems map[string]map[string][]string
	// placed counts the Peers of each source written into other clusters.
	placed map[string]int
	// invalid is set once a placed Peer failed Kilo's checks.
	invalid bool
	// conflicts by target cluster.
	conflicts map[string][]meshv1alpha1.PeerConflict
	// endpoints are the endpoint addresses of every segment of the mesh.
	endpoints map[netip.Addr]string
	// advertisers count the segments that advertise an internal address.
	advertisers map[netip.Addr]int
	// handshakes are, by target, the Peers its leaders shook hands with.
	handshakes map[string]*meshv1alpha1.Handshakes
}

func (p *planner) problem(cluster, reason, what string) {
	if p.problems == nil {
		p.problems = map[string]map[string][]string{}
	}
	if p.problems[cluster] == nil {
		p.problems[cluster] = map[string][]string{}
	}
	p.problems[cluster][reason] = append(p.problems[cluster][reason], what)
}

// peerNameOf is the name of the Peer a leader's segment would have.
func (p *planner) peerNameOf(n *node) string {
	if n.peerName == "" { // never a name: PeerName ends in a hash
		n.peerName = PeerName(p.in.Namespace, p.in.Name, n.cluster.spec.Name, n.obs.Name)
	}
	return n.peerName
}

// deliveredRoutes lists, by Peer name, the routes its delivered Peers carry
// in any member.
func (p *planner) deliveredRoutes() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, peers := range p.in.Delivered {
		for name, d := range peers {
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			for _, r := range d.AllowedIPs {
				out[name][r] = true
			}
		}
	}
	return out
}

// deliveredKeys lists, by public key, the names of the delivered Peers that
// carry it.
func (p *planner) deliveredKeys() map[[kilov1alpha1.KeyLen]byte]map[string]bool {
	out := map[[kilov1alpha1.KeyLen]byte]map[string]bool{}
	for _, peers := range p.in.Delivered {
		for name, d := range peers {
			k, ok := kilov1alpha1.ParseKey(d.PublicKey)
			if !ok {
				continue
			}
			if out[k] == nil {
				out[k] = map[string]bool{}
			}
			out[k][name] = true
		}
	}
	return out
}

// copyPeers is Plan.Peers of Plan.PeerRefs.
func copyPeers(refs map[string][]*kilov1alpha1.Peer) map[string][]kilov1alpha1.Peer {
	out := make(map[string][]kilov1alpha1.Peer, len(refs))
	for target, ps := range refs {
		var peers []kilov1alpha1.Peer // nil for a target that receives nothing, as before
		if len(ps) > 0 {
			peers = make([]kilov1alpha1.Peer, len(ps))
		}
		for i, peer := range ps {
			peers[i] = *peer
		}
		out[target] = peers
	}
	return out
}
