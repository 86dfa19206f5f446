package mesh

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// maxForeignRoutes is how many routes of the Peers a member holds that the
// mesh does not own are read, as many as the inventory publishes at most.
// Past it the member's foreign routes are not known whole, and no new route
// is written into it.
const maxForeignRoutes = 16384

// target is what a cluster knows of itself as a receiver of Peers.
type target struct {
	sc *sourceCluster
	// discovered are the endpoints the target's leaders learned from
	// handshakes, of the keys they agree on; disputed the keys for which
	// two of its leaders recorded different endpoints.
	discovered map[[kilov1alpha1.KeyLen]byte]Endpoint
	disputed   map[[kilov1alpha1.KeyLen]byte]bool
	foreignKey map[[kilov1alpha1.KeyLen]byte]string
	foreignNam map[string]bool
	// routes of the Peers the mesh does not own, indexed, with the Peer
	// that routes each.
	routes     *prefixIndex
	routeList  []netip.Prefix
	routeOwner []string
	// delivered are the Peers the mesh composed into this cluster so far.
	delivered map[string]DeliveredPeer
	// incomplete names the bound that kept the Peers the mesh does not own
	// from being known whole; withheld counts the routes it held back.
	incomplete string
	withheld   int
}

func (p *planner) newTarget(sc *sourceCluster) *target {
	t := &target{sc: sc, discovered: map[[kilov1alpha1.KeyLen]byte]Endpoint{},
		foreignKey: map[[kilov1alpha1.KeyLen]byte]string{}, foreignNam: map[string]bool{}, delivered: p.in.Delivered[sc.spec.Name]}
	// Only a segment leader runs WireGuard towards the other members'
	// Peers, so only what a leader learned from a handshake is believed: any
	// other node of the target could write anything in its annotation.
	claims := map[[kilov1alpha1.KeyLen]byte][]claim{}
	for _, s := range sc.segments {
		p.readDiscovered(t, s.leader, claims)
	}
	p.settleDiscovered(t, claims)
	if sc.obs != nil {
		t.readForeign(sc.obs.ForeignPeers)
		if sc.obs.ForeignPeersIncomplete != "" {
			t.incomplete = "provider-kilomesh published only part of them: " + safetext.Message(sc.obs.ForeignPeersIncomplete, maxQuoted)
		}
	}
	t.routes = newPrefixIndex(t.routeList)
	return t
}

// A claim is what one leader of a target says it learned of a key from a
// handshake.
type claim struct {
	leader   string
	endpoint Endpoint
}

// readDiscovered reads the endpoints a leader of the target learned from
// handshakes into claims.
func (p *planner) readDiscovered(t *target, n *node, claims map[[kilov1alpha1.KeyLen]byte][]claim) {
	v := n.kilo.DiscoveredEndpoints
	if v == "" {
		return
	}
	d, err := ParseDiscoveredEndpoints(v)
	if err != nil {
		p.problem(t.sc.spec.Name, ReasonAnnotationInvalid, fmt.Sprintf("%s: %s %v", n.obs.Name, kilov1alpha1.AnnotationDiscoveredEndpoints, err))
		return
	}
	for k, e := range d {
		claims[k] = append(claims[k], claim{leader: n.obs.Name, endpoint: e})
	}
}

// settleDiscovered believes an endpoint of a key that the target's leaders
// agree on. Each leader's word is its node owner's, which kilomesh cannot
// check: where two leaders recorded different endpoints, neither is taken
// over the other, the Peer keeps its own endpoint, and the mesh says so.
// (Kilo itself lets each leader dial what it learned; the Peer kilomesh
// writes is one for all of them.)
func (p *planner) settleDiscovered(t *target, claims map[[kilov1alpha1.KeyLen]byte][]claim) {
	for k, cs := range claims {
		agree := true
		for _, c := range cs[1:] {
			agree = agree && c.endpoint == cs[0].endpoint
		}
		if agree {
			t.discovered[k] = cs[0].endpoint
			continue
		}
		if t.disputed == nil {
			t.disputed = map[[kilov1alpha1.KeyLen]byte]bool{}
		}
		t.disputed[k] = true
		sort.Slice(cs, func(i, j int) bool { return cs[i].leader < cs[j].leader })
		words := make([]string, 0, 2)
		for _, c := range cs[:2] {
			words = append(words, c.leader+" "+netip.AddrPortFrom(c.endpoint.IP, c.endpoint.Port).String())
		}
		if len(cs) > 2 {
			words = append(words, fmt.Sprintf("%d more", len(cs)-2))
		}
		p.problem(t.sc.spec.Name, ReasonDiscoveredEndpointsDisagree,
			fmt.Sprintf("key %s: %s", kilov1alpha1.EncodeKey(k), strings.Join(words, ", ")))
	}
}

