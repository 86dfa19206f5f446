package dataplane

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// What Kilo reads from Nodes and Peers, the way its agent reads it. Every
// function here names the function of Kilo it follows (Kilo 0.7.0; the same
// at the time of writing on its main branch).

// checkInPeriod is how often Kilo's agent writes its heartbeat; a node whose
// heartbeat is two periods old is not ready (checkInPeriod and Node.Ready in
// pkg/mesh/backend.go).
const checkInPeriod = 30 * time.Second

// Kilo's defaults (pkg/mesh/backend.go, cmd/kg/main.go).
const (
	defaultGranularity = kilov1alpha1.GranularityLocation
	topologyLabel      = kilov1alpha1.LabelRegion
)

// A Key is a WireGuard key.
type Key [32]byte

// parseKey reads a key as wgtypes.ParseKey does: standard base64 of exactly
// 32 bytes. Kilo keeps the zero key for anything else.
func parseKey(s string) Key {
	var k Key
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return Key{}
	}
	copy(k[:], b)
	return k
}

// String is the key in base64, as Kilo writes it.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// hex is the key as WireGuard's configuration protocol writes it.
func (k Key) hex() string { return hex.EncodeToString(k[:]) }

// An Endpoint is Kilo's wireguard.Endpoint: an IP address and port, or a DNS
// name and port that the agent resolves before it programs WireGuard.
type Endpoint struct {
	// Addr is the address, once known.
	Addr netip.AddrPort
	// DNS is host:port when the host is a name.
	DNS string
}

// parseEndpoint reads host:port as wireguard.ParseEndpoint does: a port in
// 1..65535, a host that is an IP address or an RFC 1123 subdomain; nil for
// anything else.
func parseEndpoint(s string) *Endpoint {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return nil
	}
	port, err := strconv.ParseUint(portText, 10, 32)
	if err != nil || port == 0 || port > 65535 {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return &Endpoint{Addr: netip.AddrPortFrom(ip.Unmap(), uint16(port))}
	}
	if len(validation.IsDNS1123Subdomain(host)) == 0 {
		return &Endpoint{DNS: s}
	}
	return nil
}

