package mesh

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Parsers of the values the planner reads from the ClusterMesh spec and from
// Node annotations. Each accepts exactly what Kilo accepts and says why it
// rejects the rest; none panics on any input.

var (
	errNotCanonical = errors.New("host bits are set")
	errZone         = errors.New("an address with a zone is not routable")
	errNoPort       = errors.New("must be host:port")
	errPort         = errors.New("port must be 1-65535")
	errHost         = errors.New("host must be an IP address or an RFC 1123 DNS name")
	errIPv6Brackets = errors.New("an IPv6 host must be in brackets, e.g. [2001:db8::1]:51820")
	errNoPrefix     = errors.New("must be <ip>/<prefix>")
	errUnreachable  = errors.New("an unspecified, loopback, multicast, link-local or broadcast address cannot be reached from another cluster")
	errLocalhost    = errors.New("localhost, and every name under .localhost, is the resolving node itself")
	errNumericName  = errors.New("a name written with numbers only is an address to many resolvers (127.1, 0x7f000001): write the address itself")
)

// ParseCIDR parses a network written in canonical CIDR form, as the
// ClusterMesh spec requires: 10.1.0.0/16, never 10.1.0.1/16.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, errZone
	}
	if p.Masked() != p {
		return netip.Prefix{}, errNotCanonical
	}
	return p, nil
}

// ParseNodeCIDR parses a CIDR of a Node (spec.podCIDRs), masking host bits
// the way Kubernetes' own parser does.
func ParseNodeCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, errZone
	}
	return p.Masked(), nil
}

// ParseWireguardIP parses kilo.squat.ai/wireguard-ip, written as
// <ip>/<prefix>. Only the host address matters: Kilo writes the prefix of
// its --subnet (10.4.0.1/16), some forks write /32.
func ParseWireguardIP(s string) (netip.Addr, error) {
	if !strings.Contains(s, "/") {
		return netip.Addr{}, errNoPrefix
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if p.Addr().Zone() != "" {
		return netip.Addr{}, errZone
	}
	return p.Addr().Unmap(), nil
}

// ParseHostIP parses an address of a Node: a bare IP (status.addresses) or
// the host part of a CIDR (kilo.squat.ai/internal-ip).
func ParseHostIP(s string) (netip.Addr, error) {
	var a netip.Addr
	var err error
	if strings.Contains(s, "/") {
		var p netip.Prefix
		p, err = netip.ParsePrefix(s)
		a = p.Addr()
	} else {
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, errZone
	}
	return a.Unmap(), nil
}

// HostRoute is the /32 or /128 route of one address.
func HostRoute(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}

// An Endpoint is the UDP address of a WireGuard peer: exactly one of IP and
// DNS is set.
type Endpoint struct {
	IP   netip.Addr
	DNS  string
	Port uint16
}

// Host is the endpoint's address or DNS name.
func (e Endpoint) Host() string {
	if e.IP.IsValid() {
		return e.IP.String()
	}
	return e.DNS
}

// AsPeerEndpoint converts the endpoint to Kilo's form.
func (e Endpoint) AsPeerEndpoint() *kilov1alpha1.PeerEndpoint {
	ep := &kilov1alpha1.PeerEndpoint{Port: uint32(e.Port)}
	if e.IP.IsValid() {
		ep.DNSOrIP.IP = e.IP.String()
	} else {
		ep.DNSOrIP.DNS = e.DNS
	}
	return ep
}

// ParseEndpoint parses host:port as Kilo's endpoint annotations are written:
// an IP address (IPv6 in brackets) or an RFC 1123 DNS name, and a port
// 1-65535. An IP that no other cluster can reach (unspecified, loopback,
// multicast, link-local) is refused.
func ParseEndpoint(s string) (Endpoint, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "[") {
			return Endpoint{}, errIPv6Brackets
		}
		return Endpoint{}, errNoPort
	}
	p, err := ParsePort(port)
	if err != nil {
		return Endpoint{}, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Endpoint{}, errZone
		}
		a = a.Unmap()
		if !reachable(a) {
			return Endpoint{}, errUnreachable
		}
		return Endpoint{IP: a, Port: p}, nil
	}
	// DNS names are case-insensitive and may be written fully qualified;
	// Kilo wants the lower-case subdomain form.
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !isDNSName(host) {
		return Endpoint{}, errHost
	}
	if _, err := netip.ParseAddr(host); err == nil {
		// An address with a trailing dot is neither an address nor a name
		// Kilo accepts.
		return Endpoint{}, errHost
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		// RFC 6761: every resolver answers these with its own loopback,
		// so the receiving node would send its tunnel to itself.
		return Endpoint{}, errLocalhost
	}
	if numericName(host) {
		return Endpoint{}, errNumericName
	}
	return Endpoint{DNS: host, Port: p}, nil
}

