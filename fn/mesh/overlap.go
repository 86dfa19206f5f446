package mesh

import (
	"net/netip"
	"sort"
)

// A prefixIndex finds the prefixes of a list that overlap a given one. Two
// CIDRs overlap exactly when one contains the other, so the overlaps of p
// are the prefixes that contain it (found by masking p to every shorter
// length) and those inside it (a range of the list sorted by address). It
// answers in O(address bits + log n + answers), where comparing every pair
// would cost O(n) per question and O(n^2) for a whole spec.
type prefixIndex struct {
	exact  map[netip.Prefix][]int
	sorted []indexed
	// lengths are the prefix lengths the list holds: masking to any other
	// finds nothing.
	lengths [129]bool
}

type indexed struct {
	p netip.Prefix
	i int
}

func newPrefixIndex(ps []netip.Prefix) *prefixIndex {
	x := &prefixIndex{exact: make(map[netip.Prefix][]int, len(ps)), sorted: make([]indexed, 0, len(ps))}
	for i, p := range ps {
		p = p.Masked()
		x.exact[p] = append(x.exact[p], i)
		x.sorted = append(x.sorted, indexed{p: p, i: i})
		if p.IsValid() {
			x.lengths[p.Bits()] = true
		}
	}
	sort.Slice(x.sorted, func(a, b int) bool { return less(x.sorted[a].p, x.sorted[b].p) })
	return x
}

// less orders prefixes by address, then the larger first.
func less(a, b netip.Prefix) bool {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c < 0
	}
	return a.Bits() < b.Bits()
}

// inside is the range of x.sorted holding the prefixes strictly inside p,
// found by two binary searches: the prefixes inside p are those after p
// whose address is at most p's last address.
func (x *prefixIndex) inside(p netip.Prefix) (int, int) {
	lo := sort.Search(len(x.sorted), func(k int) bool {
		q := x.sorted[k].p
		return q.Addr().Compare(p.Addr()) > 0 || (q.Addr() == p.Addr() && q.Bits() > p.Bits())
	})
	last := lastAddr(p)
	hi := lo + sort.Search(len(x.sorted)-lo, func(k int) bool {
		q := x.sorted[lo+k].p
		return q.Addr().BitLen() != last.BitLen() || q.Addr().Compare(last) > 0
	})
	return lo, hi
}

// lastAddr is the last address of a masked prefix: its host bits all set.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As16()
	off := 0
	if p.Addr().Is4() {
		off = 96
	}
	for i := off + p.Bits(); i < 128; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// containing calls f with the indices of the prefixes equal to p or
// containing it.
func (x *prefixIndex) containing(p netip.Prefix, f func(int)) {
	for b := 0; b <= p.Bits(); b++ {
		if !x.lengths[b] {
			continue
		}
		q, err := p.Addr().Prefix(b)
		if err != nil {
			continue
		}
		for _, i := range x.exact[q] {
			f(i)
		}
	}
}

// overlapping lists, in increasing order, the indices of the prefixes that
// overlap p.
func (x *prefixIndex) overlapping(p netip.Prefix) []int {
	p = p.Masked()
	var out []int
	x.containing(p, func(i int) { out = append(out, i) })
	lo, hi := x.inside(p)
	for _, e := range x.sorted[lo:hi] {
		out = append(out, e.i)
	}
	sort.Ints(out)
	return out
}

// count is how many prefixes overlap p, in O(address bits + log n) however
// many prefixes are equal: the equal and the containing ones are counted by
// length, never one by one.
func (x *prefixIndex) count(p netip.Prefix) int {
	p = p.Masked()
	n := 0
	for b := 0; b <= p.Bits(); b++ {
		if !x.lengths[b] {
			continue
		}
		if q, err := p.Addr().Prefix(b); err == nil {
			n += len(x.exact[q])
		}
	}
	lo, hi := x.inside(p)
	return n + hi - lo
}

// countPairs is how many pairs of the indexed prefixes overlap.
func (x *prefixIndex) countPairs() int {
	n := 0
	for _, e := range x.sorted {
		n += x.count(e.p) - 1 // every prefix overlaps itself
	}
	return n / 2
}
