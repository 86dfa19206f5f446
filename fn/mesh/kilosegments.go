package mesh

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Reasons a node is left out of the mesh, in the order the checks run: when
// a node fails several, the first of this list is reported. They are exact
// strings: they appear in status and events, and the troubleshooting guide
// explains each.
const (
	ReasonNodeNoPodCIDR         = "NodeNoPodCIDR"
	ReasonNodePodCIDROutOfRange = "NodePodCIDROutOfRange"
	ReasonNodePodCIDRTaken      = "NodePodCIDRTaken"
	ReasonNodeNoWireguardIP     = "NodeNoWireguardIP"
	ReasonWGIPInvalid           = "WGIPInvalid"
	ReasonWGIPOutOfRange        = "WGIPOutOfRange"
	ReasonWGIPDuplicate         = "WGIPDuplicate"
	ReasonNodeNoPublicKey       = "NodeNoPublicKey"
	ReasonNodeKeyInvalid        = "NodeKeyInvalid"
	ReasonNodeKeyDuplicate      = "NodeKeyDuplicate"
	ReasonNodeNotReady          = "NodeNotReady"
	ReasonNodeHeartbeatLost     = "NodeHeartbeatLost"
	ReasonNodeEndpointInvalid   = "NodeEndpointInvalid"
	ReasonSegmentNoLeader       = "SegmentNoLeader"
)

// skipReasons are the skip reasons in the order the checks run, each with
// whether it is expected to clear by itself (e.g. while Kilo starts on a new
// node). It is the one list of them: the check order, Transient, the
// plugin's fixes and the troubleshooting guide are held against it.
var skipReasons = []struct {
	reason    string
	transient bool
}{
	{ReasonNodeNoPodCIDR, true},
	{ReasonNodePodCIDROutOfRange, false},
	{ReasonNodePodCIDRTaken, false},
	{ReasonNodeNoWireguardIP, true},
	{ReasonWGIPInvalid, false},
	{ReasonWGIPOutOfRange, false},
	{ReasonWGIPDuplicate, false},
	{ReasonNodeNoPublicKey, true},
	{ReasonNodeKeyInvalid, false},
	{ReasonNodeKeyDuplicate, false},
	{ReasonNodeNotReady, true},
	{ReasonNodeHeartbeatLost, false},
	{ReasonNodeEndpointInvalid, false},
	{ReasonSegmentNoLeader, true},
}

// checkOrder ranks the skip reasons, from 1: a node keeps the first one it
// fails.
var checkOrder = func() map[string]int {
	order := make(map[string]int, len(skipReasons))
	for i, r := range skipReasons {
		order[r.reason] = i + 1
	}
	return order
}()

// SkipReasons returns every skip reason, in the order the checks run.
func SkipReasons() []string {
	out := make([]string, len(skipReasons))
	for i, r := range skipReasons {
		out[i] = r.reason
	}
	return out
}

// Transient reports whether a skip reason is expected to clear by itself,
// e.g. while Kilo starts on a new node. A mesh with transient skips is
// converging, not failed.
func Transient(reason string) bool {
	for _, r := range skipReasons {
		if r.reason == reason {
			return r.transient
		}
	}
	return false
}

// kiloHeartbeatLimit is how old Kilo lets a node's heartbeat get before it
// leaves the node out (two check-in periods of 30 s, pkg/mesh backend.go);
// the provider applies it and publishes the result as the node's stale flag.
const kiloHeartbeatLimit = "60 s"

// kiloResync is Kilo's default --resync-period: a node whose heartbeat went
// stale causes no event of its own, so Kilo drops it from its WireGuard
// configuration at its next resync at the latest. A node stale for longer
// than that is gone from Kilo's mesh, and waiting for it is not converging.
const kiloResync = 30 * time.Second

