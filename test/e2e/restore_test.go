//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// restoreWait bounds the wait for a Peer broken by hand to be restored. In
// Objects delivery provider-kubernetes sees a member's Peers again only on
// its poll (10 minutes by default): the run reports what it saw within the
// bound, then touches the Peer's Object, which makes provider-kubernetes
// look at once, as a user can.
func restoreWait(mode string) time.Duration {
	if mode == "Objects" {
		return envDuration("E2E_RESTORE_OBJECTS", 30*time.Second)
	}
	return convergeTimeout
}

// testRestore edits a kilomesh Peer in a member by hand (its allowedIPs
// replaced), then deletes one, and times until the Peer is as the mesh
// wants it again, from the recorder's watch events of the member.
func testRestore(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	waitConverged(ctx, t, ref, convergeTimeout)
	target := "cluster-b"
	reps := envInt("E2E_RESTORE_REPS", 3)
	if mode == "Objects" {
		reps = 1
	}
	var edited, deleted []string
	for i := range reps {
		name := peerName(ref, "cluster-a", "node-a1")
		if i%2 == 1 {
			name = peerName(ref, "cluster-c", "node-c1")
		}
		edited = append(edited, restored(ctx, t, mode, ref, target, name, "edited", func(p *kilov1alpha1.Peer) error {
			p.Spec.AllowedIPs = []string{"10.99.0.0/24"}
			return kube[target].Update(ctx, p)
		}))
		deleted = append(deleted, restored(ctx, t, mode, ref, target, name, "deleted", func(p *kilov1alpha1.Peer) error {
			return kube[target].Delete(ctx, p)
		}))
	}
	report.notef("%s: a kilomesh Peer in %s restored after it was edited by hand (allowedIPs replaced): %s; after it was deleted by hand: %s (goal <= 5 s in the default delivery)",
		mode, target, strings.Join(edited, ", "), strings.Join(deleted, ", "))
}

// restored breaks Peer name of target with do and returns how long it took
// until the member held it as before. Past the bound of Objects delivery,
// it touches the Peer's Object and says how long after that it took.
func restored(ctx context.Context, t *testing.T, mode string, ref meshRef, target, name, how string, do func(*kilov1alpha1.Peer) error) string {
	t.Helper()
	p := &kilov1alpha1.Peer{}
	if err := kube[target].Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	want := p.DeepCopy()
	// The Peer is back once it was seen broken, then as before.
	broken := false
	w, err := rec.expect(target, func(ps map[string]*kilov1alpha1.Peer) bool {
		q := ps[name]
		same := q != nil && equality.Semantic.DeepEqual(q.Spec, want.Spec)
		if !broken {
			broken = !same
			return false
		}
		return same
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := do(p); err != nil {
		t.Fatalf("cannot break Peer %s of %s by hand: %v", name, target, err)
	}
	bound := restoreWait(mode)
	wctx, cancel := context.WithTimeout(ctx, bound)
	at, err := w.wait(wctx)
	cancel()
	if err == nil {
		return fmt.Sprintf("%.2fs", at.Sub(t0).Seconds())
	}
	if mode != "Objects" {
		t.Fatalf("Peer %s of %s, %s by hand, was not restored within %s", name, target, how, bound)
	}
	mr := delivering(ctx, t, ref, mode, target, name)
	touch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.kilomesh.io/touched":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	t1 := time.Now()
	if err := mgmt.Patch(ctx, mr, client.RawPatch(types.MergePatchType, []byte(touch))); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, convergeTimeout)
	at, err = w.wait(wctx)
	cancel()
	if err != nil {
		t.Fatalf("Peer %s of %s, %s by hand, was not restored within %s after its Object was touched", name, target, how, convergeTimeout)
	}
	return fmt.Sprintf("not within %s, %.2fs after its Object was touched", bound, at.Sub(t1).Seconds())
}
