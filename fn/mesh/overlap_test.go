package mesh

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestPrefixIndexAgainstPairs compares the index with comparing every pair,
// on random lists of both families full of equal, nested and adjacent
// prefixes.
func TestPrefixIndexAgainstPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := func() netip.Prefix {
		if r.IntN(3) == 0 {
			var b [16]byte
			b[0], b[1], b[15] = 0x20, 0x01, byte(r.IntN(4))
			b[14] = byte(r.IntN(4))
			return netip.PrefixFrom(netip.AddrFrom16(b), 112+r.IntN(17)).Masked()
		}
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), byte(r.IntN(4)), byte(r.IntN(8))})
		return netip.PrefixFrom(a, 8+r.IntN(25)).Masked()
	}
	for round := range 200 {
		ps := make([]netip.Prefix, 1+r.IntN(60))
		for i := range ps {
			ps[i] = random()
		}
		idx := newPrefixIndex(ps)
		pairs := 0
		for i := range ps {
			want := 0
			for j := range ps {
				if ps[i].Overlaps(ps[j]) {
					want++
					if j > i {
						pairs++
					}
				}
			}
			q := random()
			wantQ := 0
			for j := range ps {
				if q.Overlaps(ps[j]) {
					wantQ++
				}
			}
			if got := idx.count(ps[i]); got != want {
				t.Fatalf("round %d: count(%s) = %d, want %d (list %v)", round, ps[i], got, want, ps)
			}
			if got := len(idx.overlapping(q)); got != wantQ || idx.count(q) != wantQ {
				t.Fatalf("round %d: overlapping(%s) = %d, count %d, want %d (list %v)", round, q, got, idx.count(q), wantQ, ps)
			}
		}
		if got := idx.countPairs(); got != pairs {
			t.Fatalf("round %d: countPairs() = %d, want %d", round, got, pairs)
		}
	}
}