// A node is an observed Node being planned.
type node struct {
	obs     *kubev1alpha1.ObservedNode
	kilo    kubev1alpha1.KiloAnnotations
	cluster *cluster
	// pods are the node's pod CIDRs of the mesh's family.
	pods []netip.Prefix
	// internal is Kilo's internal address of the node, of any family;
	// hasInternal is false when Kilo sees none.
	internal    netip.Addr
	hasInternal bool
	// agentEndpoint is the endpoint Kilo itself uses for the node.
	agentEndpoint agentEndpoint
	key           [kilov1alpha1.KeyLen]byte
	// ready is Kilo's view: the node is part of Kilo's own topology.
	ready bool

	// Set once the node passed the checks of a segment leader.
	wgIP     netip.Addr
	endpoint *Endpoint

	skipped *meshv1alpha1.SkippedNode
	// peerName is the name of the Peer the node's segment has when it
	// leads it, once asked for.
	peerName string
}

// skipf records why the node is left out, unless it already failed a check
// that comes earlier.
func (n *node) skipf(reason, format string, a ...any) {
	if n.skipped != nil && checkOrder[n.skipped.Reason] <= checkOrder[reason] {
		return
	}
	n.skipped = &meshv1alpha1.SkippedNode{Node: n.obs.Name, Reason: reason, Message: fmt.Sprintf(format, a...)}
}

// A segment is one WireGuard identity of a cluster: one node (Node
// granularity) or the nodes of one location (Location granularity). It
// becomes one Peer in every other cluster.
type segment struct {
	cluster *cluster
	// name is Kilo's name of the segment: location:<name> or node:<name>.
	name    string
	leader  *node
	members []*node // sorted by name; includes the leader
	// built is what its Peer has in every target, once buildSegments ran.
	built *builtSegment
}

