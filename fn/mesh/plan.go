// Package mesh is the planner of kilomesh: given the declared members of one
// ClusterMesh and the Nodes observed in each, it decides which Kilo Peers
// every member must hold, and what to report. It is pure: plain Go values
// in, plain Go values out, no client and no protobuf. Its rules are written
// down in the project's docs (docs/how-it-works.md) and pinned by its tests.
package mesh

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Reasons of problems that leave nodes in the mesh but change or withhold
// Peers. Like skip reasons they are exact strings.
const (
	// ReasonNodeIPConflict: an internal address of a node is not routed
	// because routing it would break another route.
	ReasonNodeIPConflict = "NodeIPConflict"
	// ReasonPeerNameConflict: a Peer of the same name that the mesh does not
	// own is in a member cluster.
	ReasonPeerNameConflict = kubev1alpha1.ReasonPeerNameConflict
	// ReasonPeerKeyConflict: a Peer the mesh does not own already uses the
	// segment's public key in a member cluster.
	ReasonPeerKeyConflict = kubev1alpha1.ReasonPeerKeyConflict
	// ReasonAnnotationInvalid: an optional Kilo annotation of a node is
	// malformed and was not used.
	ReasonAnnotationInvalid = "NodeAnnotationInvalid"
)

// maxListedSkips is how many skipped nodes a cluster's status lists.
const maxListedSkips = 20

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
	// Status of the mesh.
	Status meshv1alpha1.ClusterMeshStatus
	// Warnings, one per problem kind per cluster.
	Warnings []Warning
	// Pending lists transient problems: while it is not empty the mesh is
	// converging.
	Pending []string
}

// Do plans a mesh. It returns an *InvalidSpecError or an *OverlapError when
// the mesh must be frozen: then no Peer may be created, changed or deleted.
func Do(in *Input) (*Plan, error) {
	clusters, errs := validateSpec(&in.Spec)
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errors: errs}
	}
	if o := append(overlaps(clusters), crossMeshOverlaps(clusters, in.Others)...); len(o) > 0 {
		return nil, &OverlapError{Overlaps: o}
	}

	p := &planner{in: in, advertise: in.Spec.AdvertiseNodeIPs == nil || *in.Spec.AdvertiseNodeIPs}
	p.sources = make([]*sourceCluster, len(clusters))
	for i, c := range clusters {
		p.sources[i] = newSourceCluster(c, in.Observations[c.spec.Name])
		p.sources[i].planSegments(in.Spec.Granularity)
		if c.keepalive > p.keepalive {
			p.keepalive = c.keepalive
		}
	}
	byName := append([]*sourceCluster(nil), p.sources...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].spec.Name < byName[j].spec.Name })
	dedupeKeys(byName)
	for _, sc := range p.sources {
		sc.finishSegments()
	}
	p.buildSegments()
	p.place()
	if err := p.validatePeers(); err != nil {
		return nil, err
	}
	p.report()
	return &p.plan, nil
}

// planner holds the state of one call of Do.
type planner struct {
	in        *Input
	advertise bool
	keepalive int
	sources   []*sourceCluster
	built     map[*segment]*builtSegment
	plan      Plan

	// problems by cluster, then reason, in the order found.
	problems map[string]map[string][]string
	// placed counts the Peers of each source written into other clusters.
	placed map[string]int
	// conflicts by target cluster.
	conflicts map[string][]meshv1alpha1.PeerConflict
	// endpoints are the endpoint addresses of every segment of the mesh.
	endpoints map[netip.Addr]string
	// advertisers count the segments that advertise an internal address.
	advertisers map[netip.Addr]int
}

// A builtSegment is the part of a segment's Peer that is the same in every
// cluster it is written into.
type builtSegment struct {
	seg       *segment
	name      string
	key       string
	labels    map[string]string
	roaming   bool
	keepalive int
	// allowed are the allowedIPs, in order, without the anchor CIDRs.
	allowed []string
	// hosts are the internal addresses among allowed, with their index.
	hosts []hostRoute
}