// readForeign reads the names, keys and routes of the Peers the target
// holds that the mesh does not own. Names and keys are read whole; past
// maxForeignRoutes routes the target is incomplete: a route it cannot see
// must never pass for a free one.
func (t *target) readForeign(peers []kubev1alpha1.ForeignPeer) {
	for _, fp := range peers {
		t.foreignNam[fp.Name] = true
		if k, ok := kilov1alpha1.ParseKey(fp.PublicKey); ok {
			if _, dup := t.foreignKey[k]; !dup {
				t.foreignKey[k] = fp.Name
			}
		}
		for _, s := range fp.AllowedIPs {
			if len(t.routeList) == maxForeignRoutes {
				t.incomplete = fmt.Sprintf("they hold more than %d routes", maxForeignRoutes)
				break
			}
			// Kilo reads a Peer's allowed IPs as CIDRs and skips the rest.
			if pr, ok := parseKiloCIDR(s); ok {
				t.routeList = append(t.routeList, pr.Masked())
				t.routeOwner = append(t.routeOwner, fp.Name)
			}
		}
	}
}

// place writes every segment of every source into every other cluster.
func (p *planner) place() {
	p.plan.PeerRefs = make(map[string][]*kilov1alpha1.Peer, len(p.sources))
	p.placed = map[string]int{}
	p.conflicts = map[string][]meshv1alpha1.PeerConflict{}
	p.indexInternal()
	for _, tc := range p.sources {
		t := p.newTarget(tc)
		// At most one Peer per segment of every other source: sized once.
		n := 0
		for _, sc := range p.sources {
			if sc != tc {
				n += len(sc.segments)
			}
		}
		peers := make([]*kilov1alpha1.Peer, 0, n)
		for _, sc := range p.sources {
			if sc == tc {
				continue
			}
			peers = p.placeSource(peers, t, sc)
		}
		if len(peers) == 0 {
			peers = nil // a target that receives nothing holds no slice, as before
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
		p.plan.PeerRefs[tc.spec.Name] = peers
		p.countHandshakes(t, peers)
		if t.incomplete != "" {
			if p.plan.Withheld == nil {
				p.plan.Withheld = map[string]string{}
			}
			p.plan.Withheld[tc.spec.Name] = fmt.Sprintf("no new route is written into it, since the Peers there that this mesh does not own are not known whole (%s): %s withheld",
				t.incomplete, plural(t.withheld, "route"))
		}
	}
}

// indexInternal finds, for each host route of each segment, the targets
// whose nodes use its address as their internal one: a route to it would
// hijack their local traffic. Found once, not looked up for every Peer.
func (p *planner) indexInternal() {
	uses := map[netip.Addr][]internalUse{}
	for _, tc := range p.sources {
		for _, n := range tc.nodes {
			if !n.hasInternal { // Kilo's internal address, read by checkReady
				continue
			}
			u := uses[n.internal]
			if len(u) > 0 && u[len(u)-1].target == tc {
				continue // the first node by name keeps it
			}
			uses[n.internal] = append(u, internalUse{target: tc, node: n.obs.Name})
		}
	}
	for _, sc := range p.sources {
		for _, s := range sc.segments {
			for i := range s.built.hosts {
				s.built.hosts[i].usedBy = uses[s.built.hosts[i].addr]
			}
		}
	}
}

func (p *planner) conflict(t *target, peer, reason, msg string) {
	name := t.sc.spec.Name
	p.conflicts[name] = append(p.conflicts[name], meshv1alpha1.PeerConflict{Peer: peer, Reason: reason, Message: msg})
}

// placeSource appends the Peers of one source cluster for one target. The
// anchor CIDRs go on the first Peer written, by leader name.
func (p *planner) placeSource(peers []*kilov1alpha1.Peer, t *target, sc *sourceCluster) []*kilov1alpha1.Peer {
	tname := t.sc.spec.Name
	anchored := false
	placed := 0 // counted here: a map write per Peer shows in large meshes
	for _, s := range sc.segments {
		b := s.built
		if t.foreignNam[b.name] {
			p.conflict(t, b.name, ReasonPeerNameConflict, fmt.Sprintf("a Peer named %s that this mesh does not own exists in cluster %s", b.name, tname))
			continue
		}
		if other, ok := t.foreignKey[s.leader.key]; ok {
			p.conflict(t, b.name, ReasonPeerKeyConflict,
				fmt.Sprintf("Peer %s, which this mesh does not own, already uses the public key of %s node %s", other, sc.spec.Name, s.leader.obs.Name))
			continue
		}

		endpoint := s.leader.endpoint
		if d, ok := t.discovered[s.leader.key]; ok {
			p.checkNATKeepalive(s, tname, d)
		}
		if d, ok := t.discovered[s.leader.key]; ok && b.keepalive > 0 {
			// Kilo keeps an endpoint learned from a handshake only for a
			// Peer with a keepalive (updateEndpoint in its pkg/mesh), and
			// records one only for such a Peer: without it the Peer's own
			// endpoint is what Kilo dials.
			endpoint = &d
		}
		var peerEndpoint *kilov1alpha1.PeerEndpoint
		if endpoint == s.leader.endpoint {
			if b.endpoint == nil {
				b.endpoint = endpoint.AsPeerEndpoint()
			}
			peerEndpoint = b.endpoint
		} else {
			peerEndpoint = endpoint.AsPeerEndpoint()
		}
		var anchor []netip.Prefix
		if !anchored {
			anchored = true
			anchor = sc.anchorCIDRs
		}
		allowed := p.allowedFor(b, t, endpoint, anchor)
		if len(allowed) == 0 {
			continue // every route is someone else's: the conflicts say so
		}
		peer := b.peerWith(allowed, peerEndpoint)
		peers = append(peers, peer)
		if !p.invalid && !p.passes(b, peer) {
			p.invalid = true
		}
		placed++
	}
	if placed > 0 {
		p.placed[sc.spec.Name] += placed
	}
	return peers
}

// peerWith is the Peer of a segment with these routes and endpoint. The
// segment's own Peer, which most targets receive, is made once and shared
// by all of them.
func (b *builtSegment) peerWith(allowed []string, endpoint *kilov1alpha1.PeerEndpoint) *kilov1alpha1.Peer {
	if endpoint != b.endpoint || !sameSlice(allowed, b.strs) {
		return b.newPeer(allowed, endpoint)
	}
	if b.peer == nil {
		b.peer = b.newPeer(b.strs, b.endpoint)
	}
	return b.peer
}

// newPeer is the Peer of a segment with these routes and endpoint.
func (b *builtSegment) newPeer(allowed []string, endpoint *kilov1alpha1.PeerEndpoint) *kilov1alpha1.Peer {
	return &kilov1alpha1.Peer{
		TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: b.labels},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs:          allowed,
			PublicKey:           b.key,
			PersistentKeepalive: b.keepalive,
			Endpoint:            endpoint,
		},
	}
}

