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
	"sync"
	"sync/atomic"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

const errFmtNotSynced = "the watch of %s has not listed them yet"

// A lister lists and watches one kind of object.
type lister struct {
	list  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
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

	mu  sync.Mutex
	err error
	// next is closed, and replaced, when the first list completes or the
	// outcome of a request changes, so that a wait for the first list
	// ends as soon as the cluster refuses it.
	next chan struct{}
}

// startFeed starts a watch. changed is called, from several goroutines, when an
// object is added, deleted or changed in a way the transform keeps, when the
// first list completes, and whenever the cluster becomes unreachable or
// reachable again. gone is called when the server says the kind does not
// exist.
func startFeed(ctx context.Context, what string, lw lister, obj runtime.Object, transform cache.TransformFunc, changed func(), gone func()) *feed {
	ctx, cancel := context.WithCancel(ctx)
	f := &feed{what: what, cancel: cancel, next: make(chan struct{})}
	f.store, f.ctl = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				l, err := lw.list(ctx, o)
				f.record(err, changed, gone)
				return l, err
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				w, err := lw.watch(ctx, o)
				if err != nil && o.SendInitialEvents != nil && *o.SendInitialEvents {
					// A streaming list the server refuses is not a failure:
					// the reflector lists instead, and that outcome counts.
					return w, err
				}
				f.record(err, changed, gone)
				return w, err
			},
		},
		ObjectType: obj,
		Transform:  transform,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(_ any) {
				if f.listed.Load() {
					changed()
				}
			},
			UpdateFunc: func(o, n any) {
				if !sameButVersion(o, n) {
					changed()
				}
			},
			DeleteFunc: func(_ any) { changed() },
		},
	})
	go f.ctl.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), f.ctl.HasSynced) {
			f.listed.Store(true)
			f.signal()
			changed()
		}
	}()
	return f
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
	f.mu.Lock()
	was := f.err
	f.err = err
	f.mu.Unlock()
	if was == nil || was.Error() != err.Error() {
		f.signal()
		changed()
	}
}

// signal wakes the waits for the first list.
func (f *feed) signal() {
	f.mu.Lock()
	close(f.next)
	f.next = make(chan struct{})
	f.mu.Unlock()
}

func (f *feed) stop() { f.cancel() }

// items waits up to wait for the first list, then returns the objects, or
// the error of the last request when the cluster cannot be reached. A wait
// for the first list ends early when the cluster refuses it for good
// (credentials it does not accept fail at once, not after the wait), and
// goes on through errors a retry may fix.
func (f *feed) items(ctx context.Context, wait time.Duration) ([]any, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err == nil && f.ctl.HasSynced() {
		return f.store.List(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		f.mu.Lock()
		err, next := f.err, f.next
		f.mu.Unlock()
		synced := f.ctl.HasSynced()
		switch {
		case err != nil && (synced || clients.Refused(err) || kerrors.IsNotFound(err)):
			return nil, err
		case synced:
			return f.store.List(), nil
		}
		select {
		case <-ctx.Done():
			f.mu.Lock()
			err := f.err
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return nil, errors.Errorf(errFmtNotSynced, f.what)
		case <-next:
		}
	}
}
