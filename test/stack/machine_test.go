package stack

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProcAddr(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   netip.AddrPort
		err    bool
	}{
		"Loopback": {
			reason: "An IPv4 address is one little-endian word.",
			in:     "0100007F:1F90",
			want:   netip.MustParseAddrPort("127.0.0.1:8080"),
		},
		"Any": {
			reason: "0.0.0.0 is what a socket bound to every address shows.",
			in:     "00000000:0035",
			want:   netip.MustParseAddrPort("0.0.0.0:53"),
		},
		"IPv6Loopback": {
			reason: "An IPv6 address is four little-endian words.",
			in:     "00000000000000000000000001000000:0050",
			want:   netip.MustParseAddrPort("[::1]:80"),
		},
		"IPv4MappedIPv6": {
			reason: "An IPv4 client of an IPv6 socket shows as ::ffff:a.b.c.d.",
			in:     "0000000000000000FFFF00000201000A:C350",
			want:   netip.MustParseAddrPort("[::ffff:10.0.1.2]:50000"),
		},
		"NoPort": {
			reason: "An entry without a port is refused.",
			in:     "0100007F",
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := procAddr(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nprocAddr(%q): error %v, want one: %v", tc.reason, tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("%s\nprocAddr(%q): -want +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}
