package mesh

import (
	"encoding/base64"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
}

var cidrSeeds = []string{
	"10.1.0.0/16", "10.1.0.1/16", "0.0.0.0/0", "::/0", "fd00:1::/48", "fd00::1/64", "::ffff:10.0.0.0/104",
	"fe80::%eth0/64", "10.1.0.0/33", "10.1.0.0", "", "/", "1.2.3.4/032", "10.1.0.0/16 ", "192.168.1.1/32",
	"2001:db8::/129", "1.2.3.4/-1", "01.2.3.4/8",
}

func FuzzParseCIDR(f *testing.F) {
	addSeeds(f, cidrSeeds...)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseCIDR(s)
		if err != nil {
			return
		}
		if !p.IsValid() || p.Addr().Zone() != "" {
			t.Fatalf("ParseCIDR(%q) = %v: an accepted network is valid and has no zone", s, p)
		}
		if p.Masked() != p {
			t.Fatalf("ParseCIDR(%q) = %v: an accepted network has no host bits", s, p)
		}
		if q, err := ParseCIDR(p.String()); err != nil || q != p {
			t.Fatalf("ParseCIDR(%q) = %v, but its text %q parses to %v, %v", s, p, p.String(), q, err)
		}
		if q, err := ParseNodeCIDR(s); err != nil || q != p {
			t.Fatalf("ParseCIDR(%q) = %v, but ParseNodeCIDR gives %v, %v", s, p, q, err)
		}
	})
}

func FuzzParseNodeCIDR(f *testing.F) {
	addSeeds(f, cidrSeeds...)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseNodeCIDR(s)
		if err != nil {
			if _, err2 := ParseCIDR(s); err2 == nil {
				t.Fatalf("ParseNodeCIDR(%q) rejects a network ParseCIDR accepts: %v", s, err)
			}
			return
		}
		if !p.IsValid() || p.Addr().Zone() != "" || p.Masked() != p {
			t.Fatalf("ParseNodeCIDR(%q) = %v: want a masked network without zone", s, p)
		}
		raw, err := netip.ParsePrefix(s)
		if err != nil || raw.Masked() != p {
			t.Fatalf("ParseNodeCIDR(%q) = %v is not the masked form of the input (%v, %v)", s, p, raw, err)
		}
		if q, err := ParseNodeCIDR(p.String()); err != nil || q != p {
			t.Fatalf("ParseNodeCIDR(%q) = %v, but its text parses to %v, %v", s, p, q, err)
		}
	})
}

func FuzzParseWireguardIP(f *testing.F) {
	addSeeds(f, "10.4.0.1/16", "10.4.0.1/32", "fd04::1/64", "10.4.0.1", "10.4.0.1/33", "fe80::1%kilo0/64", "", "/",
		"::ffff:10.4.0.1/112", "10.4.0.1/16/16", "10.4.0.1/", "a/16")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseWireguardIP(s)
		if err != nil {
			return
		}
		if !strings.Contains(s, "/") {
			t.Fatalf("ParseWireguardIP(%q) accepted an address without a prefix", s)
		}
		if !a.IsValid() || a.Zone() != "" {
			t.Fatalf("ParseWireguardIP(%q) = %v: want a valid address without zone", s, a)
		}
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Unmap() != a {
			t.Fatalf("ParseWireguardIP(%q) = %v is not the (unmapped) host of <ip>/<prefix> (%v, %v)", s, a, p, err)
		}
		r := HostRoute(a)
		if r.Bits() != a.BitLen() || r.Addr() != a {
			t.Fatalf("HostRoute(%v) = %v: want a /32 or /128 of the address", a, r)
		}
		if _, err := netip.ParsePrefix(r.String()); err != nil {
			t.Fatalf("HostRoute(%v) = %q does not parse: %v", a, r.String(), err)
		}
	})
}

