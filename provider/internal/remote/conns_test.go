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

package remote

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
)

// TestConns dials real loopback connections and checks that closing a
// cluster's connections closes every one of them and refuses new ones.
func TestConns(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	d := newConns()
	var server []net.Conn
	for range 2 {
		if _, err := d.DialContext(t.Context(), "tcp", ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		server = append(server, <-accepted)
	}
	if got := d.count(); got != 2 {
		t.Errorf("open connections: want 2, got %d", got)
	}
	d.closeAll()
	if got := d.count(); got != 0 {
		t.Errorf("open connections after closeAll: want 0, got %d", got)
	}
	for i, c := range server {
		// The far side of a closed connection reads the end of it.
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("connection %d: want EOF on the far side, got %v", i, err)
		}
		_ = c.Close()
	}
	_, err = d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if diff := cmp.Diff(errors.New(errStopped), err, test.EquateErrors()); diff != "" {
		t.Errorf("dial after closeAll: -want +got:\n%s", diff)
	}
}

// settled waits for the first outcome of a feed's requests and returns
// what items returns then.
func settled(t *testing.T, f *feed) ([]any, error) {
	t.Helper()
	for {
		next := f.outcome()
		items, err := f.items()
		if !errors.Is(err, ErrPending) {
			return items, err
		}
		select {
		case <-next:
		case <-t.Context().Done():
			t.Fatal("the feed never had an outcome")
		}
	}
}

func TestItems(t *testing.T) {
	unauthorized := kerrors.NewUnauthorized("Unauthorized")
	forbidden := kerrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
	type want struct {
		items int
		err   error
	}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api/v1/nodes", Err: errors.New("connection refused")}
	cases := map[string]struct {
		reason string
		always error
		// listHangs keeps the list from ever answering: only the
		// streaming list can have an outcome.
		listHangs bool
		want      want
	}{
		"Refused": {
			reason:    "A cluster that refuses the streaming list's connection is unreachable: the reflector retries it without listing, so its failure is the outcome.",
			always:    refused,
			listHangs: true,
			want:      want{err: refused},
		},
		"Listed": {
			reason: "A feed that listed returns the objects.",
			want:   want{items: 1},
		},
		"Unauthorized": {
			reason: "Credentials the cluster does not accept are reported as the outcome.",
			always: unauthorized,
			want:   want{err: unauthorized},
		},
		"Forbidden": {
			reason: "An identity that may not list is reported as the outcome.",
			always: forbidden,
			want:   want{err: forbidden},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			lw := lister{
				list: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
					<-release
					if tc.listHangs {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					if tc.always != nil {
						return nil, tc.always
					}
					return &metav1.PartialObjectMetadataList{
						ListMeta: metav1.ListMeta{ResourceVersion: "1"},
						Items:    []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}},
					}, nil
				},
				watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
					// The cluster answers nothing, not even a refusal,
					// before it is released.
					<-release
					switch {
					case tc.always != nil:
						return nil, tc.always
					case o.SendInitialEvents != nil && *o.SendInitialEvents:
						// As an API server without streaming lists: the
						// reflector falls back to a list.
						return nil, kerrors.NewBadRequest("sendInitialEvents is not supported")
					}
					return watch.NewFake(), nil
				},
			}
			f := startFeed(t.Context(), feedConfig{what: "Nodes", lw: lw, obj: &metav1.PartialObjectMetadata{}, changed: func() {}, gone: func() {}})
			t.Cleanup(f.stop)
			// Until the cluster answers, the feed says so at once: a
			// reconcile never waits for a member.
			if _, err := f.items(); !errors.Is(err, ErrPending) {
				t.Errorf("\n%s\nitems() before the first list: want ErrPending, got %v", tc.reason, err)
			}
			close(release)
			items, err := settled(t, f)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nitems(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if len(items) != tc.want.items {
				t.Errorf("\n%s\nitems(): want %d items, got %d", tc.reason, tc.want.items, len(items))
			}
		})
	}
}