// sourceCluster is a member of the mesh with its observed nodes.
type sourceCluster struct {
	*cluster
	obs      *Observation
	nodes    []*node // every observed node, sorted by name
	segments []*segment
	location bool // Location granularity
	// notLeaders are nodes that carry a WireGuard IP but do not lead their
	// segment, reported as a problem, with the leader Kilo elects.
	notLeaders [][2]*node
	// anchorCIDRs are the cluster's serviceCIDR and additionalCIDRs that its
	// anchor Peer routes: all but those a location owns.
	anchorCIDRs []netip.Prefix
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
	all := make([]node, len(obs.Nodes)) // one allocation, not one per node
	for i := range obs.Nodes {
		n := &all[i]
		n.obs, n.cluster = &obs.Nodes[i], c
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

// checkReady decides whether Kilo itself counts the node (Node.Ready in
// Kilo's pkg/mesh backend.go): a pod CIDR, a key, an endpoint Kilo can use
// and a fresh heartbeat. Kilo leaves every other node out of its topology,
// leader or not, so the mesh does too. It also runs the pod CIDR range
// check, which every node that is routed must pass.
func (n *node) checkReady(family family, now time.Time) {
	n.ready = true
	fail := func(reason, format string, a ...any) {
		n.ready = false
		n.skipf(reason, format, a...)
	}
	n.checkPodCIDRs(family, fail)
	switch k, err := ParseKey(n.kilo.Key); {
	case n.kilo.Key == "":
		fail(ReasonNodeNoPublicKey, "kilo.squat.ai/key is not set (Kilo sets it when it starts on the node)")
	case err != nil:
		fail(ReasonNodeKeyInvalid, "kilo.squat.ai/key is not a WireGuard public key: %v", err)
	case k == [kilov1alpha1.KeyLen]byte{}:
		fail(ReasonNodeKeyInvalid, "kilo.squat.ai/key is the all-zero key, which Kilo reads as no key")
	default:
		n.key = k
	}
	n.agentEndpoint = agentEndpointOf(&n.kilo)
	switch {
	case !n.agentEndpoint.ok:
		fail(ReasonNodeNotReady, "Kilo has no endpoint for the node: neither %s nor %s is host:port",
			kilov1alpha1.AnnotationForceEndpoint, kilov1alpha1.AnnotationEndpoint)
	case n.obs.Stale && n.obs.StaleSince != nil && !now.IsZero() && now.Sub(n.obs.StaleSince.Time) > kiloResync:
		fail(ReasonNodeHeartbeatLost, "Kilo's heartbeat %s stopped: the node has been stale since %s, and Kilo has dropped it from its mesh",
			kilov1alpha1.AnnotationLastSeen, n.obs.StaleSince.UTC().Format(time.RFC3339))
	case n.obs.Stale:
		fail(ReasonNodeNotReady, "Kilo's heartbeat %s is missing or older than %s: Kilo leaves the node out",
			kilov1alpha1.AnnotationLastSeen, kiloHeartbeatLimit)
	}
	n.internal, n.hasInternal = kiloInternalIP(&n.kilo)
}

// checkPodCIDRs reads the node's pod CIDRs of the mesh's family (the other
// family's are normal on a dual-stack node and left out) and checks that
// each lies inside the cluster's podCIDRs. A missing pod CIDR makes the node
// unready, as in Kilo; one out of range keeps it out of the mesh only.
func (n *node) checkPodCIDRs(f family, unready func(reason, format string, a ...any)) {
	n.pods = make([]netip.Prefix, 0, len(n.obs.PodCIDRs))
	for _, s := range n.obs.PodCIDRs {
		p, err := ParseNodeCIDR(s)
		if err != nil {
			unready(ReasonNodeNoPodCIDR, "pod CIDR %s cannot be parsed: %v", quote(s), err)
			return
		}
		if f.of(p.Addr()) {
			n.pods = append(n.pods, p)
		}
	}
	if len(n.pods) == 0 {
		unready(ReasonNodeNoPodCIDR, "the node has no %s pod CIDR (spec.podCIDRs)", f)
		return
	}
	for _, p := range n.pods {
		if !containedInAny(p, n.cluster.pods) {
			n.skipf(ReasonNodePodCIDROutOfRange, "pod CIDR %s is not inside the cluster's podCIDRs %v", p, n.cluster.pods)
			return
		}
	}
}

func containedInAny(p netip.Prefix, nets []netip.Prefix) bool {
	for _, c := range nets {
		if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// checkWireguardIP runs the WireGuard IP checks of a leader (all but the
// duplicate check, which needs every leader of the cluster).
func (n *node) checkWireguardIP() bool {
	if n.kilo.WireguardIP == "" {
		n.skipf(ReasonNodeNoWireguardIP, "kilo.squat.ai/wireguard-ip is not set yet (Kilo writes it on the node it elects to lead the segment)")
		return false
	}
	a, err := ParseWireguardIP(n.kilo.WireguardIP)
	if err != nil {
		n.skipf(ReasonWGIPInvalid, "kilo.squat.ai/wireguard-ip %s is not <ip>/<prefix>: %v", quote(n.kilo.WireguardIP), err)
		return false
	}
	if !n.cluster.wireguard.Contains(a) {
		n.skipf(ReasonWGIPOutOfRange, "kilo.squat.ai/wireguard-ip %s is outside the cluster's wireguardCIDR %s", a, n.cluster.wireguard)
		return false
	}
	n.wgIP = a
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
			n.skipf(ReasonNodeEndpointInvalid, "%s %s: %v", src.annotation, quote(src.value), err)
			return false
		}
		n.endpoint = &e
		return true
	}
	if a, ok := firstExternalIP(n.obs.ExternalIPs); ok {
		n.endpoint = &Endpoint{IP: a, Port: n.cluster.port}
		return true
	}
	// Kilo reads this annotation too, so a ready node always has it or a
	// force-endpoint.
	e, err := ParseEndpoint(n.kilo.Endpoint)
	if err != nil {
		n.skipf(ReasonNodeEndpointInvalid, "%s %s: %v", kilov1alpha1.AnnotationEndpoint, quote(n.kilo.Endpoint), err)
		return false
	}
	n.endpoint = &e
	return true
}

// firstExternalIP is the first IPv4 ExternalIP, else the first IPv6 one.
// Addresses that do not parse, or that no other cluster can reach, are not
// external addresses and are passed over.
func firstExternalIP(ips []string) (netip.Addr, bool) {
	var v6 netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			continue
		}
		a = a.Unmap()
		if !reachable(a) {
			continue
		}
		if a.Is4() {
			return a, true
		}
		if !v6.IsValid() {
			v6 = a
		}
	}
	return v6, v6.IsValid()
}