func FuzzParseHostIP(f *testing.F) {
	addSeeds(f, "192.168.1.11", "192.168.1.11/24", "fd02::11", "fd02::11/64", "::ffff:192.168.1.11", "fe80::1%eth0",
		"fe80::1%eth0/64", "", "/", "node-1", "192.168.1.11/40", "0.0.0.0")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseHostIP(s)
		if err != nil {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ParseHostIP(%q) = %v: want a valid, unmapped address without zone", s, a)
		}
		if b, err := ParseHostIP(a.String()); err != nil || b != a {
			t.Fatalf("ParseHostIP(%q) = %v, but its text parses to %v, %v", s, a, b, err)
		}
		if b, err := ParseHostIP(HostRoute(a).String()); err != nil || b != a {
			t.Fatalf("ParseHostIP(%q) = %v, but its host route parses to %v, %v", s, a, b, err)
		}
	})
}

// peerWithEndpoint is a Peer that is valid but for its endpoint.
func peerWithEndpoint(e *kilov1alpha1.PeerEndpoint) *kilov1alpha1.Peer {
	return &kilov1alpha1.Peer{Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.0.0.0/8"}, PublicKey: testKey(1), Endpoint: e}}
}

func FuzzParseEndpoint(f *testing.F) {
	addSeeds(f, "203.0.113.1:51820", "100.0.100.0.:1", "[2001:db8::1]:51820", "[::ffff:203.0.113.1]:51820", "vpn.example.com:4000",
		"203.0.113.1:0", "203.0.113.1:65536", "2001:db8::1:51820", "[fe80::1%eth0]:51820", ":51820", "203.0.113.1",
		"my_host:51820", "[203.0.113.1]:51820", "[vpn.example.com]:1", "VPN.example.com:1", "vpn.:1", "a:00001",
		"[::]:1", "0.0.0.0:1", "1.2.3.4.5:1", "::1", "[[::1]]:1", "host:port", "")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEndpoint(s)
		if err != nil {
			return
		}
		if e.IP.IsValid() == (e.DNS != "") {
			t.Fatalf("ParseEndpoint(%q) = %+v: want exactly one of IP and DNS", s, e)
		}
		if e.Port < 1 {
			t.Fatalf("ParseEndpoint(%q) = %+v: port 0 accepted", s, e)
		}
		if e.IP.IsValid() && (e.IP.Zone() != "" || e.IP.Is4In6()) {
			t.Fatalf("ParseEndpoint(%q) = %+v: want an unmapped address without zone", s, e)
		}
		if e.DNS != "" {
			if errs := validation.IsDNS1123Subdomain(e.DNS); len(errs) > 0 {
				t.Fatalf("ParseEndpoint(%q) = %+v: DNS name is not an RFC 1123 subdomain: %v", s, e, errs)
			}
		}
		_, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n != int(e.Port) {
			t.Fatalf("ParseEndpoint(%q) = %+v: the port is not the one written (%q)", s, e, port)
		}
		if errs := peerWithEndpoint(e.AsPeerEndpoint()).Validate(); len(errs) > 0 {
			t.Fatalf("ParseEndpoint(%q) = %+v renders an endpoint Kilo rejects: %v", s, e, errs)
		}
		// The canonical text of an accepted endpoint parses back to it.
		text := net.JoinHostPort(e.Host(), strconv.Itoa(int(e.Port)))
		if again, err := ParseEndpoint(text); err != nil || again != e {
			t.Fatalf("ParseEndpoint(%q) = %+v, but %q parses to %+v, %v", s, e, text, again, err)
		}
	})
}

