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

// Package wait is the one polling loop of the tests: a wait for a state
// that a test, a harness or a test tool cannot be told of, only look for.
// Poll returns an error, for a goroutine, a tool or a wait whose failure
// is not fatal; Eventually fails the test. A new wait uses one of the two
// rather than a loop of its own.
//
// Timeouts bound a wait for a hung component; they are no performance
// assertion.
package wait

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Poll calls check until it reports done, interval apart, and returns nil
// then. It returns an error naming what it waited for, the timeout and
// check's last error (wrapped) once timeout has passed since the call
// without done, or at once when ctx ends (wrapping ctx's error too).
// check runs at once, and once more after the last interval: a state
// reached just before the deadline counts. check's error is the state it
// saw, for the message; it does not stop the wait. An empty what leaves
// the naming to a caller that wraps the error.
func Poll(ctx context.Context, what string, timeout, interval time.Duration, check func() (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, last := check()
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return stopped(what, timeout, err, last)
		}
		if time.Now().After(deadline) {
			return expired(what, timeout, last)
		}
		tick := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			tick.Stop()
			return stopped(what, timeout, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Eventually is Poll that fails the test with Poll's error. check may fail
// the test itself (t.Fatal), on an error a retry cannot mend.
func Eventually(ctx context.Context, t testing.TB, what string, timeout, interval time.Duration, check func() (done bool, err error)) {
	t.Helper()
	if err := Poll(ctx, what, timeout, interval, check); err != nil {
		t.Fatalf("%v", err)
	}
}

func expired(what string, timeout time.Duration, last error) error {
	if last == nil {
		return fmt.Errorf("%snot within %s", named(what), timeout)
	}
	return fmt.Errorf("%snot within %s; last: %w", named(what), timeout, last)
}

func stopped(what string, timeout time.Duration, err, last error) error {
	if last == nil {
		return fmt.Errorf("%sstopped before %s: %w", named(what), timeout, err)
	}
	return fmt.Errorf("%sstopped before %s: %w; last: %w", named(what), timeout, err, last)
}

func named(what string) string {
	if what == "" {
		return ""
	}
	return what + ": "
}