// numericName tells whether a DNS name could be read as an address by the
// resolver of the node that dials it: glibc's inet_aton reads one to four
// parts in decimal, octal or hex (127.1 is 127.0.0.1, 2130706433 and
// 0x7f000001 too), and no top-level domain is numeric (RFC 3696), so a
// name whose last label is numbers only is never a real host name.
func numericName(host string) bool {
	labels := strings.Split(host, ".")
	if isNumber(labels[len(labels)-1]) {
		return true
	}
	if len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		if !isNumber(l) {
			return false
		}
	}
	return true
}

// isNumber tells whether a label is a number as inet_aton reads one:
// decimal or octal digits, or 0x followed by hex digits.
func isNumber(l string) bool {
	digits := l
	hex := false
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		digits, hex = l[2:], true
	}
	if digits == "" {
		return hex // "0x" alone is zero to inet_aton
	}
	for _, c := range digits {
		switch {
		case c >= '0' && c <= '9':
		case hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// isDNSName tells whether s is an RFC 1123 subdomain whose labels are at
// most 63 characters long.
func isDNSName(s string) bool {
	if s == "" || len(validation.IsDNS1123Subdomain(s)) > 0 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) > validation.DNS1123LabelMaxLength {
			return false
		}
	}
	return true
}

// ParsePort parses a UDP port, 1-65535, written in decimal digits.
func ParsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errPort
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, errPort
	}
	return uint16(n), nil
}

// ParseKey parses a WireGuard public key: standard base64 of exactly 32
// bytes.
func ParseKey(s string) ([kilov1alpha1.KeyLen]byte, error) {
	k, ok := kilov1alpha1.ParseKey(s)
	if !ok {
		return k, errors.New("must be standard base64 of exactly 32 bytes")
	}
	return k, nil
}

// ParseKeepalive parses kilo.squat.ai/persistent-keepalive: whole seconds,
// 0-65535.
func ParseKeepalive(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("must be whole seconds, 0-65535")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 65535 {
		return 0, errors.New("must be whole seconds, 0-65535")
	}
	return n, nil
}

// discoveredEndpoint is one entry of kilo.squat.ai/discovered-endpoints, the
// JSON form of a Go net.UDPAddr.
type discoveredEndpoint struct {
	IP   string `json:"IP"`
	Port int    `json:"Port"`
	Zone string `json:"Zone"`
}

// FormatDiscoveredEndpoints writes endpoints by public key as Kilo's agent
// writes kilo.squat.ai/discovered-endpoints: a JSON object of Go's
// net.UDPAddr ({"IP", "Port", "Zone"}) by key, "{}" when there is none.
// ParseDiscoveredEndpoints reads it back.
func FormatDiscoveredEndpoints(endpoints map[string]netip.AddrPort) string {
	out := make(map[string]discoveredEndpoint, len(endpoints))
	for k, e := range endpoints {
		out[k] = discoveredEndpoint{IP: e.Addr().Unmap().String(), Port: int(e.Port())}
	}
	b, _ := json.Marshal(out) //nolint:errchkjson // Strings and numbers only.
	return string(b)
}

// ParseDiscoveredEndpoints parses kilo.squat.ai/discovered-endpoints and
// keeps the entries that can be dialled from elsewhere: a valid key, an IP
// that is neither loopback, link-local nor unspecified, and a port 1-65535.
// Entries that fail are dropped; only malformed JSON is an error.
func ParseDiscoveredEndpoints(s string) (map[[kilov1alpha1.KeyLen]byte]Endpoint, error) {
	var raw map[string]*discoveredEndpoint
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, errors.New("must be a JSON object of public key to {IP, Port}")
	}
	// Two spellings of one key may both be present: the first in sorted
	// order wins, whatever the order of the JSON object.
	keys := make([]string, 0, len(raw))
	for key := range raw {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	out := make(map[[kilov1alpha1.KeyLen]byte]Endpoint, len(raw))
	for _, key := range keys {
		d := raw[key]
		k, err := ParseKey(key)
		if err != nil || d == nil || d.Zone != "" || d.Port < 1 || d.Port > 65535 {
			continue
		}
		a, err := netip.ParseAddr(d.IP)
		if err != nil || a.Zone() != "" {
			continue
		}
		a = a.Unmap()
		if !reachable(a) {
			continue
		}
		if _, dup := out[k]; !dup {
			out[k] = Endpoint{IP: a, Port: uint16(d.Port)}
		}
	}
	return out, nil
}

