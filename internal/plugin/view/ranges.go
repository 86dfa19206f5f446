package view

import (
	"net/netip"
)

// Private address space, where free ranges are proposed: RFC 1918 for
// IPv4, unique local addresses (RFC 4193) for IPv6.
var (
	private4 = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
	private6 = []netip.Prefix{netip.MustParsePrefix("fd00::/8")}
)

// maxCandidates bounds the search for free ranges.
const maxCandidates = 1 << 16

// FreeRanges proposes up to n networks of the size of near, in private
// address space, that overlap none of used: first after near in its own
// private block, then from the start of that block, then in the other
// blocks.
func FreeRanges(near netip.Prefix, used []netip.Prefix, n int) []netip.Prefix {
	near = near.Masked()
	blocks := private4
	if near.Addr().Is6() {
		blocks = private6
	}
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	collect := func(block netip.Prefix, from netip.Addr) {
		for _, p := range freeIn(block, from, near.Bits(), used, n-len(out)) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	for _, b := range blocks {
		if b.Bits() <= near.Bits() && b.Contains(near.Addr()) {
			collect(b, near.Addr())
			collect(b, b.Addr())
		}
	}
	for _, b := range blocks {
		if len(out) < n && b.Bits() <= near.Bits() && !b.Contains(near.Addr()) {
			collect(b, b.Addr())
		}
	}
	return out
}

// freeIn lists up to n free networks of a length inside a block, from an
// address on.
func freeIn(block netip.Prefix, from netip.Addr, bits int, used []netip.Prefix, n int) []netip.Prefix {
	var out []netip.Prefix
	c, err := from.Prefix(bits)
	if err != nil || n <= 0 {
		return nil
	}
	for range maxCandidates {
		if len(out) == n || !block.Contains(c.Addr()) {
			break
		}
		next, blocked := c, false
		for _, u := range used {
			if !u.Overlaps(c) {
				continue
			}
			blocked = true
			// Jump past a used network that holds the candidate; else
			// past the candidate.
			end := c
			if u.Bits() < c.Bits() {
				end = u.Masked()
			}
			if after, ok := following(end, bits); ok && after.Addr().Compare(next.Addr()) > 0 {
				next = after
			}
		}
		if !blocked {
			out = append(out, c)
			var ok bool
			if next, ok = following(c, bits); !ok {
				break
			}
		}
		if next == c {
			break
		}
		c = next
	}
	return out
}

// following is the network of a length that starts right after p.
func following(p netip.Prefix, bits int) (netip.Prefix, bool) {
	a := lastAddr(p).Next()
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	q, err := a.Prefix(bits)
	return q, err == nil
}

// lastAddr is the last address of a network.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
