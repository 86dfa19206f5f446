package mesh

import (
	"net/netip"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// result is what a parser returned, in a form cmp compares.
type result struct {
	Value string
	Err   bool
}

func resultOf[T interface{ String() string }](v T, err error) result {
	if err != nil {
		return result{Err: true}
	}
	return result{Value: v.String()}
}

func ok(v string) result { return result{Value: v} }

var fails = result{Err: true}

func TestParseCIDR(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   result
	}{
		"IPv4":       {reason: "A canonical IPv4 network parses.", in: "10.1.0.0/16", want: ok("10.1.0.0/16")},
		"IPv6":       {reason: "A canonical IPv6 network parses.", in: "fd00:1::/48", want: ok("fd00:1::/48")},
		"Host":       {reason: "A host route is a network.", in: "192.168.1.1/32", want: ok("192.168.1.1/32")},
		"HostBits":   {reason: "Host bits set: not canonical.", in: "10.1.0.1/16", want: fails},
		"HostBitsV6": {reason: "IPv6 host bits set: not canonical.", in: "fd00::1/64", want: fails},
		"NoPrefix":   {reason: "An address is not a network.", in: "10.1.0.0", want: fails},
		"BadPrefix":  {reason: "A prefix longer than the address is invalid.", in: "10.1.0.0/33", want: fails},
		"Zone":       {reason: "A zone is not routable.", in: "fe80::%eth0/64", want: fails},
		"Empty":      {reason: "Empty is not a network.", in: "", want: fails},
		"Spaces":     {reason: "Surrounding spaces are not accepted.", in: " 10.1.0.0/16", want: fails},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resultOf(ParseCIDR(tc.in))); diff != "" {
				t.Errorf("\n%s\nParseCIDR(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestParseNodeCIDR(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   result
	}{
		"Canonical": {reason: "A canonical network parses.", in: "10.1.1.0/24", want: ok("10.1.1.0/24")},
		"HostBits":  {reason: "Host bits are masked, as Kubernetes does.", in: "10.1.1.7/24", want: ok("10.1.1.0/24")},
		"IPv6":      {reason: "IPv6 parses.", in: "fd00:1:0:1::/64", want: ok("fd00:1:0:1::/64")},
		"Zone":      {reason: "A zone is rejected.", in: "fe80::%eth0/64", want: fails},
		"NoPrefix":  {reason: "An address is not a network.", in: "10.1.1.0", want: fails},
		"Empty":     {reason: "Empty is rejected.", in: "", want: fails},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resultOf(ParseNodeCIDR(tc.in))); diff != "" {
				t.Errorf("\n%s\nParseNodeCIDR(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestParseWireguardIP(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   result
	}{
		"KiloSubnet": {reason: "Kilo writes the address with its --subnet prefix.", in: "10.4.0.1/16", want: ok("10.4.0.1")},
		"Host":       {reason: "Some forks write /32.", in: "10.4.0.1/32", want: ok("10.4.0.1")},
		"IPv6":       {reason: "IPv6 parses.", in: "fd04::1/64", want: ok("fd04::1")},
		"NoPrefix":   {reason: "A bare address is not <ip>/<prefix>.", in: "10.4.0.1", want: fails},
		"BadPrefix":  {reason: "A prefix longer than the address is invalid.", in: "10.4.0.1/33", want: fails},
		"Zone":       {reason: "A zone is rejected.", in: "fe80::1%kilo0/64", want: fails},
		"Empty":      {reason: "Empty is rejected.", in: "", want: fails},
		"OnlySlash":  {reason: "A slash alone is rejected.", in: "/", want: fails},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resultOf(ParseWireguardIP(tc.in))); diff != "" {
				t.Errorf("\n%s\nParseWireguardIP(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestParseHostIP(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   result
	}{
		"Bare":     {reason: "A bare address parses (status.addresses).", in: "192.168.1.11", want: ok("192.168.1.11")},
		"CIDR":     {reason: "The host part of a CIDR (kilo.squat.ai/internal-ip).", in: "192.168.1.11/24", want: ok("192.168.1.11")},
		"IPv6":     {reason: "IPv6 parses.", in: "fd02::11", want: ok("fd02::11")},
		"Mapped":   {reason: "An IPv4-mapped IPv6 address is its IPv4 address.", in: "::ffff:192.168.1.11", want: ok("192.168.1.11")},
		"Zone":     {reason: "A zone is rejected.", in: "fe80::1%eth0", want: fails},
		"Garbage":  {reason: "Not an address.", in: "node-1", want: fails},
		"BadCIDR":  {reason: "A malformed CIDR is rejected.", in: "192.168.1.11/40", want: fails},
		"Empty":    {reason: "Empty is rejected.", in: "", want: fails},
		"Trailing": {reason: "Trailing text is rejected.", in: "192.168.1.11 ", want: fails},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resultOf(ParseHostIP(tc.in))); diff != "" {
				t.Errorf("\n%s\nParseHostIP(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	type want struct {
		ep  Endpoint
		err bool
	}
	ip := func(s string, port uint16) want { return want{ep: Endpoint{IP: netip.MustParseAddr(s), Port: port}} }
	dns := func(s string, port uint16) want { return want{ep: Endpoint{DNS: s, Port: port}} }
	bad := want{err: true}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"IPv4":               {reason: "host:port with an IPv4 host.", in: "203.0.113.1:51820", want: ip("203.0.113.1", 51820)},
		"IPv6":               {reason: "An IPv6 host in brackets.", in: "[2001:db8::1]:51820", want: ip("2001:db8::1", 51820)},
		"Mapped":             {reason: "An IPv4-mapped host is its IPv4 address.", in: "[::ffff:203.0.113.1]:51820", want: ip("203.0.113.1", 51820)},
		"DNS":                {reason: "An RFC 1123 name goes to DNS.", in: "vpn.example.com:4000", want: dns("vpn.example.com", 4000)},
		"DNSSingleLabel":     {reason: "A single-label name is a DNS name.", in: "gateway:1", want: dns("gateway", 1)},
		"MaxPort":            {reason: "Port 65535 is valid.", in: "203.0.113.1:65535", want: ip("203.0.113.1", 65535)},
		"PortZero":           {reason: "Port 0 is not a port.", in: "203.0.113.1:0", want: bad},
		"PortTooLarge":       {reason: "Port 65536 is out of range.", in: "203.0.113.1:65536", want: bad},
		"PortNegative":       {reason: "A negative port is rejected.", in: "203.0.113.1:-1", want: bad},
		"PortSign":           {reason: "A signed port is rejected.", in: "203.0.113.1:+1", want: bad},
		"PortHex":            {reason: "A hex port is rejected.", in: "203.0.113.1:0x10", want: bad},
		"NoPort":             {reason: "A host alone is rejected.", in: "203.0.113.1", want: bad},
		"EmptyPort":          {reason: "An empty port is rejected.", in: "203.0.113.1:", want: bad},
		"IPv6NoBrackets":     {reason: "An IPv6 host without brackets is rejected.", in: "2001:db8::1:51820", want: bad},
		"IPv6NoPort":         {reason: "A bracketed IPv6 host without a port is rejected.", in: "[2001:db8::1]", want: bad},
		"Zone":               {reason: "A host with a zone is rejected.", in: "[fe80::1%eth0]:51820", want: bad},
		"EmptyHost":          {reason: "An empty host is rejected.", in: ":51820", want: bad},
		"Underscore":         {reason: "An underscore is not RFC 1123.", in: "my_host:51820", want: bad},
		"Scheme":             {reason: "A URL is not host:port.", in: "udp://vpn.example.com:51820", want: bad},
		"Empty":              {reason: "Empty is rejected.", in: "", want: bad},
		"SpaceInHost":        {reason: "A space is not part of a host.", in: "vpn example:51820", want: bad},
		"LeadingZerosPort":   {reason: "More than five digits are not a port.", in: "203.0.113.1:051820", want: bad},
		"LeadingZeroPort5":   {reason: "Five digits with a leading zero are a decimal port.", in: "203.0.113.1:05182", want: ip("203.0.113.1", 5182)},
		"DNSLabelEndsDash":   {reason: "A DNS label ending with a dash is rejected.", in: "vpn-.example.com:1", want: bad},
		"DNSLabelStartDash":  {reason: "A DNS label starting with a dash is rejected.", in: "-vpn.example.com:1", want: bad},
		"Localhost":          {reason: "localhost resolves to the dialling node itself (RFC 6761).", in: "localhost:10250", want: bad},
		"LocalhostUpper":     {reason: "Names are case-insensitive: LOCALHOST. is localhost.", in: "LOCALHOST.:10250", want: bad},
		"UnderLocalhost":     {reason: "Every name under .localhost is loopback too.", in: "api.localhost:443", want: bad},
		"LocalhostLookAlike": {reason: "A name that only starts with localhost is an ordinary name.", in: "localhost.example.com:1", want: dns("localhost.example.com", 1)},
		"ShortDotted":        {reason: "127.1 is 127.0.0.1 to inet_aton: an address written as a name.", in: "127.1:51820", want: bad},
		"DecimalAddress":     {reason: "2130706433 is 127.0.0.1 to inet_aton.", in: "2130706433:51820", want: bad},
		"HexAddress":         {reason: "0x7f000001 is 127.0.0.1 to inet_aton.", in: "0x7f000001:51820", want: bad},
		"OctalParts":         {reason: "0177.0.0.01 is 127.0.0.1 to inet_aton (octal parts).", in: "0177.0.0.01:51820", want: bad},
		"NumericTLD":         {reason: "No top-level domain is numeric: vpn.123 is not a host name.", in: "vpn.123:1", want: bad},
		"DigitsInLabels":     {reason: "Digits inside a name with a real TLD are fine.", in: "1.2.3.example.com:1", want: dns("1.2.3.example.com", 1)},
		"HexWordName":        {reason: "A label that merely reads as hex (cafe) is a name: inet_aton needs 0x.", in: "cafe.example:1", want: dns("cafe.example", 1)},
		"ThisNetwork":        {reason: "0.0.0.0/8 is this network: the sender reads it as itself.", in: "0.1.2.3:51820", want: bad},
		"Broadcast":          {reason: "The limited broadcast address reaches no other cluster.", in: "255.255.255.255:51820", want: bad},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ep, err := ParseEndpoint(tc.in)
			got := want{ep: ep, err: err != nil}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("\n%s\nParseEndpoint(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestParsePort(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   int // -1 for an error
	}{
		"One":      {reason: "1 is the least port.", in: "1", want: 1},
		"Max":      {reason: "65535 is the largest port.", in: "65535", want: 65535},
		"Zero":     {reason: "0 is not a port.", in: "0", want: -1},
		"TooLarge": {reason: "65536 is out of range.", in: "65536", want: -1},
		"Huge":     {reason: "A huge number is out of range, not wrapped.", in: "4294967297", want: -1},
		"Sign":     {reason: "Signs are rejected.", in: "+80", want: -1},
		"Space":    {reason: "Spaces are rejected.", in: " 80", want: -1},
		"Empty":    {reason: "Empty is rejected.", in: "", want: -1},
		"Letters":  {reason: "Letters are rejected.", in: "http", want: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ParsePort(tc.in)
			got := int(p)
			if err != nil {
				got = -1
			}
			if got != tc.want {
				t.Errorf("\n%s\nParsePort(%q): want %d, got %d (%v)", tc.reason, tc.in, tc.want, got, err)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string // canonical encoding of the key; "" for an error
	}{
		"Canonical":     {reason: "Standard base64 of 32 bytes.", in: testKey(7), want: testKey(7)},
		"OtherSpelling": {reason: "The unused low bits may be set: it is the same key.", in: otherSpelling(testKey(7)), want: testKey(7)},
		"NoPadding":     {reason: "Padding is required.", in: testKey(7)[:43], want: ""},
		"URLAlphabet":   {reason: "URL-safe characters are not standard base64.", in: "-" + testKey(7)[1:], want: ""},
		"TooLong":       {reason: "48 characters are 36 bytes.", in: testKey(7)[:43] + "AAAA=", want: ""},
		"Newline":       {reason: "A line break is not part of a key.", in: testKey(7)[:22] + "\n" + testKey(7)[23:], want: ""},
		"Empty":         {reason: "Empty is no key.", in: "", want: ""},
		"DoublePad":     {reason: "Two padding characters mean 31 bytes.", in: testKey(7)[:42] + "==", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			got := ""
			if err == nil {
				got = kilov1alpha1.EncodeKey(k)
			}
			if got != tc.want {
				t.Errorf("\n%s\nParseKey(%q): want %q, got %q (%v)", tc.reason, tc.in, tc.want, got, err)
			}
		})
	}
}

func TestParseKeepalive(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   int // -1 for an error
	}{
		"Zero":     {reason: "0 disables keepalives.", in: "0", want: 0},
		"Typical":  {reason: "Whole seconds.", in: "25", want: 25},
		"Max":      {reason: "65535 is the largest.", in: "65535", want: 65535},
		"TooLarge": {reason: "65536 is too large.", in: "65536", want: -1},
		"Duration": {reason: "A Go duration is not whole seconds.", in: "25s", want: -1},
		"Negative": {reason: "Negative is rejected.", in: "-1", want: -1},
		"Empty":    {reason: "Empty is rejected.", in: "", want: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseKeepalive(tc.in)
			if err != nil {
				got = -1
			}
			if got != tc.want {
				t.Errorf("\n%s\nParseKeepalive(%q): want %d, got %d (%v)", tc.reason, tc.in, tc.want, got, err)
			}
		})
	}
}

func TestParseDiscoveredEndpoints(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	type want struct {
		endpoints map[string]string // canonical key -> host:port
		err       bool
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"Kilo": {
			reason: "Kilo's JSON form of net.UDPAddr by key.",
			in:     `{"` + k1 + `":{"IP":"192.0.2.7","Port":40000,"Zone":""},"` + k2 + `":{"IP":"2001:db8::7","Port":51820,"Zone":""}}`,
			want:   want{endpoints: map[string]string{k1: "192.0.2.7:40000", k2: "[2001:db8::7]:51820"}},
		},
		"Empty": {
			reason: "An empty object has no entries.",
			in:     `{}`,
			want:   want{endpoints: map[string]string{}},
		},
		"Dropped": {
			reason: "Entries that cannot be dialled from elsewhere are dropped: loopback, link-local, unspecified, multicast, zone, port 0 or too large, bad key, null.",
			in: `{"` + testKey(3) + `":{"IP":"127.0.0.1","Port":1},` +
				`"` + testKey(4) + `":{"IP":"169.254.0.1","Port":1},` +
				`"` + testKey(5) + `":{"IP":"fe80::1","Port":1},` +
				`"` + testKey(6) + `":{"IP":"0.0.0.0","Port":1},` +
				`"` + testKey(7) + `":{"IP":"224.0.0.1","Port":1},` +
				`"` + testKey(8) + `":{"IP":"fe80::1","Port":1,"Zone":"eth0"},` +
				`"` + testKey(9) + `":{"IP":"192.0.2.9","Port":0},` +
				`"` + testKey(10) + `":{"IP":"192.0.2.9","Port":65536},` +
				`"` + testKey(11) + `":null,` +
				`"` + testKey(12) + `":{"IP":"::1","Port":1},` +
				`"` + testKey(13) + `":{"IP":"not-an-ip","Port":1},` +
				`"short":{"IP":"192.0.2.9","Port":1}}`,
			want: want{endpoints: map[string]string{}},
		},
		"MappedAddress": {
			reason: "An IPv4-mapped address is its IPv4 address.",
			in:     `{"` + k1 + `":{"IP":"::ffff:192.0.2.7","Port":40000}}`,
			want:   want{endpoints: map[string]string{k1: "192.0.2.7:40000"}},
		},
		"OtherSpelling": {
			reason: "Keys are decoded: another spelling of a key is that key.",
			in:     `{"` + otherSpelling(k1) + `":{"IP":"192.0.2.7","Port":40000}}`,
			want:   want{endpoints: map[string]string{k1: "192.0.2.7:40000"}},
		},
		"NotJSON": {
			reason: "Malformed JSON is an error.",
			in:     `{"`,
			want:   want{err: true},
		},
		"NotAnObject": {
			reason: "A JSON array is an error.",
			in:     `[]`,
			want:   want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := ParseDiscoveredEndpoints(tc.in)
			got := want{err: err != nil}
			if err == nil {
				got.endpoints = map[string]string{}
				for k, e := range m {
					got.endpoints[kilov1alpha1.EncodeKey(k)] = netip.AddrPortFrom(e.IP, e.Port).String()
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nParseDiscoveredEndpoints(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		n      int
		want   string
	}{
		"Short":         {reason: "A string within the limit is kept.", in: "10.4.0.1/16", n: 20, want: "10.4.0.1/16"},
		"Cut":           {reason: "A long string is cut and marked.", in: "abcdefghij", n: 8, want: "abcde..."},
		"RuneBoundary":  {reason: "A cut never splits a character: é is two bytes.", in: "abcdéfgh", n: 8, want: "abcd..."},
		"InvalidUTF8":   {reason: "Invalid UTF-8 is replaced, so status and results can be marshalled.", in: "ab\xffcd", n: 20, want: "ab\uFFFDcd"},
		"TinyLimit":     {reason: "A limit below the marker still yields valid text.", in: "ééé", n: 2, want: "..."},
		"FourByteRunes": {reason: "Emoji are four bytes: the cut lands before one.", in: "🙂🙂🙂", n: 9, want: "🙂..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := safetext.Truncate(tc.in, tc.n)
			if got != tc.want {
				t.Errorf("\n%s\nTruncate(%q, %d): want %q, got %q", tc.reason, tc.in, tc.n, tc.want, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("\n%s\nTruncate(%q, %d) = %q is not valid UTF-8", tc.reason, tc.in, tc.n, got)
			}
		})
	}
}
