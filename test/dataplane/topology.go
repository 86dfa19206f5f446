package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
)

const (
	logicalLocationPrefix = "location:"
	nodeLocationPrefix    = "node:"
)

// A segment is one WireGuard identity of a cluster, as in Kilo's
// pkg/mesh/topology.go: a node (full granularity), or the nodes of a
// location (location granularity) behind the leader Kilo elects.
type segment struct {
	location   string
	allowedIPs []netip.Prefix
	endpoint   *Endpoint
	key        Key
	keepalive  int // the leader's own persistent-keepalive
	cidrs      []netip.Prefix
	// privateIPs has one address per node that has one; Kilo indexes it
	// like cidrs, which holds because a location only groups nodes with an
	// internal IP.
	privateIPs  []netip.Addr
	leader      int
	wireGuardIP netip.Addr
}

// A Topology is what Kilo's agent on one node computes from the nodes and
// Peers of its cluster (Topology in Kilo's pkg/mesh/topology.go).
type Topology struct {
	key           Key
	port          int
	location      string
	hostname      string
	leader        bool
	keepalive     int
	privateIP     netip.Prefix
	wireGuardCIDR netip.Prefix
	segments      []*segment
	peers         []*Peer
	discovered    map[string]netip.AddrPort
}

const errNoAddress = "cannot allocate a WireGuard IP: the subnet is used up"

// newTopology follows NewTopology in Kilo's pkg/mesh/topology.go. nodes are
// the ready nodes of the cluster (the local one included), peers the ready
// Peers, by public key; granularity, port, subnet and keepalive are the
// local agent's.
func newTopology(nodes map[string]*Node, peers map[string]*Peer, granularity, hostname string, port int, key Key, subnet netip.Prefix, keepalive int) (*Topology, error) {
	byLocation := map[string][]*Node{}
	locationOf := func(n *Node) string {
		if granularity == defaultGranularity && n.InternalIP.IsValid() {
			return logicalLocationPrefix + n.Location
		}
		// Full granularity, or a node without an internal IP: a location
		// of its own.
		return nodeLocationPrefix + n.Name
	}
	for _, n := range nodes {
		l := locationOf(n)
		byLocation[l] = append(byLocation[l], n)
	}
	local := nodes[hostname]
	t := &Topology{
		key:           key,
		port:          port,
		hostname:      hostname,
		location:      locationOf(local),
		keepalive:     keepalive,
		privateIP:     local.InternalIP,
		wireGuardCIDR: subnet,
		discovered:    map[string]netip.AddrPort{},
	}
	for loc, members := range byLocation {
		s := newSegment(loc, members)
		if loc == t.location && members[s.leader].Name == hostname {
			t.leader = true
		}
		t.segments = append(t.segments, s)
	}
	sort.Slice(t.segments, func(i, j int) bool { return t.segments[i].location < t.segments[j].location })
	for _, p := range peers {
		t.peers = append(t.peers, p)
	}
	sort.Slice(t.peers, func(i, j int) bool { return t.peers[i].Name < t.peers[j].Name })
	t.peers = deduplicatePeerIPs(t.peers)
	for k, v := range local.DiscoveredEndpoints {
		t.discovered[k] = v
	}
	// WireGuard IPs: the next address of the subnet for each segment, in
	// the order of their locations.
	next := subnet.Masked().Addr()
	for _, s := range t.segments {
		next = next.Next()
		if !next.IsValid() || !subnet.Contains(next) {
			return nil, errors.New(errNoAddress)
		}
		s.wireGuardIP = next
		s.allowedIPs = append(s.allowedIPs, host(next))
		if t.leader && s.location == t.location {
			t.wireGuardCIDR = netip.PrefixFrom(next, subnet.Bits())
		}
		for _, n := range byLocation[s.location] {
			for k, v := range n.DiscoveredEndpoints {
				if _, ok := t.discovered[k]; !ok {
					t.discovered[k] = v
				}
			}
		}
	}
	return t, nil
}

// newSegment makes the segment of a location: its nodes sorted by name,
// the leader Kilo elects, and as allowed IPs every node's pod CIDR and
// internal IP.
func newSegment(loc string, members []*Node) *segment {
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	leader := findLeader(members)
	s := &segment{location: loc, leader: leader, endpoint: members[leader].Endpoint, key: members[leader].Key, keepalive: members[leader].PersistentKeepalive}
	for _, n := range members {
		s.allowedIPs = append(s.allowedIPs, n.Subnet)
		if n.InternalIP.IsValid() {
			s.allowedIPs = append(s.allowedIPs, host(n.InternalIP.Addr()))
			s.privateIPs = append(s.privateIPs, n.InternalIP.Addr())
		}
		s.cidrs = append(s.cidrs, n.Subnet)
	}
	return s
}

