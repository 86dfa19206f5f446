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

package wait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

var errState = errors.New("not there yet")

// TestPollNever: a check that never holds ends in an error that names what
// was awaited, the timeout and the state the last check saw, and wraps
// that check's error.
func TestPollNever(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), "the widget", 20*time.Millisecond, time.Millisecond, func() (bool, error) {
		calls++
		return false, fmt.Errorf("state %d: %w", calls, errState)
	})
	if err == nil {
		t.Fatal("a check that never holds: want an error, got nil")
	}
	for _, want := range []string{"the widget", "20ms", fmt.Sprintf("state %d", calls)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want the error to mention %q, got %q", want, err)
		}
	}
	if !errors.Is(err, errState) {
		t.Errorf("want the error to wrap the check's last error, got %v", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("a timeout is no cancellation: %v", err)
	}
}

// TestPollNoError: a check that never holds and says nothing of its state
// still ends in an error naming what was awaited.
func TestPollNoError(t *testing.T) {
	err := Poll(context.Background(), "the widget", time.Millisecond, time.Millisecond, func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "the widget") {
		t.Errorf("want an error naming the widget, got %v", err)
	}
}

// TestPollUnnamed: without what, the error starts with the timeout, for a
// caller that names the wait itself.
func TestPollUnnamed(t *testing.T) {
	err := Poll(context.Background(), "", time.Millisecond, time.Millisecond, func() (bool, error) { return false, errState })
	if err == nil || !strings.HasPrefix(err.Error(), "not within 1ms; last: ") || !errors.Is(err, errState) {
		t.Errorf("want \"not within 1ms; last: ...\" wrapping the last state, got %v", err)
	}
}

// TestPollCancel: the end of ctx stops the wait long before its timeout,
// with ctx's error and the check's last.
func TestPollCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := Poll(ctx, "the widget", time.Hour, time.Millisecond, func() (bool, error) {
		calls++
		if calls == 2 {
			cancel()
		}
		return false, fmt.Errorf("state %d: %w", calls, errState)
	})
	if calls != 2 {
		t.Errorf("want no check after the cancel on the 2nd, got %d checks", calls)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errState) {
		t.Errorf("want an error wrapping the cancel and the last state, got %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "the widget") || !strings.Contains(err.Error(), "state 2") {
		t.Errorf("want an error naming the widget and state 2, got %v", err)
	}
}

// TestPollCancelWhileWaiting: the end of ctx stops a wait between checks.
func TestPollCancelWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := Poll(ctx, "the widget", time.Hour, time.Hour, func() (bool, error) {
		calls++
		go cancel()
		return false, errState
	})
	if calls != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("want one check and a cancel, got %d checks and %v", calls, err)
	}
}

// TestPollThird: a check that holds on its 3rd call ends the wait there.
func TestPollThird(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), "the widget", time.Hour, time.Millisecond, func() (bool, error) {
		calls++
		return calls == 3, errState
	})
	if err != nil {
		t.Errorf("want nil, got %v", err)
	}
	if calls != 3 {
		t.Errorf("want 3 checks, got %d", calls)
	}
}

// fatal is a testing.TB that records Fatalf and, like testing.T, ends the
// goroutine that calls it.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func eventually(check func() (bool, error)) (msg string, returned bool) {
	f := &fatal{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(context.Background(), f, "the widget", 20*time.Millisecond, time.Millisecond, check)
		returned = true
	}()
	<-done
	return f.msg, returned
}

// TestEventually: Eventually fails the test with Poll's error, and returns
// when the check holds.
func TestEventually(t *testing.T) {
	msg, returned := eventually(func() (bool, error) { return false, errState })
	if returned || !strings.Contains(msg, "the widget") || !strings.Contains(msg, errState.Error()) {
		t.Errorf("a check that never holds: want a fatal error naming the widget and %q, got returned=%v %q", errState, returned, msg)
	}
	calls := 0
	msg, returned = eventually(func() (bool, error) { calls++; return calls == 3, errState })
	if !returned || msg != "" || calls != 3 {
		t.Errorf("a check that holds on the 3rd call: want a return after 3 checks, got returned=%v %q after %d", returned, msg, calls)
	}
}