// TestBounded checks the deadlines of a feed's requests against a cluster
// that never answers: a list fails, a watch that does not start fails, and
// a watch that started runs on past the deadline.
func TestBounded(t *testing.T) {
	hang := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	const timeout = 50 * time.Millisecond
	t.Run("ListHangs", func(t *testing.T) {
		lw := lister{list: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) { return nil, hang(ctx) }}
		_, err := lw.bounded("Nodes", timeout).list(t.Context(), metav1.ListOptions{})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer a request for Nodes") {
			t.Errorf("a list that never answers: want a deadline error naming Nodes, got %v", err)
		}
	})
	t.Run("WatchHangs", func(t *testing.T) {
		lw := lister{watch: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) { return nil, hang(ctx) }}
		_, err := lw.bounded("Nodes", timeout).watch(t.Context(), metav1.ListOptions{})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("a watch that never starts: want a deadline error (never a cancellation, which a feed ignores), got %v", err)
		}
	})
	t.Run("WatchRuns", func(t *testing.T) {
		started := make(chan context.Context, 1)
		lw := lister{watch: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			started <- ctx
			return watch.NewFake(), nil
		}}
		w, err := lw.bounded("Nodes", timeout).watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := <-started
		// Past the deadline the watch's request is still alive...
		time.Sleep(4 * timeout)
		if ctx.Err() != nil {
			t.Errorf("a watch that started is cancelled by the deadline of its start: %v", ctx.Err())
		}
		// ...until the watch is stopped.
		w.Stop()
		if ctx.Err() == nil {
			t.Error("a stopped watch keeps its request alive")
		}
	})
}

// TestStalled starts a feed against a server that starts a streaming list
// and then says nothing, and never answers a list: the feed, pending at
// first, reports it after twice its timeout instead of staying pending.
func TestStalled(t *testing.T) {
	silent := watch.NewFake()
	lw := lister{
		list: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		watch: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return silent, nil },
	}
	var wakes atomic.Int64
	f := startFeed(t.Context(), feedConfig{what: "Nodes", lw: lw, obj: &metav1.PartialObjectMetadata{}, changed: func() { wakes.Add(1) }, gone: func() {}, timeout: 50 * time.Millisecond})
	t.Cleanup(f.stop)
	_, err := settled(t, f)
	if want := errors.Errorf(errFmtStalled, "Nodes", 100*time.Millisecond); err == nil || err.Error() != want.Error() {
		t.Errorf("a feed whose first list never ends: want %v, got %v", want, err)
	}
	if wakes.Load() == 0 {
		t.Error("the users of a stalled feed are not woken")
	}
}

// TestRelistWithoutStreamingLists relists a synced feed against a server
// that refuses streaming lists, as clusters before Kubernetes 1.32 do: the
// refused probe is no failure of the cluster, so the feed neither reports
// an error while it lists again nor wakes its users for it.
func TestRelistWithoutStreamingLists(t *testing.T) {
	var lists atomic.Int64
	relisting, release := make(chan struct{}), make(chan struct{})
	watchers := make(chan *watch.FakeWatcher, 10)
	lw := lister{
		list: func(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			if lists.Add(1) == 2 {
				close(relisting)
				<-release
			}
			return &metav1.PartialObjectMetadataList{
				ListMeta: metav1.ListMeta{ResourceVersion: "1"},
				Items:    []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}},
			}, nil
		},
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				return nil, kerrors.NewBadRequest("sendInitialEvents is not supported")
			}
			w := watch.NewFake()
			watchers <- w
			return w, nil
		},
	}
	var wakes atomic.Int64
	f := startFeed(t.Context(), feedConfig{what: "Nodes", lw: lw, obj: &metav1.PartialObjectMetadata{}, changed: func() { wakes.Add(1) }, gone: func() {}})
	t.Cleanup(f.stop)
	if _, err := settled(t, f); err != nil {
		t.Fatal(err)
	}
	var w *watch.FakeWatcher
	select {
	case w = <-watchers:
	case <-time.After(time.Minute):
		t.Fatal("the feed does not watch after its first list")
	}
	synced := wakes.Load()
	// The server ends the watch as too old: the reflector lists again.
	w.Error(&kerrors.NewResourceExpired("too old resource version").ErrStatus)
	select {
	case <-relisting:
	case <-time.After(time.Minute):
		t.Fatal("the feed does not list again after its watch expired")
	}
	items, err := f.items()
	close(release)
	if err != nil || len(items) != 1 {
		t.Errorf("items(...) while the feed lists again: want 1 item and no error, got %d items and %v", len(items), err)
	}
	if got := wakes.Load(); got != synced {
		t.Errorf("users woken %d times while the feed listed again, want 0", got-synced)
	}
}