// findLeader follows findLeader in Kilo's pkg/mesh/topology.go: among nodes
// sorted by name, the first that asks to lead and has a public endpoint,
// else the first that asks to lead, else the first with a public endpoint,
// else the first.
func findLeader(nodes []*Node) int {
	var leaders, public []int
	for i, n := range nodes {
		pub := n.Endpoint.ip().IsValid() && isPublic(n.Endpoint.ip())
		if n.Leader {
			if pub {
				return i
			}
			leaders = append(leaders, i)
		}
		if pub {
			public = append(public, i)
		}
	}
	if len(leaders) > 0 {
		return leaders[0]
	}
	if len(public) > 0 {
		return public[0]
	}
	return 0
}

// isPublic follows isPublic in Kilo's pkg/mesh/ip.go: every IPv4 address
// outside RFC 1918, every IPv6 address outside fd00::/8.
func isPublic(a netip.Addr) bool {
	if a.Is4() {
		b := a.As4()
		switch {
		case b[0] == 10, b[0] == 172 && b[1]&0xf0 == 0x10, b[0] == 192 && b[1] == 168:
			return false
		}
		return true
	}
	b := a.As16()
	return b[0] != 0xfd || b[1] != 0
}

// deduplicatePeerIPs follows deduplicatePeerIPs in Kilo's
// pkg/mesh/topology.go: an allowed IP already claimed by a Peer earlier in
// name order is dropped from the later ones.
func deduplicatePeerIPs(peers []*Peer) []*Peer {
	seen := map[netip.Prefix]bool{}
	out := make([]*Peer, len(peers))
	for i, p := range peers {
		q := *p
		q.AllowedIPs = nil
		for _, a := range p.AllowedIPs {
			if seen[a] {
				continue
			}
			seen[a] = true
			q.AllowedIPs = append(q.AllowedIPs, a)
		}
		out[i] = &q
	}
	return out
}

// updateEndpoint follows Topology.updateEndpoint: a peer with a keepalive
// uses the endpoint WireGuard learned for its key, when there is one.
func (t *Topology) updateEndpoint(e *Endpoint, k Key, keepalive int) *Endpoint {
	if keepalive == 0 {
		return e
	}
	if d, ok := t.discovered[k.String()]; ok {
		return &Endpoint{Addr: d}
	}
	return e
}

// A Conf is the WireGuard configuration Kilo's agent writes on a leader
// (wireguard.Conf): it replaces every peer.
type Conf struct {
	PrivateKey Key
	ListenPort int
	Peers      []PeerConf
}

// A PeerConf is one peer of a Conf.
type PeerConf struct {
	PublicKey Key
	// Endpoint is the peer's address; invalid for a peer without one.
	Endpoint     netip.AddrPort
	AllowedIPs   []netip.Prefix
	Keepalive    int
	PresharedKey *Key
}

// conf follows Topology.Conf: every other segment of the cluster and every
// Peer. The keepalive of every peer is the local node's own
// persistent-keepalive; a Peer's persistentKeepalive only decides whether
// its learned endpoint is kept (updateEndpoint).
func (t *Topology) conf() Conf {
	c := Conf{PrivateKey: t.key, ListenPort: t.port}
	for _, s := range t.segments {
		if s.location == t.location {
			continue
		}
		c.Peers = append(c.Peers, PeerConf{
			PublicKey:  s.key,
			Endpoint:   t.updateEndpoint(s.endpoint, s.key, s.keepalive).resolved(),
			AllowedIPs: s.allowedIPs,
			Keepalive:  t.keepalive,
		})
	}
	for _, p := range t.peers {
		c.Peers = append(c.Peers, PeerConf{
			PublicKey:    p.Key,
			Endpoint:     t.updateEndpoint(p.Endpoint, p.Key, p.PersistentKeepalive).resolved(),
			AllowedIPs:   p.AllowedIPs,
			Keepalive:    t.keepalive,
			PresharedKey: p.PresharedKey,
		})
	}
	return c
}

// resolved is the address of an endpoint, invalid when it has none yet.
func (e *Endpoint) resolved() netip.AddrPort {
	if e == nil {
		return netip.AddrPort{}
	}
	return e.Addr
}