func (e *Endpoint) clone() *Endpoint {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

// ready is wireguard.Endpoint.Ready: an address with a port, or a name.
func (e *Endpoint) ready() bool {
	return e != nil && ((e.Addr.IsValid() && e.Addr.Port() > 0) || e.DNS != "")
}

// port is wireguard.Endpoint.Port.
func (e *Endpoint) port() int {
	if !e.ready() {
		return 0
	}
	if e.Addr.IsValid() {
		return int(e.Addr.Port())
	}
	_, p, _ := net.SplitHostPort(e.DNS)
	n, _ := strconv.Atoi(p)
	return n
}

// ip is wireguard.Endpoint.IP: the address once known, else invalid.
func (e *Endpoint) ip() netip.Addr {
	if e == nil {
		return netip.Addr{}
	}
	return e.Addr.Addr()
}

// A Node is a Node as Kilo's agent reads it (mesh.Node).
type Node struct {
	Name     string
	Endpoint *Endpoint
	Key      Key
	// InternalIP is the host address with the prefix length of its network;
	// invalid when the node has none.
	InternalIP          netip.Prefix
	LastSeen            int64
	Leader              bool
	Location            string
	PersistentKeepalive int
	// Subnet is the node's pod CIDR (spec.podCIDR); invalid when unset.
	Subnet              netip.Prefix
	DiscoveredEndpoints map[string]netip.AddrPort
	Granularity         string
	// AllowedLocationIPs is set when the node carries Kilo's
	// allowed-location-ips, which the harness does not follow.
	AllowedLocationIPs string
}

// hostPrefix reads an address with a prefix length as Kilo's normalizeIP
// does (pkg/k8s/backend.go): the host address is kept, not masked.
func hostPrefix(s string) netip.Prefix {
	ip, n, err := net.ParseCIDR(s)
	if err != nil || n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

// translateNode reads a Node as translateNode in Kilo's pkg/k8s/backend.go:
// the endpoint from force-endpoint, else endpoint; the internal IP from
// force-internal-ip, else internal-ip (a present force-internal-ip that is
// empty or "-" means none); the location from the location annotation, else
// the region label; the pod CIDR from spec.podCIDR.
func translateNode(o *corev1.Node) *Node {
	a := o.Annotations
	n := &Node{Name: o.Name, Key: parseKey(a[kilov1alpha1.AnnotationKey]), AllowedLocationIPs: a[kilov1alpha1.AnnotationAllowedLocationIPs]}
	if _, subnet, err := net.ParseCIDR(o.Spec.PodCIDR); err == nil {
		n.Subnet = hostPrefix(subnet.String())
	}
	_, n.Leader = a[kilov1alpha1.AnnotationLeader]
	loc, ok := a[kilov1alpha1.AnnotationLocation]
	if !ok {
		loc = o.Labels[topologyLabel]
	}
	n.Location = loc
	n.Endpoint = parseEndpoint(a[kilov1alpha1.AnnotationForceEndpoint])
	if n.Endpoint == nil {
		n.Endpoint = parseEndpoint(a[kilov1alpha1.AnnotationEndpoint])
	}
	n.InternalIP = hostPrefix(a[kilov1alpha1.AnnotationForceInternalIP])
	if !n.InternalIP.IsValid() {
		n.InternalIP = hostPrefix(a[kilov1alpha1.AnnotationInternalIP])
	}
	if s, ok := a[kilov1alpha1.AnnotationForceInternalIP]; ok && (s == "" || s == "-") {
		n.InternalIP = netip.Prefix{}
	}
	if s, ok := a[kilov1alpha1.AnnotationPersistentKeepalive]; ok {
		p, _ := strconv.Atoi(s) // Kilo reads a bad value as 0
		n.PersistentKeepalive = p
	}
	n.LastSeen, _ = strconv.ParseInt(a[kilov1alpha1.AnnotationLastSeen], 10, 64)
	if s, ok := a[kilov1alpha1.AnnotationDiscoveredEndpoints]; ok {
		n.DiscoveredEndpoints = parseDiscovered(s)
	}
	switch g := a[kilov1alpha1.AnnotationGranularity]; g {
	case kilov1alpha1.GranularityLocation, kilov1alpha1.GranularityFull:
		n.Granularity = g
	}
	return n
}

// parseDiscovered reads the JSON map of public key to net.UDPAddr that Kilo
// writes; Kilo drops the whole map when it does not parse.
func parseDiscovered(s string) map[string]netip.AddrPort {
	var raw map[string]*struct {
		IP   net.IP
		Port int
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil
	}
	out := make(map[string]netip.AddrPort, len(raw))
	for k, v := range raw {
		if v == nil {
			continue
		}
		if a, ok := netip.AddrFromSlice(v.IP); ok && v.Port > 0 && v.Port < 65536 {
			out[k] = netip.AddrPortFrom(a.Unmap(), uint16(v.Port))
		}
	}
	return out
}

// ready is Node.Ready in Kilo's pkg/mesh/backend.go: an endpoint, a key, a
// pod CIDR, and a heartbeat younger than two check-in periods.
func (n *Node) ready(now time.Time) bool {
	return n != nil && n.Endpoint.ready() && n.Key != Key{} && n.Subnet.IsValid() &&
		now.Unix()-n.LastSeen < int64(2*checkInPeriod/time.Second)
}

// A Peer is a Kilo Peer as Kilo's agent reads it (mesh.Peer).
type Peer struct {
	Name                string
	Key                 Key
	AllowedIPs          []netip.Prefix
	Endpoint            *Endpoint
	PersistentKeepalive int
	PresharedKey        *Key
}

// validPeer is Peer.Validate of Kilo's pkg/k8s/apis/kilo/v1alpha1: Kilo's
// Peer informer ignores a Peer that fails it.
func validPeer(p *kilov1alpha1.Peer) bool {
	for _, c := range p.Spec.AllowedIPs {
		if _, n, err := net.ParseCIDR(c); err != nil || n == nil {
			return false
		}
	}
	if e := p.Spec.Endpoint; e != nil {
		if e.DNSOrIP.IP == "" && e.DNSOrIP.DNS == "" {
			return false
		}
		if e.DNSOrIP.DNS != "" && len(validation.IsDNS1123Subdomain(e.DNSOrIP.DNS)) != 0 {
			return false
		}
		if e.DNSOrIP.IP != "" && net.ParseIP(e.DNSOrIP.IP) == nil {
			return false
		}
		if e.Port < 1 || e.Port > 65535 {
			return false
		}
	}
	if p.Spec.PersistentKeepalive < 0 {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(p.Spec.PublicKey)
	return err == nil && len(b) == 32
}

// translatePeer reads a Peer as translatePeer in Kilo's pkg/k8s/backend.go:
// allowed IPs that do not parse are dropped, a DNS name wins over an IP, an
// endpoint needs a port.
func translatePeer(p *kilov1alpha1.Peer) *Peer {
	out := &Peer{Name: p.Name, Key: parseKey(p.Spec.PublicKey)}
	for _, c := range p.Spec.AllowedIPs {
		if pre := hostPrefix(c); pre.IsValid() {
			out.AllowedIPs = append(out.AllowedIPs, pre)
		}
	}
	if e := p.Spec.Endpoint; e != nil && e.Port > 0 && e.Port <= 65535 {
		if ip, err := netip.ParseAddr(e.DNSOrIP.IP); err == nil {
			out.Endpoint = &Endpoint{Addr: netip.AddrPortFrom(ip.Unmap(), uint16(e.Port))}
		}
		if e.DNSOrIP.DNS != "" {
			out.Endpoint = parseEndpoint(net.JoinHostPort(e.DNSOrIP.DNS, strconv.Itoa(int(e.Port))))
		}
	}
	if psk := parseKey(p.Spec.PresharedKey); psk != (Key{}) {
		out.PresharedKey = &psk
	}
	if p.Spec.PersistentKeepalive > 0 {
		out.PersistentKeepalive = p.Spec.PersistentKeepalive
	}
	return out
}

// ready is Peer.Ready in Kilo's pkg/mesh/backend.go: allowed IPs and a key;
// the endpoint may be missing.
func (p *Peer) ready() bool {
	return p != nil && len(p.AllowedIPs) > 0 && p.Key != Key{}
}

// kiloPeers is the set of Peers Kilo's agent holds: the valid ones, by public
// key (Kilo's map of Peers is keyed by public key, so two Peers with one key
// overwrite each other; Kilo keeps the one whose event came last, the
// harness the one whose name sorts last).
func kiloPeers(ps []kilov1alpha1.Peer) map[string]*Peer {
	out := map[string]*Peer{}
	names := map[string]string{}
	for i := range ps {
		if !validPeer(&ps[i]) {
			continue
		}
		p := translatePeer(&ps[i])
		k := p.Key.String()
		if prev, ok := names[k]; ok && strings.Compare(prev, p.Name) > 0 {
			continue
		}
		names[k] = p.Name
		out[k] = p
	}
	return out
}
