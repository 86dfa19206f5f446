package mesh

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// maxLocationIPs is how many ranges of one node's
// kilo.squat.ai/allowed-location-ips are read.
const maxLocationIPs = 64

// A builtSegment is the part of a segment's Peer that is the same in every
// cluster it is written into.
type builtSegment struct {
	seg       *segment
	name      string
	key       string
	labels    map[string]string
	keepalive int
	// allowed are the allowedIPs, in order, without the anchor CIDRs, and
	// strs the same as strings, shared by every Peer that drops none.
	allowed []netip.Prefix
	strs    []string
	// hosts are the internal addresses among allowed, with their index.
	hosts []hostRoute
	// endpoint is the leader's own endpoint in Kilo's form, made on first
	// use and shared, like labels and strs, by every Peer that dials it.
	endpoint *kilov1alpha1.PeerEndpoint
	// checked is 1 once a Peer of these shared parts passed Kilo's checks,
	// -1 once one failed them.
	checked int8
	// peer is the Peer of these shared parts, made on first use and
	// shared by every target that receives it.
	peer *kilov1alpha1.Peer
}

type hostRoute struct {
	addr  netip.Addr
	index int
	node  string
	// usedBy are the targets that use addr as an internal address.
	usedBy []internalUse
}

// An internalUse is a target whose node uses an address as its internal
// one: the first such node by name.
type internalUse struct {
	target *sourceCluster
	node   string
}

// usedIn is the node of target t that uses the route's address.
func (h *hostRoute) usedIn(t *sourceCluster) (string, bool) {
	for _, u := range h.usedBy {
		if u.target == t {
			return u.node, true
		}
	}
	return "", false
}

// buildSegments computes what each segment's Peer has in common across
// targets: name, key, keepalive and allowedIPs without per-target drops.
func (p *planner) buildSegments() {
	p.collectAddresses()
	for _, sc := range p.sources {
		pods := p.podRoutes(sc)
		locIPs, moved := p.locationIPs(sc)
		sc.anchorCIDRs = nil
		for _, a := range sc.anchor() {
			if !moved[a] {
				sc.anchorCIDRs = append(sc.anchorCIDRs, a)
			}
		}
		labels := peerLabels(p.in.Namespace, p.in.Name, sc.spec.Name)
		for _, s := range sc.segments {
			b := &builtSegment{
				seg:    s,
				name:   p.peerNameOf(s.leader),
				key:    kilov1alpha1.EncodeKey(s.leader.key),
				labels: labels,
			}
			b.keepalive = p.keepaliveOf(s)
			p.buildAllowed(b, pods, locIPs[s])
			s.built = b
		}
	}
}

// collectAddresses lists the endpoint of every segment and counts the
// segments that advertise each internal address. An endpoint host routed
// into any tunnel breaks the tunnel to that endpoint; an internal address
// advertised by two segments would be routed to whichever Kilo configured
// last. Neither is routed.
func (p *planner) collectAddresses() {
	n := 0
	for _, sc := range p.sources {
		n += len(sc.segments)
	}
	p.endpoints = make(map[netip.Addr]string, n)
	p.advertisers = make(map[netip.Addr]int, n)
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
				seen := map[netip.Addr]bool{}
				for _, m := range s.members {
					if a, ok := p.internalAddr(m, false); ok && !seen[a] {
						seen[a] = true
						p.advertisers[a]++
					}
				}
			}
		}
	}
}

// keepaliveOf is the keepalive of a segment's Peer: the mesh-wide floor, or
// the leader's own kilo.squat.ai/persistent-keepalive when larger.
func (p *planner) keepaliveOf(s *segment) int {
	k := p.keepalive
	if v := s.leader.kilo.PersistentKeepalive; v != "" {
		n, err := ParseKeepalive(v)
		switch {
		case err != nil:
			p.problem(s.cluster.spec.Name, ReasonAnnotationInvalid,
				fmt.Sprintf("%s: %s %s %v", s.leader.obs.Name, kilov1alpha1.AnnotationPersistentKeepalive, quote(v), err))
		case n > k:
			k = n
		}
	}
	return k
}

