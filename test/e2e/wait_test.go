//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// waitFor retries check until it returns nil, for convergeTimeout, a
// second apart.
func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	wait.Eventually(ctx, t, "waiting for "+what, convergeTimeout, time.Second, func() (bool, error) {
		err := check()
		return err == nil, err
	})
}
