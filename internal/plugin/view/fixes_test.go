package view

import (
	"testing"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// TestFixesFollowReasons keeps diagnose's fixes in step with the planner's
// reasons: each skip reason and each warning has its fix, and no fix is
// kept for a reason that is gone.
func TestFixesFollowReasons(t *testing.T) {
	// NodeNotReady's fix depends on what Kilo misses (fixNoEndpoint,
	// fixHeartbeat); MoreWarnings only counts the warnings left out.
	byCase := map[string]bool{mesh.ReasonNodeNotReady: true, mesh.ReasonMoreWarnings: true}
	for _, c := range []struct {
		what    string
		reasons []string
		fixes   map[string]string
	}{
		{"skip reason", mesh.SkipReasons(), skipFixes},
		{"warning", mesh.WarningReasons(), routeFixes},
	} {
		known := map[string]bool{}
		for _, r := range c.reasons {
			known[r] = true
			if _, ok := c.fixes[r]; !ok && !byCase[r] {
				t.Errorf("diagnose says how to fix every %s: %s has no fix", c.what, r)
			}
		}
		for r := range c.fixes {
			if !known[r] {
				t.Errorf("diagnose keeps a fix for %s, which is no %s of the planner", r, c.what)
			}
		}
	}
}