func FuzzParsePort(f *testing.F) {
	addSeeds(f, "1", "51820", "65535", "65536", "0", "00000", "00001", "-1", "+1", " 1", "", "99999", "4294967297", "1e3")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePort(s)
		n, aerr := strconv.ParseUint(s, 10, 64)
		if err != nil {
			if aerr == nil && n >= 1 && n <= 65535 && len(s) <= 5 {
				t.Fatalf("ParsePort(%q) rejects a decimal port: %v", s, err)
			}
			return
		}
		if p < 1 {
			t.Fatalf("ParsePort(%q) = %d: port 0 accepted", s, p)
		}
		if aerr != nil || n != uint64(p) {
			t.Fatalf("ParsePort(%q) = %d is not the decimal number written (%d, %v)", s, p, n, aerr)
		}
		if q, err := ParsePort(strconv.Itoa(int(p))); err != nil || q != p {
			t.Fatalf("ParsePort(%q) = %d, but its text parses to %d, %v", s, p, q, err)
		}
	})
}

// keyPattern is the pattern of Peer.spec.publicKey in Kilo's schema.
var keyPattern = regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`)

func FuzzParseKey(f *testing.F) {
	addSeeds(f, testKey(0), testKey(1), testKey(255), otherSpelling(testKey(1)), testKey(1)[:43], testKey(1)+"=",
		base64.StdEncoding.EncodeToString(make([]byte, 31)), base64.StdEncoding.EncodeToString(make([]byte, 33)),
		base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xff", 32))), strings.Repeat("A", 42)+"==",
		testKey(1)[:20]+"\n"+testKey(1)[21:], testKey(1)[:20]+"\r\n"+testKey(1)[22:], "")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		strict, serr := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			if serr == nil && len(strict) == 32 && keyPattern.MatchString(s) {
				t.Fatalf("ParseKey(%q) rejects standard base64 of 32 bytes: %v", s, err)
			}
			return
		}
		if !keyPattern.MatchString(s) {
			t.Fatalf("ParseKey(%q) accepts what Kilo's schema rejects", s)
		}
		lax, lerr := base64.StdEncoding.DecodeString(s)
		if lerr != nil || len(lax) != 32 || !reflect.DeepEqual(lax, k[:]) {
			t.Fatalf("ParseKey(%q) = %x, but the text decodes to %x, %v", s, k, lax, lerr)
		}
		canonical := kilov1alpha1.EncodeKey(k)
		if again, err := ParseKey(canonical); err != nil || again != k {
			t.Fatalf("ParseKey(%q) = %x, but its canonical text %q parses to %x, %v", s, k, canonical, again, err)
		}
		if !keyPattern.MatchString(canonical) {
			t.Fatalf("EncodeKey(%x) = %q does not match Kilo's schema", k, canonical)
		}
		if serr == nil && s != canonical {
			t.Fatalf("ParseKey(%q): strict base64 of a key is its canonical text, got %q", s, canonical)
		}
	})
}

func FuzzParseKeepalive(f *testing.F) {
	addSeeds(f, "0", "25", "65535", "65536", "-1", "+1", "25s", "", "00025", "000000", "1e2", " 1")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKeepalive(s)
		n, aerr := strconv.ParseUint(s, 10, 64)
		if err != nil {
			if aerr == nil && n <= 65535 && len(s) <= 5 {
				t.Fatalf("ParseKeepalive(%q) rejects whole seconds: %v", s, err)
			}
			return
		}
		if k < 0 || k > 65535 {
			t.Fatalf("ParseKeepalive(%q) = %d: out of 0-65535", s, k)
		}
		if aerr != nil || n != uint64(k) {
			t.Fatalf("ParseKeepalive(%q) = %d is not the decimal number written (%d, %v)", s, k, n, aerr)
		}
	})
}

func FuzzParseDiscoveredEndpoints(f *testing.F) {
	k1 := testKey(1)
	addSeeds(f,
		`{"`+k1+`":{"IP":"192.0.2.7","Port":40000,"Zone":""}}`,
		`{"`+k1+`":{"IP":"2001:db8::7","Port":51820}}`,
		`{"`+k1+`":{"IP":"::ffff:192.0.2.7","Port":1}}`,
		`{"`+k1+`":{"IP":"127.0.0.1","Port":1}}`,
		`{"`+k1+`":{"IP":"fe80::1","Port":1,"Zone":"eth0"}}`,
		`{"`+k1+`":{"IP":"192.0.2.7","Port":0}}`,
		`{"`+k1+`":{"IP":"192.0.2.7","Port":70000}}`,
		`{"`+k1+`":{"IP":"192.0.2.7","Port":-1}}`,
		`{"`+k1+`":{"IP":"192.0.2.7","Port":1.5}}`,
		`{"`+k1+`":null}`,
		`{"x":{"IP":"192.0.2.7","Port":1}}`,
		`{}`, `null`, `[]`, `{"`, ``, `"s"`,
	)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDiscoveredEndpoints(s)
		if err != nil {
			return
		}
		for k, e := range m {
			if _, ok := kilov1alpha1.ParseKey(kilov1alpha1.EncodeKey(k)); !ok {
				t.Fatalf("ParseDiscoveredEndpoints(%q): key %x does not round-trip", s, k)
			}
			a := e.IP
			if !a.IsValid() || e.DNS != "" || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("ParseDiscoveredEndpoints(%q): entry %+v is not a plain address", s, e)
			}
			if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalMulticast() {
				t.Fatalf("ParseDiscoveredEndpoints(%q): entry %+v cannot be dialled from elsewhere", s, e)
			}
			if e.Port < 1 {
				t.Fatalf("ParseDiscoveredEndpoints(%q): entry %+v has port 0", s, e)
			}
			if errs := peerWithEndpoint(e.AsPeerEndpoint()).Validate(); len(errs) > 0 {
				t.Fatalf("ParseDiscoveredEndpoints(%q): entry %+v renders an endpoint Kilo rejects: %v", s, e, errs)
			}
		}
		// The same text gives the same endpoints every time.
		for range 3 {
			again, err := ParseDiscoveredEndpoints(s)
			if err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("ParseDiscoveredEndpoints(%q) is not deterministic: %v then %v, %v", s, m, again, err)
			}
		}
	})
}