// buildAllowed lists the allowedIPs of a segment, in the order `kgctl
// showconf --as-peer` uses: per member by name its pod CIDRs, internal
// address and location ranges, then the leader's WireGuard address.
// Duplicates keep the first.
func (p *planner) buildAllowed(b *builtSegment, pods map[*node][]netip.Prefix, locIPs map[*node][]netip.Prefix) {
	s := b.seg
	// A segment of one node routes three or four prefixes: they are
	// scanned, and only a larger segment's are kept in a set.
	const scanned = 16
	b.allowed = make([]netip.Prefix, 0, 3*len(s.members)+1)
	var seen map[netip.Prefix]bool
	add := func(pr netip.Prefix) bool {
		switch {
		case seen != nil:
			if seen[pr] {
				return false
			}
			seen[pr] = true
		case slices.Contains(b.allowed, pr):
			return false
		case len(b.allowed) == scanned:
			seen = make(map[netip.Prefix]bool, 2*scanned)
			for _, q := range b.allowed {
				seen[q] = true
			}
			seen[pr] = true
		}
		b.allowed = append(b.allowed, pr)
		return true
	}
	for _, m := range s.members {
		for _, pr := range pods[m] {
			add(pr)
		}
		if p.advertise {
			if a, ok := p.internalAddr(m, true); ok && p.routable(s, m, a) && add(HostRoute(a)) {
				b.hosts = append(b.hosts, hostRoute{addr: a, index: len(b.allowed) - 1, node: m.obs.Name})
			}
		}
		for _, pr := range locIPs[m] {
			add(pr)
		}
	}
	add(HostRoute(s.leader.wgIP))
	b.strs = prefixStrings(b.allowed)
}

// prefixStrings is the String of every prefix, written into one string
// that they share: one allocation for a segment's routes, not two a route.
func prefixStrings(prs []netip.Prefix) []string {
	// The buffers of a segment of a few routes stay on the stack.
	var bufs [128]byte
	var endss [8]int
	buf, ends := bufs[:0], endss[:0]
	for _, pr := range prs {
		if pr.IsValid() {
			buf = pr.AppendTo(buf)
		} else {
			buf = append(buf, pr.String()...) // AppendTo writes nothing for the zero Prefix
		}
		ends = append(ends, len(buf))
	}
	all := string(buf)
	out := make([]string, len(prs))
	start := 0
	for i, end := range ends {
		out[i] = all[start:end]
		start = end
	}
	return out
}