// planSegments checks the nodes of a cluster and forms Kilo's segments from
// the ready ones, up to the mesh-wide key check. Leaders still need
// checkEndpoint.
func (sc *sourceCluster) planSegments(g meshv1alpha1.Granularity, f family, now time.Time) {
	sc.location = sc.useLocation(g)
	for _, n := range sc.nodes {
		n.checkReady(f, now)
	}
	if sc.location {
		sc.locationSegments()
	} else {
		sc.nodeSegments()
	}

	if !sc.location {
		// Every node of a Node-granularity cluster would lead its own
		// segment: its WireGuard IP is checked even when Kilo does not
		// count it yet, so that it reports the first check it fails.
		for _, n := range sc.nodes {
			if !n.ready {
				n.checkWireguardIP()
			}
		}
	}
	var leaders []*node
	for _, s := range sc.segments {
		if s.leader.skipped == nil && s.leader.checkWireguardIP() {
			leaders = append(leaders, s.leader)
		}
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
	}
}

// nodeSegments makes every ready node its own segment (Kilo's full
// granularity).
func (sc *sourceCluster) nodeSegments() {
	ready := 0
	for _, n := range sc.nodes {
		if n.ready {
			ready++
		}
	}
	// One allocation for the segments, one for their members.
	segments := make([]segment, 0, ready)
	members := make([]*node, 0, ready)
	for _, n := range sc.nodes {
		if n.ready {
			members = append(members, n)
			segments = append(segments, segment{cluster: sc.cluster, name: "node:" + n.obs.Name, leader: n, members: members[len(members)-1 : len(members) : len(members)]})
			sc.segments = append(sc.segments, &segments[len(segments)-1])
		}
	}
}

// locationSegments groups the ready nodes the way Kilo's NewTopology does in
// location granularity: by location, except that a node without an internal
// address is a segment of its own. Each segment's leader is the node Kilo
// elects; no other node ever stands in for it.
func (sc *sourceCluster) locationSegments() {
	byName := map[string]*segment{}
	for _, n := range sc.nodes {
		if !n.ready {
			continue
		}
		name := "location:" + n.obs.Location
		if !n.hasInternal {
			name = "node:" + n.obs.Name
		}
		s, ok := byName[name]
		if !ok {
			s = &segment{cluster: sc.cluster, name: name}
			byName[name] = s
			sc.segments = append(sc.segments, s)
		}
		s.members = append(s.members, n)
	}
	for _, s := range sc.segments {
		s.leader = findLeader(s.members)
		for _, m := range s.members {
			if m != s.leader && m.kilo.WireguardIP != "" {
				sc.notLeaders = append(sc.notLeaders, [2]*node{m, s.leader})
			}
		}
	}
}

// findLeader is Kilo's election of a segment's leader among its ready nodes
// sorted by name (findLeader in Kilo's pkg/mesh topology.go): the first node
// that carries kilo.squat.ai/leader and has a public endpoint, else the first
// that carries it, else the first with a public endpoint, else the first.
func findLeader(members []*node) *node {
	var volunteer, public *node
	for _, n := range members {
		isPub := isPublic(n.agentEndpoint.ip)
		if n.kilo.Leader != "" {
			if isPub {
				return n
			}
			if volunteer == nil {
				volunteer = n
			}
		}
		if isPub && public == nil {
			public = n
		}
	}
	switch {
	case volunteer != nil:
		return volunteer
	case public != nil:
		return public
	}
	return members[0]
}

// finishSegments drops the segments whose leader was skipped, reporting the
// other members of a location without a valid leader. Members of a kept
// segment that fail a check of their own are left out of it.
func (sc *sourceCluster) finishSegments() {
	out := sc.segments[:0]
	for _, s := range sc.segments {
		if s.leader.skipped == nil && s.leader.checkEndpoint() {
			members := s.members[:0]
			for _, m := range s.members {
				if m.skipped == nil {
					members = append(members, m)
				}
			}
			s.members = members
			out = append(out, s)
			continue
		}
		for _, m := range s.members {
			if m != s.leader {
				m.skipf(ReasonSegmentNoLeader, "Kilo's leader of %s, node %s, is skipped (%s)",
					segmentLabel(s.name), s.leader.obs.Name, s.leader.skipped.Reason)
			}
		}
	}
	sc.segments = out
	sort.Slice(sc.segments, func(i, j int) bool { return sc.segments[i].leader.obs.Name < sc.segments[j].leader.obs.Name })
}

