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
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errFmtPending = "cannot read %s"
	errFmtTimeout = "the cluster did not answer a request for %s within %s"
	errFmtStalled = "the cluster has not listed its %s within %s"
)

// ErrPending is returned for a watch that has neither listed its objects
// nor failed to yet. A reconcile never waits for the cluster: the end of
// the first list, or its failure, wakes the users again.
var ErrPending = errors.New("the watch of the cluster has not listed them yet")

// A lister lists and watches one kind of object.
type lister struct {
	list  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
}

// bounded returns the lister with a deadline on every request: a list must
// complete within timeout, a watch must start (its response headers
// arrive) within timeout and may then run for as long as the server keeps
// it. A cluster that accepts connections and never answers then fails
// every request in bounded time, instead of keeping a watch that never
// lists and never fails.
func (lw lister) bounded(what string, timeout time.Duration) lister {
	if timeout <= 0 {
		return lw
	}
	timedOut := func(err error) error {
		return errors.Wrapf(err, errFmtTimeout, what, timeout)
	}
	return lister{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			l, err := lw.list(ctx, o)
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return l, timedOut(err)
			}
			return l, err
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			ctx, cancel := context.WithCancel(ctx)
			var expired atomic.Bool
			t := time.AfterFunc(timeout, func() {
				expired.Store(true)
				cancel()
			})
			w, err := lw.watch(ctx, o)
			t.Stop()
			if err != nil || expired.Load() {
				cancel()
				if w != nil {
					w.Stop()
				}
				if err == nil || expired.Load() {
					return nil, timedOut(context.DeadlineExceeded)
				}
				return nil, err
			}
			return &cancelOnStop{Interface: w, cancel: cancel}, nil
		},
	}
}

// cancelOnStop is a watch that releases its request's context when it is
// stopped.
type cancelOnStop struct {
	watch.Interface

	cancel context.CancelFunc
}

func (w *cancelOnStop) Stop() {
	w.Interface.Stop()
	w.cancel()
}

// A feed is one watch of one kind of object in one cluster. It keeps the
// slimmed objects in memory and remembers whether the cluster answered its
// last list or watch request.
type feed struct {
	what   string
	store  cache.Store
	ctl    cache.Controller
	cancel context.CancelFunc

	// listed is set once the first list is in the store. The event
	// handlers read it instead of asking the informer, which holds its
	// queue's lock while it calls them.
	listed atomic.Bool
	// stalled is set when the first list has had no outcome for twice the
	// timeout: a server that started a streaming list and went silent
	// neither lists nor fails.
	stalled    atomic.Bool
	stallAfter time.Duration

	mu  sync.Mutex
	err error
	// answering is when the cluster last began answering this feed's
	// requests: its first list, or its first answer after a failure.
	answering time.Time
	now       func() time.Time
	// next is closed, and replaced, when the first list completes or the
	// outcome of a request changes.
	next chan struct{}

	// guard keeps the feed within its limits, if it has any.
	guard *guard
}

// incomplete returns the bounds that left objects out of the feed, or "".
func (f *feed) incomplete() string {
	if f.guard == nil {
		return ""
	}
	return f.guard.incomplete()
}

// A feedConfig says what a feed watches and whom it tells.
type feedConfig struct {
	// what names the objects in messages, e.g. "Nodes".
	what string
	lw   lister
	obj  runtime.Object
	// transform slims every object before it is stored.
	transform cache.TransformFunc
	// differ reports whether an update of a stored object matters to
	// anyone; nil means every update does.
	differ func(before, after any) bool
	// changed is called, from several goroutines, when an object is added,
	// deleted or changed as differ says, when the first list completes,
	// and whenever the cluster becomes unreachable or reachable again.
	changed func()
	// gone is called when the server says the kind does not exist.
	gone func()
	// timeout bounds every request of the feed; zero leaves them unbounded.
	timeout time.Duration
	// now is the clock; time.Now when nil.
	now func() time.Time
	// limits bound what the feed keeps; nil keeps everything.
	limits *Limits
}