// Devices a route goes through.
const (
	devWireGuard = "wireguard" // Kilo's kilo0
	devPrivate   = "private"   // the interface of the node's internal IP
)

// A Route is one route Kilo's agent installs.
type Route struct {
	Dst netip.Prefix
	Dev string
	// Gw is the next hop, reached on link; invalid for none.
	Gw netip.Addr
	// Src is the preferred source address; invalid for none.
	Src netip.Addr
}

func (r Route) String() string {
	s := r.Dst.String() + " dev " + r.Dev
	if r.Gw.IsValid() {
		s += " via " + r.Gw.String()
	}
	if r.Src.IsValid() {
		s += " src " + r.Src.String()
	}
	return s
}

// routes follows Topology.Routes of Kilo's pkg/mesh/routes.go with
// --local=true and without encapsulation: the routes Kilo sends through its
// IPIP tunnel to a node's internal IP go to that address on the private
// interface instead (the harness's cluster network is one link, and the
// kernel here has no ipip module).
func (t *Topology) routes() []Route {
	if t.leader {
		return t.leaderRoutes()
	}
	return t.followerRoutes()
}

// localRoutes are the routes to the pod CIDRs of the other nodes of the
// local segment, through their internal IPs.
func (t *Topology) localRoutes(s *segment) []Route {
	var out []Route
	for i := range s.cidrs {
		if s.privateIPs[i] == t.privateIP.Addr() {
			continue
		}
		out = append(out, Route{Dst: s.cidrs[i], Dev: devPrivate, Gw: s.privateIPs[i]})
	}
	return out
}

// followerRoutes are the routes of a node that does not lead its location:
// everything outside its location goes to the leader's internal IP.
func (t *Topology) followerRoutes() []Route {
	var out []Route
	var gw netip.Addr
	for _, s := range t.segments {
		if s.location == t.location {
			gw = s.privateIPs[s.leader]
			break
		}
	}
	via := func(dst netip.Prefix) Route { return Route{Dst: dst, Dev: devPrivate, Gw: gw} }
	for _, s := range t.segments {
		out = append(out, via(host(s.wireGuardIP)))
		if s.location == t.location {
			out = append(out, t.localRoutes(s)...)
			continue
		}
		for _, c := range s.cidrs {
			out = append(out, via(c))
		}
		for _, p := range s.privateIPs {
			out = append(out, via(host(p)))
		}
	}
	for _, p := range t.peers {
		for _, a := range p.AllowedIPs {
			out = append(out, via(a))
		}
	}
	return out
}

// leaderRoutes are the routes of a segment leader: the other segments and
// every Peer through the WireGuard interface, the nodes of its own location
// through their internal IPs.
func (t *Topology) leaderRoutes() []Route {
	var out []Route
	var src netip.Addr
	if t.privateIP.IsValid() {
		src = t.privateIP.Addr()
	}
	for _, s := range t.segments {
		if s.location == t.location {
			if t.privateIP.IsValid() {
				out = append(out, t.localRoutes(s)...)
			}
			continue
		}
		endpoint := t.updateEndpoint(s.endpoint, s.key, s.keepalive).ip()
		for i, c := range s.cidrs {
			out = append(out, Route{Dst: c, Dev: devWireGuard, Gw: s.wireGuardIP, Src: src})
			// A node reached only at its endpoint address gets no route
			// to it through the tunnel.
			if len(s.privateIPs) == 0 || s.privateIPs[i] == endpoint {
				continue
			}
			out = append(out, Route{Dst: host(s.privateIPs[i]), Dev: devWireGuard, Gw: s.wireGuardIP, Src: src})
		}
	}
	for _, p := range t.peers {
		for _, a := range p.AllowedIPs {
			out = append(out, Route{Dst: a, Dev: devWireGuard, Src: src})
		}
	}
	return out
}

// host is the prefix of one address, as Kilo's oneAddressCIDR.
func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// discoverNATEndpoints follows discoverNATEndpoints in Kilo's
// pkg/mesh/mesh.go: the endpoints WireGuard learned from a handshake, for
// the nodes that have a keepalive of their own and for every Peer.
func discoverNATEndpoints(nodes map[string]*Node, peers map[string]*Peer, dev *Device) map[string]netip.AddrPort {
	out := map[string]netip.AddrPort{}
	if dev == nil {
		return out
	}
	byKey := map[Key]DevicePeer{}
	for _, p := range dev.Peers {
		byKey[p.PublicKey] = p
	}
	for _, n := range nodes {
		if p, ok := byKey[n.Key]; ok && n.PersistentKeepalive != 0 && !p.LastHandshake.IsZero() && p.Endpoint.IsValid() {
			out[n.Key.String()] = p.Endpoint
		}
	}
	for _, q := range peers {
		if p, ok := byKey[q.Key]; ok && !p.LastHandshake.IsZero() && p.Endpoint.IsValid() {
			out[q.Key.String()] = p.Endpoint
		}
	}
	return out
}