type hostRoute struct {
	addr  netip.Addr
	index int
	node  string
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

// buildSegments computes what each segment's Peer has in common across
// targets: name, key, keepalive and allowedIPs without per-target drops.
func (p *planner) buildSegments() {
	p.built = map[*segment]*builtSegment{}

	// An endpoint host routed into any tunnel breaks the tunnel to that
	// endpoint; an internal address advertised by two segments would be
	// routed to whichever Kilo configured last. Neither is routed.
	p.endpoints = map[netip.Addr]string{}
	p.advertisers = map[netip.Addr]int{}
	for _, sc := range p.sources {
		for _, s := range sc.segments {
			// The message names the first segment by (cluster, node) that
			// uses the address, whatever the order of the spec.
			if e := s.leader.endpoint; e != nil && e.IP.IsValid() {
				who := sc.spec.Name + "/" + s.leader.obs.Name
				if prev, ok := p.endpoints[e.IP]; !ok || who < prev {
					p.endpoints[e.IP] = who
				}
			}
			if p.advertise {
				for _, a := range p.internalAddrs(s) {
					p.advertisers[a.addr]++
				}
			}
		}
	}

	for _, sc := range p.sources {
		labels := peerLabels(p.in.Namespace, p.in.Name, sc.spec.Name)
		for _, s := range sc.segments {
			b := &builtSegment{
				seg:     s,
				name:    PeerName(p.in.Namespace, p.in.Name, sc.spec.Name, s.leader.obs.Name),
				key:     kilov1alpha1.EncodeKey(s.leader.key),
				labels:  labels,
				roaming: s.leader.endpoint == nil,
			}
			b.keepalive = p.keepaliveOf(s, b.roaming)
			p.buildAllowed(b)
			p.built[s] = b
		}
	}
}

// keepaliveOf is the keepalive of a segment's Peer: the mesh-wide floor, or
// the leader's own kilo.squat.ai/persistent-keepalive when larger, and at
// least RoamingKeepalive for a segment without an endpoint.
func (p *planner) keepaliveOf(s *segment, roaming bool) int {
	k := p.keepalive
	if v := s.leader.kilo.PersistentKeepalive; v != "" {
		n, err := ParseKeepalive(v)
		switch {
		case err != nil:
			p.problem(s.cluster.spec.Name, ReasonAnnotationInvalid,
				fmt.Sprintf("%s: %s %q %v", s.leader.obs.Name, kilov1alpha1.AnnotationPersistentKeepalive, v, err))
		case n > k:
			k = n
		}
	}
	if roaming && k < RoamingKeepalive {
		k = RoamingKeepalive
	}
	return k
}

// buildAllowed lists the allowedIPs of a segment, in the order `kgctl
// showconf --as-peer` uses: per member by name its pod CIDRs and internal
// addresses, then the leader's WireGuard address. Duplicates keep the first.
func (p *planner) buildAllowed(b *builtSegment) {
	s := b.seg
	seen := map[netip.Prefix]bool{}
	add := func(pr netip.Prefix) bool {
		if seen[pr] {
			return false
		}
		seen[pr] = true
		b.allowed = append(b.allowed, pr.String())
		return true
	}
	for _, m := range s.members {
		for _, pr := range m.pods {
			add(pr)
		}
		if !p.advertise {
			continue
		}
		for _, a := range p.internalAddrsOf(m) {
			if p.routable(s, m, a.addr) && add(HostRoute(a.addr)) {
				b.hosts = append(b.hosts, hostRoute{addr: a.addr, index: len(b.allowed) - 1, node: m.obs.Name})
			}
		}
	}
	add(HostRoute(s.leader.wgIP))
}

// routable tells whether an internal address of member m may be routed
// through segment s in every target, and reports why not.
func (p *planner) routable(s *segment, m *node, a netip.Addr) bool {
	if e := s.leader.endpoint; e != nil && e.IP == a {
		return false // the segment's own endpoint: never through its own tunnel
	}
	if other, ok := p.endpoints[a]; ok {
		p.problem(s.cluster.spec.Name, ReasonNodeIPConflict, fmt.Sprintf("%s %s (the endpoint of %s)", m.obs.Name, a, other))
		return false
	}
	if p.advertisers[a] > 1 {
		p.problem(s.cluster.spec.Name, ReasonNodeIPConflict, fmt.Sprintf("%s %s (advertised by more than one segment)", m.obs.Name, a))
		return false
	}
	return true
}

type addrOf struct {
	addr netip.Addr
	node string
}

// internalAddrs are the internal addresses of every member of a segment.
func (p *planner) internalAddrs(s *segment) []addrOf {
	var out []addrOf
	seen := map[netip.Addr]bool{}
	for _, m := range s.members {
		for _, a := range p.internalAddrsOf(m) {
			if !seen[a.addr] {
				seen[a.addr] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// internalAddrsOf are the internal addresses of a node: the host part of
// kilo.squat.ai/internal-ip (the address Kilo routes), then its InternalIPs.
func (p *planner) internalAddrsOf(n *node) []addrOf {
	var out []addrOf
	if v := n.kilo.InternalIP; v != "" {
		if a, err := ParseHostIP(v); err == nil && routableHost(a) {
			out = append(out, addrOf{addr: a, node: n.obs.Name})
		}
	}
	for _, s := range n.obs.InternalIPs {
		if a, err := ParseHostIP(s); err == nil && routableHost(a) {
			out = append(out, addrOf{addr: a, node: n.obs.Name})
		}
	}
	return out
}

// routableHost tells whether a node address can be routed to another
// cluster at all.
func routableHost(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast()
}

// target is what a cluster knows of itself as a receiver of Peers.
type target struct {
	sc         *sourceCluster
	internal   map[netip.Addr]string // its nodes' internal addresses
	discovered map[[kilov1alpha1.KeyLen]byte]Endpoint
	foreignKey map[[kilov1alpha1.KeyLen]byte]string
	foreignNam map[string]bool
}

func (p *planner) newTarget(sc *sourceCluster) *target {
	t := &target{sc: sc, internal: map[netip.Addr]string{}, discovered: map[[kilov1alpha1.KeyLen]byte]Endpoint{},
		foreignKey: map[[kilov1alpha1.KeyLen]byte]string{}, foreignNam: map[string]bool{}}
	for _, n := range sc.nodes {
		for _, a := range p.internalAddrsOf(n) {
			if _, ok := t.internal[a.addr]; !ok {
				t.internal[a.addr] = n.obs.Name
			}
		}
		// Endpoints this cluster's nodes learned from handshakes; the first
		// node by name that knows a key wins.
		if v := n.kilo.DiscoveredEndpoints; v != "" {
			d, err := ParseDiscoveredEndpoints(v)
			if err != nil {
				p.problem(sc.spec.Name, ReasonAnnotationInvalid, fmt.Sprintf("%s: %s %v", n.obs.Name, kilov1alpha1.AnnotationDiscoveredEndpoints, err))
				continue
			}
			for k, e := range d {
				if _, ok := t.discovered[k]; !ok {
					t.discovered[k] = e
				}
			}
		}
	}
	if sc.obs != nil {
		for _, fp := range sc.obs.ForeignPeers {
			t.foreignNam[fp.Name] = true
			if k, ok := kilov1alpha1.ParseKey(fp.PublicKey); ok {
				if _, dup := t.foreignKey[k]; !dup {
					t.foreignKey[k] = fp.Name
				}
			}
		}
	}
	return t
}

// place writes every segment of every source into every other cluster.
func (p *planner) place() {
	p.plan.Peers = make(map[string][]kilov1alpha1.Peer, len(p.sources))
	p.placed = map[string]int{}
	p.conflicts = map[string][]meshv1alpha1.PeerConflict{}
	for _, tc := range p.sources {
		t := p.newTarget(tc)
		var peers []kilov1alpha1.Peer
		for _, sc := range p.sources {
			if sc == tc {
				continue
			}
			peers = p.placeSource(peers, t, sc)
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
		p.plan.Peers[tc.spec.Name] = peers
	}
}

// placeSource appends the Peers of one source cluster for one target.
func (p *planner) placeSource(peers []kilov1alpha1.Peer, t *target, sc *sourceCluster) []kilov1alpha1.Peer {
	tname := t.sc.spec.Name
	anchored := false
	for _, s := range anchorOrder(sc.segments) {
		b := p.built[s]
		if t.foreignNam[b.name] {
			p.conflicts[tname] = append(p.conflicts[tname], meshv1alpha1.PeerConflict{Peer: b.name, Reason: ReasonPeerNameConflict,
				Message: fmt.Sprintf("a Peer named %s that this mesh does not own exists in cluster %s", b.name, tname)})
			continue
		}
		if other, ok := t.foreignKey[s.leader.key]; ok {
			p.conflicts[tname] = append(p.conflicts[tname], meshv1alpha1.PeerConflict{Peer: b.name, Reason: ReasonPeerKeyConflict,
				Message: fmt.Sprintf("Peer %s, which this mesh does not own, already uses the public key of %s node %s", other, sc.spec.Name, s.leader.obs.Name)})
			continue
		}

		endpoint := s.leader.endpoint
		if d, ok := t.discovered[s.leader.key]; ok {
			endpoint = &d
		}
		allowed := p.allowedFor(b, t, endpoint)
		if !anchored && len(sc.anchor) > 0 {
			anchored = true
			allowed = withAnchor(allowed, sc.anchor)
		}
		peer := kilov1alpha1.Peer{
			TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: b.labels},
			Spec: kilov1alpha1.PeerSpec{
				AllowedIPs:          allowed,
				PublicKey:           b.key,
				PersistentKeepalive: b.keepalive,
			},
		}
		if endpoint != nil {
			peer.Spec.Endpoint = endpoint.AsPeerEndpoint()
		}
		peers = append(peers, peer)
		p.placed[sc.spec.Name]++
	}
	return peers
}

// anchorOrder lists the segments of a cluster in the order they are offered
// the anchor CIDRs: by leader name, those with an endpoint first.
func anchorOrder(segs []*segment) []*segment {
	out := make([]*segment, 0, len(segs))
	for _, s := range segs {
		if s.leader.endpoint != nil {
			out = append(out, s)
		}
	}
	for _, s := range segs {
		if s.leader.endpoint == nil {
			out = append(out, s)
		}
	}
	return out
}

// allowedFor drops, for one target, the internal addresses that the target
// uses itself (the route would hijack its local traffic) and the address of
// the endpoint the target dials. Most Peers need no drop and share the
// segment's slice.
func (p *planner) allowedFor(b *builtSegment, t *target, endpoint *Endpoint) []string {
	var drop []int
	for _, h := range b.hosts {
		if endpoint != nil && endpoint.IP == h.addr {
			drop = append(drop, h.index)
			continue
		}
		if tn, ok := t.internal[h.addr]; ok {
			drop = append(drop, h.index)
			p.problem(b.seg.cluster.spec.Name, ReasonNodeIPConflict, fmt.Sprintf("%s %s (an internal address of %s node %s)", h.node, h.addr, t.sc.spec.Name, tn))
		}
	}
	if len(drop) == 0 {
		return b.allowed
	}
	out := make([]string, 0, len(b.allowed)-len(drop))
	for i, a := range b.allowed {
		if len(drop) > 0 && drop[0] == i {
			drop = drop[1:]
			continue
		}
		out = append(out, a)
	}
	return out
}

// withAnchor appends the anchor CIDRs a Peer does not route already (an
// additional CIDR may be a node's host route), into a new slice: allowed may
// be shared with the segment's Peers in other targets.
func withAnchor(allowed []string, anchor []netip.Prefix) []string {
	out := make([]string, len(allowed), len(allowed)+len(anchor))
	copy(out, allowed)
	for _, p := range anchor {
		s := p.String()
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// validatePeers runs Kilo's own checks on every Peer. A Peer that fails them
// is a bug of the planner: Kilo would silently ignore it.
func (p *planner) validatePeers() error {
	for _, sc := range p.sources {
		for i := range p.plan.Peers[sc.spec.Name] {
			peer := &p.plan.Peers[sc.spec.Name][i]
			if errs := peer.Validate(); len(errs) > 0 {
				return fmt.Errorf("planned Peer %s for cluster %s fails Kilo's validation: %w", peer.Name, sc.spec.Name, errs.ToAggregate())
			}
		}
	}
	return nil
}

// report writes the status and the warnings.
func (p *planner) report() {
	st := &p.plan.Status
	st.ClusterCount = len(p.sources)
	for _, sc := range p.sources {
		cs := p.clusterStatus(sc)
		st.PeerCount += len(p.plan.Peers[sc.spec.Name])
		st.SkippedNodeCount += cs.SkippedNodes
		st.Clusters = append(st.Clusters, cs)
		p.problemWarnings(sc.spec.Name)
		p.conflictWarnings(sc.spec.Name, cs.Conflicts)
	}
}

// clusterStatus reports one member, and warns once per skip reason.
func (p *planner) clusterStatus(sc *sourceCluster) meshv1alpha1.ClusterStatus {
	name := sc.spec.Name
	cs := meshv1alpha1.ClusterStatus{Name: name, Nodes: len(sc.nodes), Segments: len(sc.segments), Peers: p.placed[name], Conflicts: p.conflicts[name]}
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
	byReason := map[string][]string{}
	var reasons []string
	for _, n := range sc.nodes {
		if n.skipped == nil {
			continue
		}
		cs.SkippedNodes++
		if len(cs.Skipped) < maxListedSkips {
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
		p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: cluster, Reason: k,
			Message: fmt.Sprintf("cluster %s: %s: %s", cluster, k, listSome(sortedUnique(p.problems[cluster][k])))})
	}
}

// conflictWarnings warns once per kind of conflict with foreign Peers in a
// cluster.
func (p *planner) conflictWarnings(cluster string, conflicts []meshv1alpha1.PeerConflict) {
	byReason := map[string][]string{}
	for _, c := range conflicts {
		byReason[c.Reason] = append(byReason[c.Reason], c.Peer)
	}
	for _, r := range []string{ReasonPeerKeyConflict, ReasonPeerNameConflict} {
		if len(byReason[r]) > 0 {
			p.plan.Warnings = append(p.plan.Warnings, Warning{Cluster: cluster, Reason: r,
				Message: fmt.Sprintf("cluster %s: %s not written, a Peer this mesh does not own is in the way (%s): %s",
					cluster, plural(len(byReason[r]), "Peer"), r, listSome(byReason[r]))})
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
