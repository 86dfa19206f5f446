//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// eventually calls check until it reports done, interval apart, and fails
// the test once timeout has passed since the call (or ctx has ended)
// without it, with what it waited for, the timeout and check's last error.
// check runs at once, and once more after the last interval: a state
// reached just before the deadline counts. check may fail the test itself
// (t.Fatal), on an error a retry cannot mend. Timeouts bound a wait for a
// hung component; they are no performance assertion.
func eventually(ctx context.Context, t testing.TB, what string, timeout, interval time.Duration, check func() (done bool, err error)) {
	t.Helper()
	if err := poll(ctx, timeout, interval, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// poll is eventually's loop, for a goroutine, which cannot fail the test:
// nil once check reports done, or an error that says the timeout and
// wraps check's last error.
func poll(ctx context.Context, timeout, interval time.Duration, check func() (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("not within %s; last: %w", timeout, err)
			}
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// waitFor retries check until it returns nil, for convergeTimeout, a
// second apart.
func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	eventually(ctx, t, "waiting for "+what, convergeTimeout, time.Second, func() (bool, error) {
		err := check()
		return err == nil, err
	})
}
