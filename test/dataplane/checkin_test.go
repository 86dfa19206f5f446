package dataplane

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// TestCheckInPatch checks what the stand-in writes at a check-in: the
// heartbeat, and on a periodic check-in what its agent learned from
// handshakes, in Kilo's form ("{}" before any handshake), which both the
// planner and the stand-in itself read back.
func TestCheckInPatch(t *testing.T) {
	h := &Harness{cfg: Config{Discovered: true}, discovered: map[string]string{}}
	now := time.Unix(1700000000, 0)
	annotations := func(b []byte) map[string]string {
		t.Helper()
		var p struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		return p.Metadata.Annotations
	}

	a := annotations(h.checkInPatch("c", "n", now, true))
	if len(a) != 1 || a[kilov1alpha1.AnnotationLastSeen] != "1700000000" {
		t.Errorf("a node whose agent never applied: want only the heartbeat, got %v", a)
	}
	h.learned("c", "n", map[string]netip.AddrPort{})
	if got := annotations(h.checkInPatch("c", "n", now, true))[kilov1alpha1.AnnotationDiscoveredEndpoints]; got != "{}" {
		t.Errorf("before any handshake: want {}, got %q", got)
	}
	keyA, keyB := Key{1}.String(), Key{2}.String()
	learned := map[string]netip.AddrPort{
		keyA: netip.MustParseAddrPort("192.0.2.1:51820"),
		keyB: netip.MustParseAddrPort("[2001:db8::2]:40000"),
	}
	h.learned("c", "n", learned)
	a = annotations(h.checkInPatch("c", "n", now, true))
	want := `{"` + keyA + `":{"IP":"192.0.2.1","Port":51820,"Zone":""},"` + keyB + `":{"IP":"2001:db8::2","Port":40000,"Zone":""}}`
	if keyB < keyA {
		want = `{"` + keyB + `":{"IP":"2001:db8::2","Port":40000,"Zone":""},"` + keyA + `":{"IP":"192.0.2.1","Port":51820,"Zone":""}}`
	}
	if got := a[kilov1alpha1.AnnotationDiscoveredEndpoints]; got != want {
		t.Errorf("Kilo's form of what was learned: want %s, got %s", want, got)
	}
	d, err := mesh.ParseDiscoveredEndpoints(a[kilov1alpha1.AnnotationDiscoveredEndpoints])
	if err != nil || len(d) != 2 {
		t.Errorf("the planner reads %d entries, err %v; want 2", len(d), err)
	}
	if back := parseDiscovered(a[kilov1alpha1.AnnotationDiscoveredEndpoints]); len(back) != 2 || back[keyA] != learned[keyA] || back[keyB] != learned[keyB] {
		t.Errorf("the stand-in reads back %v, want %v", back, learned)
	}
	if a := annotations(h.checkInPatch("c", "n", now, false)); len(a) != 1 {
		t.Errorf("a check-in for a stale heartbeat writes only the heartbeat, as Kilo's handleLocal keeps the Node's discovered endpoints; got %v", a)
	}
	h.forget("c", "n")
	if a := annotations(h.checkInPatch("c", "n", now, true)); len(a) != 1 {
		t.Errorf("a removed node's learned endpoints are forgotten; got %v", a)
	}
}