// FuzzPlan plans a mesh of three clusters whose nodes carry fuzzed
// annotations and addresses, next to nodes that pass every check.
func FuzzPlan(f *testing.F) {
	// Fields: wireguard-ip, key, clustermesh-endpoint, force-endpoint,
	// endpoint, internal-ip, force-internal-ip, allowed-location-ips,
	// keepalive, discovered-endpoints, granularity, location, pod CIDR,
	// ExternalIP, leader, stale.
	f.Add("10.41.0.9/16", testKey(9), "", "", "203.0.113.9:51820", "192.168.1.9/24", "", "", "", "", "", "", "10.1.9.0/24", "203.0.113.9", false, false)
	f.Add("10.41.0.9/16", testKey(9), "mesh.example.com:1", "", "10.0.0.9:51820", "", "-", "172.16.1.0/24", "30", "", "full", "eu", "10.1.9.0/24", "", true, false)
	f.Add("10.41.0.9/16", testKey(9), "", "[2001:db8::9]:65535", "", "", "192.168.16.9/32", "172.16.0.0/16,10.2.0.0/16", "", "", "location", "eu", "10.1.9.0/24", "", false, false)
	f.Add("10.41.0.9/32", otherSpelling(testKey(1)), "", "", "203.0.113.1:1", "203.0.113.1/24", "", "", "x", "", "location", "", "10.1.9.0/24", "", true, true)
	f.Add("10.41.0.1/16", testKey(101), "", "", "198.51.100.1:51820", "192.168.1.1/24", "", "", "", `{"`+testKey(101)+`":{"IP":"203.0.113.1","Port":9}}`, "", "", "10.1.1.0/25", "", false, false)
	f.Add("fd41::1/64", testKey(9), "", "", "vpn:1", "::ffff:192.168.1.1/120", "", "fd00::/8", "0", "{", "full", "us", "fd01::/64", "2001:db8::1", false, false)
	f.Add("junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", "junk", true, true)
	f.Add("", "", "", "", "", "", "", "", "", "", "", "", "", "", false, false)
	f.Fuzz(func(t *testing.T, wg, key, cme, force, ep, internal, forceInternal, locIPs, keepalive, disc, gran, loc, pod, ext string, leader, isStale bool) {
		fuzzed := func(name string) kubev1alpha1.ObservedNode {
			n := observedNode(name, podCIDRs(pod), location(loc))
			n.Kilo = &kubev1alpha1.KiloAnnotations{
				WireguardIP: wg, Key: key, ClustermeshEndpoint: cme, ForceEndpoint: force, Endpoint: ep,
				InternalIP: internal, ForceInternalIP: forceInternal, AllowedLocationIPs: locIPs,
				PersistentKeepalive: keepalive, DiscoveredEndpoints: disc, Granularity: gran,
			}
			if leader {
				n.Kilo.Leader = "true"
			}
			n.Stale = isStale
			if ext != "" {
				n.ExternalIPs = []string{ext, "203.0.113.1"}
			}
			return n
		}
		for _, g := range []meshv1alpha1.Granularity{meshv1alpha1.GranularityAuto, meshv1alpha1.GranularityLocation} {
			in := meshInput([]meshv1alpha1.Cluster{
				clusterA(withService("10.201.0.0/16"), withAdditional("172.16.0.0/16"), withKeepalive(5)),
				clusterB(withAdditional("172.17.0.0/16")),
				clusterC(),
			}, map[string]*Observation{
				"a": observation(nodeA1(location(loc), internalIP("192.168.1.1/24")), fuzzed("a9"), fuzzed("a0")),
				"b": observation(nodeB1(internalIP(internal), discovered(disc)), fuzzed("b9")),
				"c": observation(fuzzed("c9")),
			})
			in.Spec.Granularity = g
			in.Observations["c"].ForeignPeers = []kubev1alpha1.ForeignPeer{{Name: PeerName(testNamespace, testMesh, "a", "a9"), PublicKey: key, AllowedIPs: []string{locIPs, pod}}}
			p, err := Do(in)
			if err != nil {
				t.Fatalf("Do(...) with fuzzed nodes: %v", err)
			}
			checkPlan(t, in, p)
		}
	})
}