// sameSlice tells whether two slices are the same one: same array, same
// length.
func sameSlice(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// countHandshakes counts the Peers written into a target that its leaders
// recorded a handshake with (Kilo records only Peers with a keepalive).
func (p *planner) countHandshakes(t *target, peers []*kilov1alpha1.Peer) {
	if len(t.discovered) == 0 && len(t.disputed) == 0 {
		return
	}
	h := &meshv1alpha1.Handshakes{}
	for _, peer := range peers {
		if peer.Spec.PersistentKeepalive == 0 {
			continue
		}
		h.Peers++
		if k, ok := kilov1alpha1.ParseKey(peer.Spec.PublicKey); ok {
			if _, seen := t.discovered[k]; seen || t.disputed[k] {
				h.Seen++
			}
		}
	}
	if p.handshakes == nil {
		p.handshakes = map[string]*meshv1alpha1.Handshakes{}
	}
	p.handshakes[t.sc.spec.Name] = h
}

// checkNATKeepalive reports a segment that a target reaches at an address
// learned from a handshake, other than the segment's own endpoint: the
// segment is behind NAT, and the mapping stays open only while its leader
// sends keepalives, which Kilo does from the leader's own
// kilo.squat.ai/persistent-keepalive (Topology.Conf in Kilo's pkg/mesh), not
// from any Peer.
func (p *planner) checkNATKeepalive(s *segment, target string, learned Endpoint) {
	own := s.leader.endpoint
	if own == nil || own.DNS != "" || *own == learned {
		return // reached at its own address, or one no address compares with
	}
	if v, err := ParseKeepalive(s.leader.kilo.PersistentKeepalive); err == nil && v > 0 {
		return
	}
	p.problem(s.cluster.spec.Name, ReasonNATWithoutKeepalive, fmt.Sprintf("%s (cluster %s reaches it at %s, learned from a handshake, not at %s)",
		s.leader.obs.Name, target, learned.Host()+":"+strconv.Itoa(int(learned.Port)), own.Host()+":"+strconv.Itoa(int(own.Port))))
}

// allowedFor is a segment's allowedIPs in one target, with the anchor CIDRs
// when given. It drops the internal addresses that the target uses itself
// (the route would hijack its local traffic), the address of the endpoint
// the target dials, and the routes of Peers the mesh does not own. Most
// Peers drop nothing and share the segment's slice.
func (p *planner) allowedFor(b *builtSegment, t *target, endpoint *Endpoint, anchor []netip.Prefix) []string {
	if len(anchor) == 0 && keepsAll(b, t, endpoint) {
		return b.strs
	}
	drop := drops{of: len(b.allowed)}
	for _, h := range b.hosts {
		if endpoint != nil && endpoint.IP == h.addr {
			drop.mark(h.index)
			continue
		}
		if tn, ok := h.usedIn(t.sc); ok {
			drop.mark(h.index)
			p.problem(b.seg.cluster.spec.Name, ReasonNodeIPConflict, fmt.Sprintf("%s %s (an internal address of %s node %s)", h.node, h.addr, t.sc.spec.Name, tn))
		}
	}
	rc := routeCheck{t: t, delivered: t.delivered[b.name].AllowedIPs}
	keep := rc.keep
	for i, pr := range b.allowed {
		if !drop.has(i) && !keep(pr) {
			drop.mark(i)
		}
	}
	var extra []string
	if len(anchor) > 0 {
		seen := make(map[netip.Prefix]bool, len(b.allowed)+len(anchor))
		for _, pr := range b.allowed {
			seen[pr] = true
		}
		for _, pr := range anchor {
			// An additional CIDR may be a node's host route already.
			if !seen[pr] && keep(pr) {
				seen[pr] = true
				extra = append(extra, pr.String())
			}
		}
	}
	if msg := rc.report(); msg != "" {
		p.conflict(t, b.name, ReasonPeerRouteConflict, msg)
	}
	if drop.n == 0 && len(extra) == 0 {
		return b.strs
	}
	out := make([]string, 0, len(b.strs)-drop.n+len(extra))
	for i, s := range b.strs {
		if !drop.has(i) {
			out = append(out, s)
		}
	}
	return append(out, extra...)
}

// keepsAll tells whether a segment's Peer keeps every route in a target,
// as most do: no route is the endpoint it dials or an internal address
// the target uses, and no foreign Peer can be in the way of one. It
// decides what allowedFor would, without its bookkeeping, which a large
// mesh paid for every Peer.
func keepsAll(b *builtSegment, t *target, endpoint *Endpoint) bool {
	if t.incomplete != "" || len(t.routeList) > 0 {
		return false
	}
	for i := range b.hosts {
		h := &b.hosts[i]
		if endpoint != nil && endpoint.IP == h.addr {
			return false
		}
		if _, ok := h.usedIn(t.sc); ok {
			return false
		}
	}
	return true
}

// drops are the routes of a segment that one Peer leaves out, by index. It
// takes memory only once a route is dropped, which most Peers never do.
type drops struct {
	of     int // how many routes the segment has
	marked []bool
	n      int
}

func (d *drops) mark(i int) {
	if d.marked == nil {
		d.marked = make([]bool, d.of)
	}
	if !d.marked[i] {
		d.marked[i] = true
		d.n++
	}
}

func (d *drops) has(i int) bool {
	return i < len(d.marked) && d.marked[i]
}

// A routeCheck decides, for one Peer in one target, which of its routes a
// Peer the mesh does not own is in the way of. Whoever routes a prefix in a
// member first keeps it: a route that a foreign Peer overlaps is withheld,
// unless the mesh had already delivered it.
type routeCheck struct {
	t              *target
	delivered      []string
	withheld, kept []string
}

func (rc *routeCheck) keep(pr netip.Prefix) bool {
	if rc.t.incomplete != "" {
		// Any route may be someone else's: only what the mesh already
		// routes there stays.
		if slices.Contains(rc.delivered, pr.String()) {
			return true
		}
		rc.t.withheld++
		return false
	}
	if len(rc.t.routeList) == 0 {
		return true
	}
	others := rc.t.routes.overlapping(pr)
	if len(others) == 0 {
		return true
	}
	what := fmt.Sprintf("%s (Peer %s routes %s)", pr, rc.t.routeOwner[others[0]], rc.t.routeList[others[0]])
	if slices.Contains(rc.delivered, pr.String()) {
		rc.kept = append(rc.kept, what)
		return true
	}
	rc.withheld = append(rc.withheld, what)
	return false
}

// report says what was withheld and kept, or nothing.
func (rc *routeCheck) report() string {
	var msg []string
	if len(rc.withheld) > 0 {
		msg = append(msg, "not written, a Peer this mesh does not own routes them: "+listSome(rc.withheld))
	}
	if len(rc.kept) > 0 {
		msg = append(msg, "kept, this mesh routed them first, but Kilo gives an address routed by two Peers to one of them: "+listSome(rc.kept))
	}
	if len(msg) == 0 {
		return ""
	}
	return fmt.Sprintf("routes in cluster %s %s", rc.t.sc.spec.Name, strings.Join(msg, "; "))
}

// validatePeers runs Kilo's own checks on every Peer. A Peer that fails them
// is a bug of the planner: Kilo would silently ignore it.
func (p *planner) validatePeers() error {
	if !p.invalid {
		return nil // every Peer passed as it was placed
	}
	for _, sc := range p.sources {
		// The plan holds its Peers in one of its two forms.
		peers := p.plan.PeerRefs[sc.spec.Name]
		if p.plan.PeerRefs == nil {
			for i := range p.plan.Peers[sc.spec.Name] {
				peers = append(peers, &p.plan.Peers[sc.spec.Name][i])
			}
		}
		for _, peer := range peers {
			if errs := peer.Validate(); len(errs) > 0 {
				return fmt.Errorf("planned Peer %s for cluster %s fails Kilo's validation: %w", peer.Name, sc.spec.Name, errs.ToAggregate())
			}
		}
	}
	return nil
}

// passes runs Kilo's own checks on a Peer as it is placed. A Peer made of
// its segment's routes and endpoint, as in most targets, is the same in
// each: it is checked once.
func (p *planner) passes(b *builtSegment, peer *kilov1alpha1.Peer) bool {
	s := &peer.Spec
	if s.Endpoint != b.endpoint || len(s.AllowedIPs) == 0 || len(s.AllowedIPs) != len(b.strs) || &s.AllowedIPs[0] != &b.strs[0] {
		return len(peer.Validate()) == 0
	}
	if b.checked == 0 {
		b.checked = 1
		if len(peer.Validate()) > 0 {
			b.checked = -1
		}
	}
	return b.checked > 0
}
