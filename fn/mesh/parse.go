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
// 1-65535.
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
		return Endpoint{IP: a.Unmap(), Port: p}, nil
	}
	// DNS names are case-insensitive and may be written fully qualified;
	// Kilo wants the lower-case subdomain form.
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !isDNSName(host) {
		return Endpoint{}, errHost
	}
	return Endpoint{DNS: host, Port: p}, nil
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
		if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		if _, dup := out[k]; !dup {
			out[k] = Endpoint{IP: a, Port: uint16(d.Port)}
		}
	}
	return out, nil
}
