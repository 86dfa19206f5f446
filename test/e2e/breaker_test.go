//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
)

// Crossplane guards every XR with a watch circuit breaker (a token bucket of
// watch events; when it runs dry, the XR's events are dropped for a cooldown
// and only a probe every 30 s passes). Its state is not visible on the XR
// until the XR is reconciled again, so the tests follow Crossplane's
// counters instead: a breaker sampler notes when a breaker last opened.
type breaker struct {
	mu       sync.Mutex
	opens    float64
	lastOpen time.Time
	cooldown time.Duration
}

var xpBreaker *breaker

// watchBreaker samples circuit_breaker_opens_total every second.
func watchBreaker(ctx context.Context) *breaker {
	b := &breaker{cooldown: breakerCooldown()}
	if v, err := metric(crossplaneMetrics(), "circuit_breaker_opens_total"); err == nil {
		b.opens = v
		if v > 0 {
			b.lastOpen = time.Now() // opened before the tests began: assume just now
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			v, err := metric(crossplaneMetrics(), "circuit_breaker_opens_total")
			if err != nil {
				continue
			}
			b.mu.Lock()
			if v > b.opens {
				b.lastOpen = time.Now()
			}
			b.opens = v
			b.mu.Unlock()
		}
	}()
	return b
}

// breakerCooldown reads --circuit-breaker-cooldown from the command line
// Crossplane was started with; Crossplane's default is 5 minutes.
func breakerCooldown() time.Duration {
	b, err := os.ReadFile(filepath.Join(env.Dir, "cmd", "crossplane"))
	if err == nil {
		if m := regexp.MustCompile(`--circuit-breaker-cooldown[= ](\S+)`).FindSubmatch(b); m != nil {
			if d, err := time.ParseDuration(string(m[1])); err == nil {
				return d
			}
		}
	}
	return 5 * time.Minute
}

func (b *breaker) last() (time.Time, float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOpen, b.opens
}

// waitBreakerClosed waits until no breaker has opened for a cooldown, then
// touches the mesh: the first event after the cooldown closes its breaker.
func waitBreakerClosed(ctx context.Context, t *testing.T, ref meshRef) {
	t.Helper()
	start := time.Now()
	wait.Eventually(ctx, t, "no watch circuit breaker to open for a cooldown", xpBreaker.cooldown+convergeTimeout, time.Second, func() (bool, error) {
		lo, _ := xpBreaker.last()
		return lo.IsZero() || time.Since(lo) > xpBreaker.cooldown+2*time.Second, fmt.Errorf("a breaker opened at %s", lo.Format(time.RFC3339))
	})
	waited := time.Since(start)
	if err := patchMesh(ctx, ref, fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{"e2e.kilomesh.io/poke":%q}}]`, time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(ctx, t, fmt.Sprintf("the watch circuit breaker of %s to close", ref), 60*time.Second, 500*time.Millisecond, func() (bool, error) {
		u, _, err := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
		if err != nil {
			return false, err
		}
		s, reason, msg := conditionOf(u, "Responsive")
		return s == "True", fmt.Errorf("Responsive=%s %s: %s", s, reason, msg)
	})
	if waited > time.Second {
		report.notef("%s: waited %.0fs for Crossplane's watch circuit breaker to close (cooldown %s)", ref, waited.Seconds(), xpBreaker.cooldown)
	}
}