// resolveEndpoints follows Mesh.resolveEndpoints: every DNS endpoint of a
// ready node or Peer is resolved, and one that does not resolve stops the
// whole apply. The harness resolves with its own hosts table.
func resolveEndpoints(nodes map[string]*Node, peers map[string]*Peer, hosts map[string]netip.Addr) error {
	resolve := func(e *Endpoint) error {
		if e == nil || e.DNS == "" {
			return nil
		}
		name := hostOf(e.DNS)
		a, ok := hosts[name]
		if !ok {
			return fmt.Errorf("cannot resolve endpoint %s: no such host in the harness's hosts", e.DNS)
		}
		e.Addr = netip.AddrPortFrom(a, uint16(e.port()))
		return nil
	}
	for _, n := range nodes {
		if err := resolve(n.Endpoint); err != nil {
			return err
		}
	}
	for _, p := range peers {
		if err := resolve(p.Endpoint); err != nil {
			return err
		}
	}
	return nil
}

// hostOf is the host of host:port.
func hostOf(s string) string {
	h, _, err := net.SplitHostPort(s)
	if err != nil {
		return s
	}
	return h
}

// equal follows wireguard.Conf.Equal of Kilo's pkg/wireguard/conf.go, which
// decides whether the agent writes the configuration at all, quirk
// included: peers are compared in public-key order, and at the first peer
// without an endpoint on either side the comparison stops, equal only if
// both lack it. A change to a peer after that one is not written.
func equal(c Conf, d *Device) (bool, string) {
	if d == nil {
		return false, "no device"
	}
	if c.ListenPort != d.ListenPort {
		return false, fmt.Sprintf("listen port %d, want %d", d.ListenPort, c.ListenPort)
	}
	if c.PrivateKey != d.PrivateKey {
		return false, "private key"
	}
	if len(c.Peers) != len(d.Peers) {
		return false, fmt.Sprintf("%d peers, want %d", len(d.Peers), len(c.Peers))
	}
	want := append([]PeerConf(nil), c.Peers...)
	sort.Slice(want, func(i, j int) bool { return want[i].PublicKey.String() < want[j].PublicKey.String() })
	have := append([]DevicePeer(nil), d.Peers...)
	sort.Slice(have, func(i, j int) bool { return have[i].PublicKey.String() < have[j].PublicKey.String() })
	for i := range want {
		w, h := sortedCIDRs(want[i].AllowedIPs), sortedCIDRs(have[i].AllowedIPs)
		if len(w) != len(h) {
			return false, fmt.Sprintf("peer %d has %d allowed IPs, want %d", i, len(h), len(w))
		}
		for j := range w {
			if w[j] != h[j] {
				return false, fmt.Sprintf("peer %d allowed IP %s, want %s", i, h[j], w[j])
			}
		}
		if !want[i].Endpoint.IsValid() || !have[i].Endpoint.IsValid() {
			return !want[i].Endpoint.IsValid() && !have[i].Endpoint.IsValid(), "peer endpoints: nil value"
		}
		if want[i].Endpoint != have[i].Endpoint {
			return false, fmt.Sprintf("peer %d endpoint %s, want %s", i, have[i].Endpoint, want[i].Endpoint)
		}
		var psk Key
		if want[i].PresharedKey != nil {
			psk = *want[i].PresharedKey
		}
		if want[i].Keepalive != have[i].Keepalive || psk != have[i].PresharedKey || want[i].PublicKey != have[i].PublicKey {
			return false, fmt.Sprintf("peer %d: key %s, keepalive %d, want key %s, keepalive %d, or the preshared key", i, have[i].PublicKey, have[i].Keepalive, want[i].PublicKey, want[i].Keepalive)
		}
	}
	return true, ""
}

// sortedCIDRs sorts prefixes by their text, as Kilo's sortCIDRs does.
func sortedCIDRs(in []netip.Prefix) []string {
	out := make([]string, len(in))
	for i, p := range in {
		out[i] = p.String()
	}
	sort.Strings(out)
	return out
}