// TestAnsweringSince checks when a feed says its cluster began answering:
// at its first list, not before; and again when it answers after failing,
// since heartbeats written before then could not reach it.
func TestAnsweringSince(t *testing.T) {
	var clock atomic.Int64
	clock.Store(1000)
	now := func() time.Time { return time.Unix(clock.Load(), 0) }
	var failing atomic.Bool
	watchers := make(chan *watch.FakeWatcher, 10)
	lw := lister{
		list: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if failing.Load() {
				return nil, errors.New("connection refused")
			}
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if failing.Load() || (o.SendInitialEvents != nil && *o.SendInitialEvents) {
				return nil, kerrors.NewBadRequest("no")
			}
			w := watch.NewFake()
			watchers <- w
			return w, nil
		},
	}
	f := startFeed(t.Context(), feedConfig{what: "Nodes", lw: lw, obj: &metav1.PartialObjectMetadata{}, changed: func() {}, gone: func() {}, now: now})
	t.Cleanup(f.stop)
	if _, err := settled(t, f); err != nil {
		t.Fatal(err)
	}
	// The store may have synced a moment before the feed records it.
	for f.answeringSince().IsZero() {
		select {
		case <-f.outcome():
		case <-time.After(30 * time.Second):
			t.Fatal("the feed never recorded its first list")
		}
	}
	if got := f.answeringSince(); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("after the first list: want answering since 1000, got %v", got.Unix())
	}

	// The cluster stops answering: the watch ends, a relist fails.
	clock.Store(2000)
	failing.Store(true)
	(<-watchers).Stop()
	for f.answeringSince() != (time.Time{}) {
		select {
		case <-f.outcome():
		case <-t.Context().Done():
			t.Fatal("the feed never saw the cluster fail")
		}
	}

	// It answers again.
	clock.Store(3000)
	failing.Store(false)
	for f.answeringSince() != time.Unix(3000, 0) {
		select {
		case <-f.outcome():
		case <-time.After(30 * time.Second):
			t.Fatalf("after the cluster answered again: want answering since 3000, got %v", f.answeringSince().Unix())
		}
	}
}

// TestStable checks that a failed request reads the same at every retry:
// the URL without its query (a watch's random timeoutSeconds), without the
// client's earlier attempts, its cause kept; and that kilomesh's own
// deadline message still wraps it.
func TestStable(t *testing.T) {
	refused := errors.New("connect: connection refused")
	attempt := func(timeout string) error {
		return fmt.Errorf("%w - error from a previous attempt: read tcp 127.0.0.1:%s->127.0.0.1:6443: connection reset by peer", &url.Error{
			Op:  "Get",
			URL: "https://127.0.0.1:6443/api/v1/nodes?allowWatchBookmarks=true&resourceVersion=341&timeoutSeconds=" + timeout + "&watch=true",
			Err: refused,
		}, timeout)
	}
	a, b := stable(attempt("329")), stable(attempt("517"))
	if a.Error() != b.Error() {
		t.Errorf("two retries of one failure read differently:\n%s\n%s", a, b)
	}
	if want := `Get "https://127.0.0.1:6443/api/v1/nodes": connect: connection refused`; a.Error() != want {
		t.Errorf("stable error: want %q, got %q", want, a)
	}
	if !errors.Is(a, refused) {
		t.Errorf("the cause is lost: %v", a)
	}
	if other := errors.New("no URL in it"); stable(other) != other { //nolint:errorlint // the very same error, not one that wraps it
		t.Error("an error without a request's URL must be kept as it is")
	}

	lw := lister{list: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
		<-ctx.Done()
		return nil, &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/nodes?limit=500", Err: ctx.Err()}
	}}
	_, err := lw.stable().bounded("Nodes", 50*time.Millisecond).list(t.Context(), metav1.ListOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer a request for Nodes") || strings.Contains(err.Error(), "limit=") {
		t.Errorf("a list that never answers: want the deadline message around the stable error, got %v", err)
	}
}