// checkPlan asserts what holds of every plan: Kilo accepts every Peer, names
// and labels are valid, nothing of a cluster is written into it, and a
// target holds one Peer per key.
func checkPlan(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	for target, peers := range p.Peers {
		keys := map[[kilov1alpha1.KeyLen]byte]string{}
		names := map[string]bool{}
		for i := range peers {
			peer := &peers[i]
			if errs := peer.Validate(); len(errs) > 0 {
				t.Fatalf("Peer %s in %s fails Kilo's validation: %v\n%+v", peer.Name, target, errs, peer.Spec)
			}
			if len(peer.Name) > 253 || len(validation.IsDNS1123Subdomain(peer.Name)) > 0 {
				t.Fatalf("Peer name %q in %s is not a DNS-1123 subdomain of at most 253 characters", peer.Name, target)
			}
			if names[peer.Name] {
				t.Fatalf("Peer name %q appears twice in %s", peer.Name, target)
			}
			names[peer.Name] = true
			for k, v := range peer.Labels {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Fatalf("Peer %s in %s: label %s=%q is not a label value: %v", peer.Name, target, k, v, errs)
				}
			}
			if peer.Labels[meshv1alpha1.LabelSourceCluster] == meshv1alpha1.LabelValue(target) {
				t.Fatalf("Peer %s of cluster %s is written into that cluster itself", peer.Name, target)
			}
			k, _ := kilov1alpha1.ParseKey(peer.Spec.PublicKey)
			if other, dup := keys[k]; dup {
				t.Fatalf("Peers %s and %s in %s share the key %s", other, peer.Name, target, peer.Spec.PublicKey)
			}
			keys[k] = peer.Name
			if kilov1alpha1.EncodeKey(k) != peer.Spec.PublicKey {
				t.Fatalf("Peer %s in %s: key %q is not in canonical form", peer.Name, target, peer.Spec.PublicKey)
			}
			seen := map[string]bool{}
			for _, a := range peer.Spec.AllowedIPs {
				if seen[a] {
					t.Fatalf("Peer %s in %s routes %s twice: %v", peer.Name, target, a, peer.Spec.AllowedIPs)
				}
				seen[a] = true
			}
			if peer.Spec.Endpoint == nil {
				t.Fatalf("Peer %s in %s has no endpoint: Kilo counts only nodes with one", peer.Name, target)
			}
		}
		checkRoutes(t, in, target, peers)
	}
	members := map[string]bool{}
	for _, c := range in.Spec.Clusters {
		members[c.Name] = true
	}
	for target := range p.Peers {
		if !members[target] {
			t.Fatalf("Peers planned for %s, which is not a member", target)
		}
	}
}

