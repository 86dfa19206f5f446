/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package prefixes

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseKilo(t *testing.T) {
	type want struct {
		p  netip.Prefix
		ok bool
	}
	cases := map[string]struct {
		reason string
		in     string
		want   want
	}{
		"CIDR":         {reason: "A CIDR is masked.", in: "10.1.2.3/16", want: want{p: netip.MustParsePrefix("10.1.0.0/16"), ok: true}},
		"IPv6":         {reason: "An IPv6 CIDR is masked.", in: "fd00::1/64", want: want{p: netip.MustParsePrefix("fd00::/64"), ok: true}},
		"Mapped":       {reason: "An IPv4 prefix written as IPv6 is the IPv4 prefix, as Kilo reads it.", in: "::ffff:10.0.0.0/104", want: want{p: netip.MustParsePrefix("10.0.0.0/8"), ok: true}},
		"Address":      {reason: "An address without a length routes nothing in Kilo.", in: "10.0.0.1"},
		"NotAPrefix":   {reason: "Anything else routes nothing.", in: "banana/8"},
		"LengthTooBig": {reason: "A length beyond the family's routes nothing.", in: "10.0.0.0/33"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, ok := ParseKilo(tc.in)
			if diff := cmp.Diff(tc.want, want{p: p, ok: ok}, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("\n%s\nParseKilo(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

func TestOverlapping(t *testing.T) {
	ps := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("10.2.0.0/16"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("0.0.0.0/0"),
	}
	x := NewIndex(ps)
	cases := map[string]struct {
		reason string
		p      netip.Prefix
		want   []int
	}{
		"EqualContainingInside": {reason: "A prefix overlaps those equal to it, those that contain it and those inside it.", p: netip.MustParsePrefix("10.1.0.0/16"), want: []int{0, 1, 2, 5, 7}},
		"HostRoute":             {reason: "A host route overlaps every prefix that contains it.", p: netip.MustParsePrefix("10.1.2.3/32"), want: []int{0, 1, 2, 5, 7}},
		"Disjoint":              {reason: "A prefix beside the others overlaps only the default route.", p: netip.MustParsePrefix("172.16.0.0/12"), want: []int{7}},
		"Wide":                  {reason: "A wide prefix overlaps everything of its family.", p: netip.MustParsePrefix("0.0.0.0/0"), want: []int{0, 1, 2, 3, 4, 5, 7}},
		"IPv6":                  {reason: "Families never overlap.", p: netip.MustParsePrefix("fd00:1::/32"), want: []int{6}},
		"Unmasked":              {reason: "A prefix is masked before it is compared.", p: netip.MustParsePrefix("10.2.3.4/16"), want: []int{0, 3, 7}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, x.Overlapping(tc.p), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nOverlapping(%s): -want, +got:\n%s", tc.reason, tc.p, diff)
			}
		})
	}
}

// TestOverlappingAgainstPairs compares the index with comparing every pair,
// on random prefixes clustered so that many overlap.
func TestOverlappingAgainstPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := func() netip.Prefix {
		if r.IntN(4) == 0 {
			var a [16]byte
			a[0], a[1] = 0xfd, byte(r.IntN(4))
			a[2] = byte(r.IntN(256))
			return netip.PrefixFrom(netip.AddrFrom16(a), 8+r.IntN(121)).Masked()
		}
		a := [4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}
		return netip.PrefixFrom(netip.AddrFrom4(a), r.IntN(33)).Masked()
	}
	ps := make([]netip.Prefix, 2000)
	for i := range ps {
		ps[i] = random()
	}
	x := NewIndex(ps)
	for range 1000 {
		p := random()
		var want []int
		for i, q := range ps {
			if p.Overlaps(q) {
				want = append(want, i)
			}
		}
		if diff := cmp.Diff(want, x.Overlapping(p), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("Overlapping(%s): -pairs, +index:\n%s", p, diff)
		}
	}
}
