package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// Keys of the tests: any 32 bytes will do.
var (
	k1 = Key{1}
	k2 = Key{2}
	k3 = Key{3}
	k4 = Key{4}
	kp = Key{9}
)

func ep(s string) *Endpoint { return parseEndpoint(s) }

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestFindLeader(t *testing.T) {
	cases := map[string]struct {
		reason string
		nodes  []*Node
		want   int
	}{
		"VolunteerWithPublicEndpoint": {
			reason: "The first node that asks to lead and has a public endpoint leads.",
			nodes:  []*Node{{Endpoint: ep("198.51.100.1:51820")}, {Endpoint: ep("10.0.0.2:51820"), Leader: true}, {Endpoint: ep("198.51.100.3:51820"), Leader: true}},
			want:   2,
		},
		"VolunteerBeforePublic": {
			reason: "A node that asks to lead wins over one with a public endpoint.",
			nodes:  []*Node{{Endpoint: ep("198.51.100.1:51820")}, {Endpoint: ep("10.0.0.2:51820"), Leader: true}},
			want:   1,
		},
		"FirstPublic": {
			reason: "Without volunteers, the first node with a public endpoint leads.",
			nodes:  []*Node{{Endpoint: ep("192.168.0.1:51820")}, {Endpoint: ep("172.16.0.2:51820")}, {Endpoint: ep("100.64.0.3:51820")}},
			want:   2,
		},
		"First": {
			reason: "Without volunteers or public endpoints, the first node leads.",
			nodes:  []*Node{{Endpoint: ep("10.0.0.1:51820")}, {Endpoint: ep("10.0.0.2:51820")}},
			want:   0,
		},
		"UnresolvedName": {
			reason: "A DNS endpoint counts by its address, which it has only once resolved.",
			nodes:  []*Node{{Endpoint: ep("10.0.0.1:51820")}, {Endpoint: ep("vpn.example.net:51820")}},
			want:   0,
		},
		"ResolvedName": {
			reason: "Kilo resolves DNS endpoints before it elects, so a name of a public address counts as public.",
			nodes:  []*Node{{Endpoint: ep("10.0.0.1:51820")}, {Endpoint: &Endpoint{DNS: "vpn.example.net:51820", Addr: netip.MustParseAddrPort("198.51.100.2:51820")}}},
			want:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, findLeader(tc.nodes)); diff != "" {
				t.Errorf("%s\nfindLeader(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTranslateNode(t *testing.T) {
	node := func(podCIDR string, labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: annotations}, Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
	}
	cases := map[string]struct {
		reason string
		node   *corev1.Node
		want   *Node
	}{
		"Everything": {
			reason: "The annotations Kilo writes and the pod CIDR, masked, are read.",
			node: node("10.1.1.7/24", nil, map[string]string{
				kilov1alpha1.AnnotationKey:                 k1.String(),
				kilov1alpha1.AnnotationEndpoint:            "198.51.100.1:51820",
				kilov1alpha1.AnnotationInternalIP:          "192.168.1.11/24",
				kilov1alpha1.AnnotationLastSeen:            "1795000000",
				kilov1alpha1.AnnotationLocation:            "dc1",
				kilov1alpha1.AnnotationLeader:              "",
				kilov1alpha1.AnnotationPersistentKeepalive: "25",
				kilov1alpha1.AnnotationGranularity:         "full",
			}),
			want: &Node{Name: "n", Key: k1, Endpoint: ep("198.51.100.1:51820"), InternalIP: pfx("192.168.1.11/24"), LastSeen: 1795000000,
				Location: "dc1", Leader: true, PersistentKeepalive: 25, Subnet: pfx("10.1.1.0/24"), Granularity: "full"},
		},
		"Overrides": {
			reason: "force-endpoint wins over endpoint, force-internal-ip over internal-ip, the location annotation over the region label.",
			node: node("10.1.1.0/24", map[string]string{kilov1alpha1.LabelRegion: "eu"}, map[string]string{
				kilov1alpha1.AnnotationEndpoint:        "198.51.100.1:51820",
				kilov1alpha1.AnnotationForceEndpoint:   "vpn.example.net:51821",
				kilov1alpha1.AnnotationInternalIP:      "192.168.1.11/24",
				kilov1alpha1.AnnotationForceInternalIP: "172.16.0.1/16",
				kilov1alpha1.AnnotationLocation:        "dc1",
			}),
			want: &Node{Name: "n", Endpoint: &Endpoint{DNS: "vpn.example.net:51821"}, InternalIP: pfx("172.16.0.1/16"), Location: "dc1", Subnet: pfx("10.1.1.0/24")},
		},
		"Fallbacks": {
			reason: "A malformed force-endpoint falls back to endpoint, a present but empty force-internal-ip means none, the region label is the location, a bad key is none.",
			node: node("10.1.1.0/24", map[string]string{kilov1alpha1.LabelRegion: "eu"}, map[string]string{
				kilov1alpha1.AnnotationKey:             "not-a-key",
				kilov1alpha1.AnnotationEndpoint:        "198.51.100.1:51820",
				kilov1alpha1.AnnotationForceEndpoint:   "not a host:51820",
				kilov1alpha1.AnnotationInternalIP:      "192.168.1.11/24",
				kilov1alpha1.AnnotationForceInternalIP: "",
				kilov1alpha1.AnnotationGranularity:     "fine",
			}),
			want: &Node{Name: "n", Endpoint: ep("198.51.100.1:51820"), Location: "eu", Subnet: pfx("10.1.1.0/24")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, translateNode(tc.node), cmpopts.EquateComparable(netip.Prefix{}, netip.AddrPort{})); diff != "" {
				t.Errorf("%s\ntranslateNode(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNodeReady(t *testing.T) {
	now := time.Unix(1795000000, 0)
	ready := func() *Node {
		return &Node{Endpoint: ep("198.51.100.1:51820"), Key: k1, Subnet: pfx("10.1.1.0/24"), LastSeen: now.Unix() - 59}
	}
	with := func(f func(*Node)) *Node { n := ready(); f(n); return n }
	cases := map[string]struct {
		reason string
		node   *Node
		want   bool
	}{
		"Ready":      {reason: "An endpoint, a key, a pod CIDR and a heartbeat 59 s old make a node ready.", node: ready(), want: true},
		"Stale":      {reason: "A heartbeat two check-in periods old leaves the node out.", node: with(func(n *Node) { n.LastSeen = now.Unix() - 60 }), want: false},
		"NoEndpoint": {reason: "A node without an endpoint is left out.", node: with(func(n *Node) { n.Endpoint = nil }), want: false},
		"NoKey":      {reason: "A node without a key is left out.", node: with(func(n *Node) { n.Key = Key{} }), want: false},
		"NoPodCIDR":  {reason: "A node without a pod CIDR is left out.", node: with(func(n *Node) { n.Subnet = netip.Prefix{} }), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.node.ready(now)); diff != "" {
				t.Errorf("%s\nready(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestKiloPeers(t *testing.T) {
	peer := func(name string, key Key, ep *kilov1alpha1.PeerEndpoint, allowed ...string) kilov1alpha1.Peer {
		return kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kilov1alpha1.PeerSpec{PublicKey: key.String(), Endpoint: ep, AllowedIPs: allowed, PersistentKeepalive: 25}}
	}
	cases := map[string]struct {
		reason string
		peers  []kilov1alpha1.Peer
		want   map[string]*Peer
	}{
		"Invalid": {
			reason: "A Peer that fails Kilo's validation is ignored.",
			peers:  []kilov1alpha1.Peer{peer("bad", k1, nil, "10.1.0.0/16", "not a cidr")},
			want:   map[string]*Peer{},
		},
		"OneKeyTwice": {
			reason: "Peers are kept by public key: of two with one key, one is kept (the harness keeps the one whose name sorts last).",
			peers:  []kilov1alpha1.Peer{peer("b", k1, nil, "10.2.0.0/16"), peer("a", k1, nil, "10.1.0.0/16")},
			want:   map[string]*Peer{k1.String(): {Name: "b", Key: k1, AllowedIPs: []netip.Prefix{pfx("10.2.0.0/16")}, PersistentKeepalive: 25}},
		},
		"NameWinsOverIP": {
			reason: "An endpoint with a name and an address uses the name.",
			peers:  []kilov1alpha1.Peer{peer("p", k2, &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "198.51.100.1", DNS: "vpn.example.net"}, Port: 51820}, "10.2.0.0/16")},
			want:   map[string]*Peer{k2.String(): {Name: "p", Key: k2, Endpoint: &Endpoint{DNS: "vpn.example.net:51820"}, AllowedIPs: []netip.Prefix{pfx("10.2.0.0/16")}, PersistentKeepalive: 25}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, kiloPeers(tc.peers), cmpopts.EquateComparable(netip.Prefix{}, netip.AddrPort{})); diff != "" {
				t.Errorf("%s\nkiloPeers(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// cluster is a location-granularity cluster: node-1 (public endpoint,
// leads dc1) and node-2 in dc1, node-3 without an internal IP (a segment of
// its own), and a Peer that claims node-3's pod CIDR again.
func cluster() (map[string]*Node, map[string]*Peer) {
	nodes := map[string]*Node{
		"node-1": {Name: "node-1", Key: k1, Endpoint: ep("198.51.100.1:51820"), InternalIP: pfx("192.168.0.1/24"), Location: "dc1", Subnet: pfx("10.1.1.0/24"), PersistentKeepalive: 10},
		"node-2": {Name: "node-2", Key: k2, Endpoint: ep("192.168.0.2:51820"), InternalIP: pfx("192.168.0.2/24"), Location: "dc1", Subnet: pfx("10.1.2.0/24")},
		"node-3": {Name: "node-3", Key: k3, Endpoint: ep("198.51.100.3:51820"), Location: "dc1", Subnet: pfx("10.1.3.0/24")},
	}
	peers := map[string]*Peer{
		kp.String(): {Name: "remote", Key: kp, Endpoint: ep("203.0.113.9:51820"), AllowedIPs: []netip.Prefix{pfx("10.9.0.0/16"), pfx("10.1.3.0/24")}, PersistentKeepalive: 25},
	}
	return nodes, peers
}

func TestTopology(t *testing.T) {
	type want struct {
		leader bool
		cidr   netip.Prefix
		conf   Conf
		routes []Route
	}
	wg1, wg2 := addr("10.201.0.1"), addr("10.201.0.2")
	cases := map[string]struct {
		reason   string
		hostname string
		want     want
	}{
		"Leader": {
			reason:   "The leader of dc1 peers with the other segment (node-3) and the Peer, with its own keepalive for all; it routes them through WireGuard and its follower's pod CIDR to the follower.",
			hostname: "node-1",
			want: want{
				leader: true,
				cidr:   pfx("10.201.0.1/16"),
				conf: Conf{PrivateKey: kp, ListenPort: 51820, Peers: []PeerConf{
					{PublicKey: k3, Endpoint: netip.MustParseAddrPort("198.51.100.3:51820"), AllowedIPs: []netip.Prefix{pfx("10.1.3.0/24"), pfx("10.201.0.2/32")}, Keepalive: 10},
					{PublicKey: kp, Endpoint: netip.MustParseAddrPort("203.0.113.9:51820"), AllowedIPs: []netip.Prefix{pfx("10.9.0.0/16"), pfx("10.1.3.0/24")}, Keepalive: 10},
				}},
				routes: []Route{
					{Dst: pfx("10.1.2.0/24"), Dev: devPrivate, Gw: addr("192.168.0.2")},
					{Dst: pfx("10.1.3.0/24"), Dev: devWireGuard, Gw: wg2, Src: addr("192.168.0.1")},
					{Dst: pfx("10.9.0.0/16"), Dev: devWireGuard, Src: addr("192.168.0.1")},
					{Dst: pfx("10.1.3.0/24"), Dev: devWireGuard, Src: addr("192.168.0.1")},
				},
			},
		},
		"Follower": {
			reason:   "The follower routes everything outside its location, and the WireGuard IPs, through the leader's internal IP.",
			hostname: "node-2",
			want: want{
				cidr: pfx("10.201.0.0/16"),
				routes: []Route{
					{Dst: pfx("10.201.0.1/32"), Dev: devPrivate, Gw: addr("192.168.0.1")},
					{Dst: pfx("10.1.1.0/24"), Dev: devPrivate, Gw: addr("192.168.0.1")},
					{Dst: pfx("10.201.0.2/32"), Dev: devPrivate, Gw: addr("192.168.0.1")},
					{Dst: pfx("10.1.3.0/24"), Dev: devPrivate, Gw: addr("192.168.0.1")},
					{Dst: pfx("10.9.0.0/16"), Dev: devPrivate, Gw: addr("192.168.0.1")},
					{Dst: pfx("10.1.3.0/24"), Dev: devPrivate, Gw: addr("192.168.0.1")},
				},
			},
		},
		"NoInternalIP": {
			reason:   "A node without an internal IP is a segment of its own and leads it; without a private address it sets no source.",
			hostname: "node-3",
			want: want{
				leader: true,
				cidr:   pfx("10.201.0.2/16"),
				conf: Conf{PrivateKey: kp, ListenPort: 51820, Peers: []PeerConf{
					{PublicKey: k1, Endpoint: netip.MustParseAddrPort("198.51.100.1:51820"), AllowedIPs: []netip.Prefix{pfx("10.1.1.0/24"), pfx("192.168.0.1/32"), pfx("10.1.2.0/24"), pfx("192.168.0.2/32"), pfx("10.201.0.1/32")}},
					{PublicKey: kp, Endpoint: netip.MustParseAddrPort("203.0.113.9:51820"), AllowedIPs: []netip.Prefix{pfx("10.9.0.0/16"), pfx("10.1.3.0/24")}},
				}},
				routes: []Route{
					{Dst: pfx("10.1.1.0/24"), Dev: devWireGuard, Gw: wg1},
					{Dst: pfx("192.168.0.1/32"), Dev: devWireGuard, Gw: wg1},
					{Dst: pfx("10.1.2.0/24"), Dev: devWireGuard, Gw: wg1},
					{Dst: pfx("192.168.0.2/32"), Dev: devWireGuard, Gw: wg1},
					{Dst: pfx("10.9.0.0/16"), Dev: devWireGuard},
					{Dst: pfx("10.1.3.0/24"), Dev: devWireGuard},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodes, peers := cluster()
			tp, err := newTopology(nodes, peers, "location", tc.hostname, 51820, kp, pfx("10.201.0.0/16"), nodes[tc.hostname].PersistentKeepalive)
			if err != nil {
				t.Fatal(err)
			}
			got := want{leader: tp.leader, cidr: tp.wireGuardCIDR, routes: tp.routes()}
			if tp.leader {
				got.conf = tp.conf()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpopts.EquateComparable(netip.Prefix{}, netip.AddrPort{}, netip.Addr{})); diff != "" {
				t.Errorf("%s\nnewTopology(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeduplicatePeerIPs(t *testing.T) {
	in := []*Peer{
		{Name: "a", AllowedIPs: []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.2.0.0/16")}},
		{Name: "b", AllowedIPs: []netip.Prefix{pfx("10.2.0.0/16"), pfx("10.3.0.0/16")}},
	}
	want := []*Peer{
		{Name: "a", AllowedIPs: []netip.Prefix{pfx("10.1.0.0/16"), pfx("10.2.0.0/16")}},
		{Name: "b", AllowedIPs: []netip.Prefix{pfx("10.3.0.0/16")}},
	}
	if diff := cmp.Diff(want, deduplicatePeerIPs(in), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("An allowed IP claimed by a Peer earlier in name order leaves the later ones.\ndeduplicatePeerIPs(...): -want, +got:\n%s", diff)
	}
}

func TestEqual(t *testing.T) {
	// Keys sort by their base64 text: k1 (AQ...), k2 (Ag...), k3 (Aw...).
	e := netip.MustParseAddrPort("198.51.100.1:51820")
	conf := func(peers ...PeerConf) Conf { return Conf{PrivateKey: kp, ListenPort: 51820, Peers: peers} }
	dev := func(peers ...DevicePeer) *Device { return &Device{PrivateKey: kp, ListenPort: 51820, Peers: peers} }
	a := []netip.Prefix{pfx("10.1.0.0/16")}
	cases := map[string]struct {
		reason string
		conf   Conf
		dev    *Device
		want   bool
	}{
		"Same": {
			reason: "A device that holds the configuration is not written again.",
			conf:   conf(PeerConf{PublicKey: k1, Endpoint: e, AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, Endpoint: e, AllowedIPs: a}),
			want:   true,
		},
		"KeyChanged": {
			reason: "A peer whose key changed is written.",
			conf:   conf(PeerConf{PublicKey: k2, Endpoint: e, AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, Endpoint: e, AllowedIPs: a}),
			want:   false,
		},
		"EndpointChanged": {
			reason: "A peer whose endpoint changed is written.",
			conf:   conf(PeerConf{PublicKey: k1, Endpoint: netip.MustParseAddrPort("198.51.100.2:51820"), AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, Endpoint: e, AllowedIPs: a}),
			want:   false,
		},
		"ChangeAfterRoamingPeer": {
			reason: "Kilo's comparison stops at the first peer without an endpoint: a change of a peer whose key sorts after it is not written.",
			conf:   conf(PeerConf{PublicKey: k1, AllowedIPs: a}, PeerConf{PublicKey: k3, Endpoint: netip.MustParseAddrPort("198.51.100.3:51820"), AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, AllowedIPs: a}, DevicePeer{PublicKey: k3, Endpoint: e, AllowedIPs: a}),
			want:   true,
		},
		"ChangeBeforeRoamingPeer": {
			reason: "A change of a peer whose key sorts before the one without an endpoint is written.",
			conf:   conf(PeerConf{PublicKey: k1, Endpoint: netip.MustParseAddrPort("198.51.100.3:51820"), AllowedIPs: a}, PeerConf{PublicKey: k4, AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, Endpoint: e, AllowedIPs: a}, DevicePeer{PublicKey: k4, AllowedIPs: a}),
			want:   false,
		},
		"PeerAdded": {
			reason: "A new peer is written, wherever its key sorts.",
			conf:   conf(PeerConf{PublicKey: k1, AllowedIPs: a}, PeerConf{PublicKey: k3, Endpoint: e, AllowedIPs: a}),
			dev:    dev(DevicePeer{PublicKey: k1, AllowedIPs: a}),
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _ := equal(tc.conf, tc.dev)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nequal(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