// startFeed starts a watch.
func startFeed(ctx context.Context, fc feedConfig) *feed {
	ctx, cancel := context.WithCancel(ctx)
	now := fc.now
	if now == nil {
		now = time.Now
	}
	f := &feed{what: fc.what, cancel: cancel, next: make(chan struct{}), stallAfter: 2 * fc.timeout, now: now}
	lw := fc.lw.stable().bounded(fc.what, fc.timeout)
	changed, gone := fc.changed, fc.gone
	if fc.limits != nil {
		f.guard = newGuard(fc.what, *fc.limits, changed)
		lw = f.guard.lister(lw)
	}
	f.store, f.ctl = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				l, err := lw.list(ctx, o)
				f.record(err, changed, gone)
				return l, err
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				w, err := lw.watch(ctx, o)
				if err != nil && o.SendInitialEvents != nil && *o.SendInitialEvents && Answered(err) {
					// A streaming list the server refuses is not a failure:
					// the reflector lists instead, and that outcome counts.
					// A server that does not answer at all is: the
					// reflector retries the streaming list without listing.
					return w, err
				}
				f.record(err, changed, gone)
				return w, err
			},
		},
		ObjectType: fc.obj,
		Transform:  fc.transform,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(_ any) {
				if f.listed.Load() {
					changed()
				}
			},
			UpdateFunc: func(o, n any) {
				if fc.differ == nil || fc.differ(o, n) {
					changed()
				}
			},
			DeleteFunc: func(_ any) { changed() },
		},
	})
	go f.ctl.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), f.ctl.HasSynced) {
			f.mu.Lock()
			if f.answering.IsZero() {
				f.answering = f.now()
			}
			f.mu.Unlock()
			f.listed.Store(true)
			f.signal()
			changed()
		}
	}()
	if f.stallAfter > 0 {
		t := time.AfterFunc(f.stallAfter, func() {
			if ctx.Err() == nil && !f.listed.Load() {
				f.stalled.Store(true)
				f.signal()
				changed()
			}
		})
		context.AfterFunc(ctx, func() { t.Stop() })
	}
	return f
}

// Answered reports whether an error is an API server's answer, as opposed
// to a request that got none (a refused connection, a timeout).
func Answered(err error) bool {
	var status kerrors.APIStatus
	return errors.As(err, &status)
}

// record remembers the outcome of a list or watch request. The reflector
// retries a refused connection on its own without reporting it, so this is
// the one place that sees every failure and every recovery.
func (f *feed) record(err error, changed, gone func()) {
	switch {
	case err == nil:
		f.mu.Lock()
		was := f.err
		f.err = nil
		if was != nil {
			f.answering = f.now()
		}
		f.mu.Unlock()
		if was != nil {
			f.signal()
			changed()
		}
		return
	case kerrors.IsResourceExpired(err) || kerrors.IsGone(err) || errors.Is(err, context.Canceled):
		// Expired versions are a normal part of watching: a relist follows.
		return
	case kerrors.IsNotFound(err):
		gone()
	}
	// The member's words are kept only in part: a server may say anything.
	err = CutError(err)
	f.mu.Lock()
	was := f.err
	f.err = err
	f.mu.Unlock()
	if was == nil || was.Error() != err.Error() {
		f.signal()
		changed()
	}
}

// stable returns the lister with its requests' errors made stable (see
// stable below), before anything of kilomesh's wraps them, and cut (see
// CutError): client-go logs them as they are.
func (lw lister) stable() lister {
	return lister{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := lw.list(ctx, o)
			return l, CutError(stable(err))
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.watch(ctx, o)
			return w, CutError(stable(err))
		},
	}
}

// stable drops the query from the URL of a request that failed: a watch
// asks with a random timeoutSeconds and the last resourceVersion, so the
// same failure, retried, would read differently each time, and every status
// that reports it would be written again at every retry of an unreachable
// member, each write a watch event of the meshes that use it.
// What the client wraps around it (the errors of its own earlier attempts,
// with their local ports) goes too; the cause stays as it is, for the checks
// of refused and untrusted credentials.
func stable(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		return err
	}
	u.RawQuery = ""
	return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
}

// signal wakes the waits for the next outcome.
func (f *feed) signal() {
	f.mu.Lock()
	close(f.next)
	f.next = make(chan struct{})
	f.mu.Unlock()
}

func (f *feed) stop() { f.cancel() }

// items returns the objects, the error of the last request when the
// cluster cannot be reached, or ErrPending before the first list has an
// outcome. It never waits for the cluster.
func (f *feed) items() ([]any, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case f.ctl.HasSynced():
		return f.store.List(), nil
	case f.stalled.Load():
		return nil, errors.Errorf(errFmtStalled, f.what, f.stallAfter)
	default:
		return nil, errors.Wrapf(ErrPending, errFmtPending, f.what)
	}
}

// answeringSince returns when the cluster last began answering the feed:
// its first list, or its first answer after it failed. Zero while it has
// not listed, or while it fails.
func (f *feed) answeringSince() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil || !f.listed.Load() {
		return time.Time{}
	}
	return f.answering
}

// outcome returns a channel that is closed when the feed lists for the
// first time or the outcome of its requests changes.
func (f *feed) outcome() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}