// reachable tells whether another cluster can send to an address at all:
// not unspecified, loopback, multicast or link-local, and for IPv4 neither
// "this network" (0.0.0.0/8, which the sender reads as itself) nor the
// limited broadcast address.
func reachable(a netip.Addr) bool {
	if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
		return false
	}
	if a.Is4() {
		b := a.As4()
		return b[0] != 0 && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return true
}

// An agentEndpoint is an endpoint as Kilo's agent reads it from
// kilo.squat.ai/force-endpoint and kilo.squat.ai/endpoint (pkg/wireguard
// ParseEndpoint): usable when it parses, with an IP unless it is a DNS name.
type agentEndpoint struct {
	ok bool
	ip netip.Addr
}

// parseAgentEndpoint reads host:port exactly as Kilo does: a port that
// strconv.ParseUint reads as 1-65535 (leading zeros included) and a host
// that is an IP address or, failing that, an RFC 1123 subdomain written as
// it is. It decides whether Kilo considers a node ready, and which nodes
// Kilo prefers as leaders, so it follows Kilo rather than this project's
// stricter ParseEndpoint.
func parseAgentEndpoint(s string) agentEndpoint {
	if s == "" {
		return agentEndpoint{} // most nodes set no force-endpoint: no error to make
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return agentEndpoint{}
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil || p < 1 || p > 65535 {
		return agentEndpoint{}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return agentEndpoint{}
		}
		return agentEndpoint{ok: true, ip: a.Unmap()}
	}
	if len(validation.IsDNS1123Subdomain(host)) > 0 {
		return agentEndpoint{}
	}
	return agentEndpoint{ok: true}
}

// agentEndpointOf is the endpoint Kilo uses for a node: force-endpoint when it
// parses, else endpoint.
func agentEndpointOf(k *kubev1alpha1.KiloAnnotations) agentEndpoint {
	if e := parseAgentEndpoint(k.ForceEndpoint); e.ok {
		return e
	}
	return parseAgentEndpoint(k.Endpoint)
}

// isPublic is Kilo's test of a public endpoint address (pkg/mesh ip.go),
// quirks included: every IPv4 address outside RFC 1918 counts as public
// (loopback and CGNAT too), and of IPv6 only fd00::/16 is private.
func isPublic(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	if a.Is4() {
		b := a.As4()
		switch {
		case b[0] == 10, b[0] == 172 && b[1]&0xf0 == 0x10, b[0] == 192 && b[1] == 168:
			return false
		}
		return true
	}
	b := a.As16()
	return b[0] != 0xfd || b[1] != 0x00
}

// parseKiloCIDR reads an address written as a CIDR the way Kilo's
// normalizeIP does: only the <ip>/<prefix> form counts, and the address
// keeps its host bits. ok is false for anything else.
func parseKiloCIDR(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96), true
	}
	return p, true
}

// ForceInternalIPNone is how an inventory publishes a
// kilo.squat.ai/force-internal-ip that says the node has no internal IP.
const ForceInternalIPNone = "-"

// kiloInternalIP is the internal address Kilo uses for a node (pkg/k8s
// translateNode): force-internal-ip when it parses, else internal-ip; and
// none at all when force-internal-ip says so. ok is false when the node has
// none, which in Location granularity makes it a segment of its own.
func kiloInternalIP(k *kubev1alpha1.KiloAnnotations) (netip.Addr, bool) {
	if k.ForceInternalIP == ForceInternalIPNone {
		return netip.Addr{}, false
	}
	if p, ok := parseKiloCIDR(k.ForceInternalIP); ok {
		return p.Addr(), true
	}
	if p, ok := parseKiloCIDR(k.InternalIP); ok {
		return p.Addr(), true
	}
	return netip.Addr{}, false
}

// maxQuoted is how many bytes of a value read from a Node a message quotes.
const maxQuoted = 80

// quote quotes a value read from a Node, cut to a readable length.
func quote(s string) string {
	return strconv.Quote(safetext.Truncate(s, maxQuoted))
}