// internalAddr is the internal address of a node that may be routed to other
// clusters: Kilo's own (force-internal-ip, else internal-ip; never
// status.addresses), of the mesh's family, and inside the cluster's declared
// nodeCIDRs. Node data alone must never route an arbitrary address: one
// outside the nodeCIDRs is reported (when report is set), and with no
// nodeCIDRs no address is routed at all.
func (p *planner) internalAddr(n *node, report bool) (netip.Addr, bool) {
	a := n.internal
	if !n.hasInternal || !p.family.of(a) || !reachable(a) || len(n.cluster.nodes) == 0 {
		return netip.Addr{}, false
	}
	for _, c := range n.cluster.nodes {
		if c.Contains(a) {
			return a, true
		}
	}
	if report {
		p.problem(n.cluster.spec.Name, ReasonNodeIPOutOfRange,
			fmt.Sprintf("%s %s (not inside the cluster's nodeCIDRs %v)", n.obs.Name, a, n.cluster.nodes))
	}
	return netip.Addr{}, false
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

// keepPodIncumbents skips the nodes whose pod CIDR overlaps a pod CIDR that
// another segment's Peer already routes (delivered with that exact prefix in
// some member): a Node can be created with any pod CIDR, and the segment that
// routes a prefix first keeps it, so a newcomer claiming a member's whole
// pod range never blanks the nodes already routed. It runs before the
// segments are finished, so that a skipped leader takes its segment's Peer
// with it and a skipped member leaves its segment.
func (p *planner) keepPodIncumbents(sc *sourceCluster, routed map[string]map[string]bool) {
	if len(routed) == 0 {
		return // a new mesh has no incumbent
	}
	type owned struct {
		s         *segment
		n         *node
		incumbent bool
	}
	var prefixes []netip.Prefix
	var owners []owned
	for _, s := range sc.segments {
		name := p.peerNameOf(s.leader)
		for _, m := range s.members {
			for _, pr := range m.pods {
				prefixes = append(prefixes, pr)
				owners = append(owners, owned{s, m, routed[name][pr.String()]})
			}
		}
	}
	idx := newPrefixIndex(prefixes)
	for i, pr := range prefixes {
		o := owners[i]
		if o.incumbent {
			continue
		}
		for _, j := range idx.overlapping(pr) {
			if owners[j].s != o.s && owners[j].incumbent {
				o.n.skipf(ReasonNodePodCIDRTaken, "pod CIDR %s overlaps %s of node %s, which the Peer of %s already routes",
					pr, prefixes[j], owners[j].n.obs.Name, segmentLabel(owners[j].s.name))
				break
			}
		}
	}
}

// podRoutes are the pod CIDRs each member of a segment routes, by node: a
// node is a member of one segment at most. A pod
// CIDR that overlaps one of another segment (a Node may be created with any
// pod CIDR) and that neither routed first (keepPodIncumbents skipped the
// newcomers) is routed by neither: WireGuard would give it to whichever
// Peer Kilo configured last.
func (p *planner) podRoutes(sc *sourceCluster) map[*node][]netip.Prefix {
	type owned struct {
		s *segment
		n *node
	}
	var prefixes []netip.Prefix
	var owners []owned
	for _, s := range sc.segments {
		for _, m := range s.members {
			for _, pr := range m.pods {
				prefixes = append(prefixes, pr)
				owners = append(owners, owned{s, m})
			}
		}
	}
	idx := newPrefixIndex(prefixes)
	out := map[*node][]netip.Prefix{}
	for i, pr := range prefixes {
		o := owners[i]
		clash := ""
		for _, j := range idx.overlapping(pr) {
			if owners[j].s != o.s {
				clash = fmt.Sprintf("%s %s (overlaps %s of node %s)", o.n.obs.Name, pr, prefixes[j], owners[j].n.obs.Name)
				break
			}
		}
		if clash != "" {
			p.problem(sc.spec.Name, ReasonNodePodCIDRConflict, clash)
			continue
		}
		out[o.n] = append(out[o.n], pr)
	}
	return out
}

// locationIPs reads the kilo.squat.ai/allowed-location-ips of every member
// of the cluster's segments. Kilo routes these ranges to their location
// inside its cluster; the mesh routes them there from other clusters, but
// only inside the cluster's declared additionalCIDRs. A range equal to a
// declared additionalCIDR moves from the anchor to the owning segment (moved
// says which); a smaller one is routed beside the anchor's, and the most
// specific prefix wins. Ranges of two segments that overlap are routed by
// neither, as Kilo's own filter does.
func (p *planner) locationIPs(sc *sourceCluster) (map[*segment]map[*node][]netip.Prefix, map[netip.Prefix]bool) {
	type owned struct {
		s *segment
		n *node
	}
	var prefixes []netip.Prefix
	var owners []owned
	for _, s := range sc.segments {
		for _, m := range s.members {
			for _, pr := range p.parseLocationIPs(m) {
				prefixes = append(prefixes, pr)
				owners = append(owners, owned{s, m})
			}
		}
	}
	out := map[*segment]map[*node][]netip.Prefix{}
	moved := map[netip.Prefix]bool{}
	if len(prefixes) == 0 {
		return out, moved
	}
	idx := newPrefixIndex(prefixes)
	for i, pr := range prefixes {
		o := owners[i]
		clash := ""
		for _, j := range idx.overlapping(pr) {
			if owners[j].s != o.s {
				clash = fmt.Sprintf("%s %s (overlaps %s of node %s, in another segment)", o.n.obs.Name, pr, prefixes[j], owners[j].n.obs.Name)
				break
			}
		}
		if clash != "" {
			p.problem(sc.spec.Name, ReasonAllowedLocationIPConflict, clash)
			continue
		}
		if out[o.s] == nil {
			out[o.s] = map[*node][]netip.Prefix{}
		}
		out[o.s][o.n] = append(out[o.s][o.n], pr)
		if slices.Contains(sc.additional, pr) {
			moved[pr] = true
		}
	}
	return out, moved
}

// parseLocationIPs reads a node's kilo.squat.ai/allowed-location-ips as Kilo
// does (comma-separated, each <ip>/<prefix>; Kilo skips what does not
// parse, the mesh reports it), keeps those of the mesh's family, and of those
// the ranges wholly inside the cluster's additionalCIDRs.
func (p *planner) parseLocationIPs(n *node) []netip.Prefix {
	v := n.kilo.AllowedLocationIPs
	if v == "" {
		return nil
	}
	var out, outside []netip.Prefix
	var invalid []string
	for i, s := range strings.Split(v, ",") {
		if i == maxLocationIPs {
			invalid = append(invalid, fmt.Sprintf("more than %d ranges", maxLocationIPs))
			break
		}
		pr, ok := parseKiloCIDR(s)
		if !ok {
			invalid = append(invalid, quote(s))
			continue
		}
		pr = pr.Masked()
		switch {
		case !p.family.of(pr.Addr()):
		case containedInAny(pr, n.cluster.additional):
			out = append(out, pr)
		default:
			outside = append(outside, pr)
		}
	}
	name := n.cluster.spec.Name
	if len(invalid) > 0 {
		p.problem(name, ReasonAnnotationInvalid, fmt.Sprintf("%s: %s %s is not <ip>/<prefix>",
			n.obs.Name, kilov1alpha1.AnnotationAllowedLocationIPs, listSome(invalid)))
	}
	if len(outside) > 0 {
		p.problem(name, ReasonAllowedLocationIPOutOfRange, fmt.Sprintf("%s %v (not inside the cluster's additionalCIDRs %v)",
			n.obs.Name, outside, n.cluster.additional))
	}
	return out
}