// declared are the CIDRs a cluster of the spec declares, parsed.
func declared(c meshv1alpha1.Cluster) (all, anchor []netip.Prefix) {
	for _, s := range c.PodCIDRs {
		all = append(all, netip.MustParsePrefix(string(s)))
	}
	all = append(all, netip.MustParsePrefix(string(c.WireguardCIDR)))
	for _, s := range c.NodeCIDRs {
		all = append(all, netip.MustParsePrefix(string(s)))
	}
	if c.ServiceCIDR != nil {
		anchor = append(anchor, netip.MustParsePrefix(string(*c.ServiceCIDR)))
	}
	for _, s := range c.AdditionalCIDRs {
		anchor = append(anchor, netip.MustParsePrefix(string(s)))
	}
	return append(all, anchor...), anchor
}

// checkRoutes asserts the routing invariants of the Peers in one target:
// every prefix of a source's Peer lies inside that source's declared
// networks (so node data never routes an arbitrary address) and overlaps
// no other member's; and no two Peers route the same address, except a
// location's range inside its own cluster's declared anchor CIDR (the more
// specific prefix wins).
func checkRoutes(t *testing.T, in *Input, target string, peers []kilov1alpha1.Peer) {
	t.Helper()
	type route struct {
		prefix netip.Prefix
		peer   string
		source string
	}
	var routes []route
	for i := range peers {
		peer := &peers[i]
		source := peer.Labels[meshv1alpha1.LabelSourceCluster]
		for _, a := range peer.Spec.AllowedIPs {
			pr := netip.MustParsePrefix(a)
			for _, c := range in.Spec.Clusters {
				nets, _ := declared(c)
				inside := false
				for _, n := range nets {
					if c.Name == source && n.Bits() <= pr.Bits() && n.Contains(pr.Addr()) {
						inside = true
					}
					if c.Name != source && n.Overlaps(pr) {
						t.Fatalf("Peer %s of %s in %s routes %s into %s's declared network %s", peer.Name, source, target, pr, c.Name, n)
					}
				}
				if c.Name == source && !inside {
					t.Fatalf("Peer %s of %s in %s routes %s, outside every network %s declares", peer.Name, source, target, pr, source)
				}
			}
			routes = append(routes, route{pr, peer.Name, source})
		}
	}
	anchors := map[string][]netip.Prefix{}
	for _, c := range in.Spec.Clusters {
		_, anchors[c.Name] = declared(c)
	}
	for i := range routes {
		for j := range i {
			a, b := routes[i], routes[j]
			if a.peer == b.peer || !a.prefix.Overlaps(b.prefix) {
				continue
			}
			outer, inner := a, b
			if b.prefix.Bits() < a.prefix.Bits() {
				outer, inner = b, a
			}
			if outer.prefix != inner.prefix && outer.source == inner.source && slices.Contains(anchors[outer.source], outer.prefix) {
				continue
			}
			t.Fatalf("Peers %s and %s in %s both route %s and %s", a.peer, b.peer, target, a.prefix, b.prefix)
		}
	}
}