// segmentLabel names a segment for a message: location "eu", or the node
// that is a segment of its own.
func segmentLabel(name string) string {
	if loc, ok := strings.CutPrefix(name, "location:"); ok {
		return "location " + quote(loc)
	}
	return "the segment of node " + strings.TrimPrefix(name, "node:")
}

// identities are the nodes of a cluster that stand, or are about to stand,
// for a WireGuard identity, whatever check they fail: every node in Node
// granularity, the elected leader of each segment in Location granularity.
// A key is counted among all of them, so that a node which copies the key
// of another cluster's node that has not passed every check yet (a new node
// still waiting for its WireGuard IP) cannot become the key's incumbent.
func (sc *sourceCluster) identities() []*node {
	if !sc.location {
		return sc.nodes
	}
	out := make([]*node, 0, len(sc.segments))
	for _, s := range sc.segments {
		out = append(out, s.leader)
	}
	return out
}

// A keyHolder is a node whose key may be shared.
type keyHolder struct {
	n    *node
	name string // the name of its Peer
}

// dedupeKeys skips the leaders whose key another leader of the mesh also
// uses. Kilo keeps one Peer per key, so two would overwrite each other. The
// incumbent keeps the key: the one segment whose Peer already carries it
// (delivered, as the observed composed resources say). With no incumbent,
// every holder is skipped: a key copied from another node must never
// displace the real node, nor win by the order of names.
func dedupeKeys(clusters []*sourceCluster, peerName func(*node) string, delivered map[[kilov1alpha1.KeyLen]byte]map[string]bool) {
	keys, byKey := sharedKeys(clusters, peerName)
	for _, k := range keys {
		holders := byKey[k]
		var incumbent *keyHolder
		for i := range holders {
			if delivered[k][holders[i].name] {
				if incumbent != nil {
					incumbent = nil // two claim it: none is trusted
					break
				}
				incumbent = &holders[i]
			}
		}
		for _, h := range holders {
			if incumbent != nil && h.n == incumbent.n {
				continue
			}
			h.n.skipf(ReasonNodeKeyDuplicate, "public key is also used by %s", otherHolders(holders, h.n, incumbent))
		}
	}
}

// sharedKeys gathers the holders of every key that two identities of the
// mesh hold, keys in the order first held. Keys are counted first: only
// the few shared ones are gathered.
func sharedKeys(clusters []*sourceCluster, peerName func(*node) string) ([][kilov1alpha1.KeyLen]byte, map[[kilov1alpha1.KeyLen]byte][]keyHolder) {
	ids := make([][]*node, len(clusters))
	all := 0
	for i, sc := range clusters {
		ids[i] = sc.identities()
		all += len(ids[i])
	}
	count := make(map[[kilov1alpha1.KeyLen]byte]int, all)
	for _, nodes := range ids {
		for _, n := range nodes {
			if n.key != ([kilov1alpha1.KeyLen]byte{}) { // no key, or one Kilo reads as none
				count[n.key]++
			}
		}
	}
	byKey := map[[kilov1alpha1.KeyLen]byte][]keyHolder{}
	var keys [][kilov1alpha1.KeyLen]byte
	for _, nodes := range ids {
		for _, n := range nodes {
			if n.key == ([kilov1alpha1.KeyLen]byte{}) || count[n.key] < 2 {
				continue
			}
			if _, ok := byKey[n.key]; !ok {
				keys = append(keys, n.key)
			}
			byKey[n.key] = append(byKey[n.key], keyHolder{n: n, name: peerName(n)})
		}
	}
	return keys, byKey
}

// otherHolders names the other nodes that use a key, and who keeps it.
func otherHolders(holders []keyHolder, self *node, incumbent *keyHolder) string {
	var names []string
	for _, h := range holders {
		if h.n != self {
			names = append(names, fmt.Sprintf("node %s of cluster %s", h.n.obs.Name, h.n.cluster.spec.Name))
		}
	}
	sort.Strings(names)
	msg := listSome(names)
	if incumbent != nil {
		return msg + fmt.Sprintf("; node %s of cluster %s keeps it: its Peer already carries it", incumbent.n.obs.Name, incumbent.n.cluster.spec.Name)
	}
	return msg + "; no holder's Peer carries it yet, so none is trusted with it"
}
