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

// Package prefixes answers which of many IP prefixes overlap a given one,
// as Kilo reads them. It imports nothing of kilomesh, so that the function
// and the provider may both use it.
package prefixes

import (
	"net/netip"
	"slices"
	"strings"
)

// ParseKilo parses an allowed IP as Kilo's agent does: a CIDR, the
// address masked to its prefix; an IPv4 address written as IPv6 (with a
// length of 96 or more) is the IPv4 prefix. ok is false for anything Kilo
// skips.
func ParseKilo(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// An Index holds prefixes and finds those that overlap a given one. Two
// prefixes overlap exactly when one contains the other (or they are
// equal), so the prefixes overlapping p are those that contain p, found by
// looking up p masked to each length up to its own, and those inside p,
// a run of the prefixes sorted by address. A question costs
// O(address bits + log n + answers) instead of O(n).
type Index struct {
	byPrefix map[netip.Prefix][]int
	sorted   []entry
}

type entry struct {
	p netip.Prefix
	i int
}

// NewIndex indexes ps; the answers are positions in ps. Every prefix is
// masked first.
func NewIndex(ps []netip.Prefix) *Index {
	x := &Index{byPrefix: make(map[netip.Prefix][]int, len(ps)), sorted: make([]entry, len(ps))}
	for i, p := range ps {
		p = p.Masked()
		x.byPrefix[p] = append(x.byPrefix[p], i)
		x.sorted[i] = entry{p: p, i: i}
	}
	slices.SortFunc(x.sorted, func(a, b entry) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return a.p.Bits() - b.p.Bits()
	})
	return x
}

// Len returns how many prefixes the index holds.
func (x *Index) Len() int { return len(x.sorted) }

// Overlapping returns, in increasing order, the positions of the prefixes
// that overlap p: equal to it, containing it or inside it.
func (x *Index) Overlapping(p netip.Prefix) []int {
	if !p.IsValid() || len(x.sorted) == 0 {
		return nil
	}
	p = p.Masked()
	var out []int
	for bits := p.Bits(); bits >= 0; bits-- {
		q, err := p.Addr().Prefix(bits)
		if err == nil {
			out = append(out, x.byPrefix[q]...)
		}
	}
	// The prefixes strictly inside p start after p itself in address
	// order, and are the run whose addresses p contains.
	start, _ := slices.BinarySearchFunc(x.sorted, p, func(e entry, t netip.Prefix) int {
		if c := e.p.Addr().Compare(t.Addr()); c != 0 {
			return c
		}
		if e.p.Bits() <= t.Bits() {
			return -1
		}
		return 1
	})
	for _, e := range x.sorted[start:] {
		if !p.Contains(e.p.Addr()) {
			break
		}
		out = append(out, e.i)
	}
	slices.Sort(out)
	return out
}
