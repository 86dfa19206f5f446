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
	"slices"
	"sync"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kilomesh/kilomesh/provider/inventory"
)

const (
	fmtMoreItems = "more than %d %s"
	fmtMoreBytes = "more than %d MiB of %s"

	// initialEventsEnd marks the bookmark that ends a streaming list.
	initialEventsEnd = "k8s.io/initial-events-end"
)

// Limits bound what a feed keeps of one member cluster.
type Limits struct {
	// Items is the most objects kept.
	Items int
	// Bytes is the most memory they take, as Weigh estimates it.
	Bytes int
	// PageSize is how many objects a list asks for at a time.
	PageSize int64
	// Slim returns what is kept of an object, see SlimNode.
	Slim func(obj runtime.Object) runtime.Object
	// Weigh estimates the memory of a slim object.
	Weigh func(obj runtime.Object) int
}

// A guard keeps a feed within its Limits, whatever the member's API server
// sends: it stands between the feed's informer and its list and watch
// requests, and passes on only the objects that fit, slim. It knows the
// name and weight of every object it passed on, which is what the
// informer's store holds: the store is fed by nothing else. Objects that do
// not fit are left out, and the guard says which bound left them out until
// the feed lists again; once a deletion makes room, it makes the feed list
// again, so that what was left out can come in.
//
// A list is paged, and every page is slimmed as it arrives: a list of
// thousands of Nodes never holds more than one page of them whole.
type guard struct {
	what    string
	limits  Limits
	changed func()

	mu    sync.Mutex
	items map[string]int
	bytes int
	// cut are the bounds reached by the list in progress, and reached
	// those reached since the last list completed: what the feed holds is
	// incomplete while reached is not empty.
	cut, reached inventory.Reasons
	// relist is signalled once a deletion makes room after something was
	// left out.
	relist chan struct{}
}

func newGuard(what string, l Limits, changed func()) *guard {
	return &guard{what: what, limits: l, changed: changed, items: map[string]int{}, relist: make(chan struct{}, 1)}
}

// incomplete returns the bounds that left objects out of the feed, or "".
func (g *guard) incomplete() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reached.String()
}

// begin starts a list: the objects it passes on replace all others.
func (g *guard) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.items = map[string]int{}
	g.bytes = 0
	g.cut = inventory.Reasons{}
	// This list is the one a deletion asked for.
	select {
	case <-g.relist:
	default:
	}
}

// end completes a list: its bounds become the feed's.
func (g *guard) end() {
	g.mu.Lock()
	changed := g.reached.String() != g.cut.String()
	g.reached = g.cut
	g.mu.Unlock()
	if changed {
		g.changed()
	}
}

// An admission is what becomes of an object the member sends.
type admission int

const (
	// admitted objects are passed on.
	admitted admission = iota
	// refused objects are left out: the store never held them.
	refused
	// evicted objects grew past the bounds: the store drops them.
	evicted
)

// admit decides whether a slim object fits, and records it if it does.
// listing tells a list in progress from a running watch, whose cut is
// reported at once.
func (g *guard) admit(obj runtime.Object, listing bool) admission {
	m, err := meta.Accessor(obj)
	if err != nil {
		return refused
	}
	key, w := m.GetName(), g.limits.Weigh(obj)
	g.mu.Lock()
	defer g.mu.Unlock()
	old, known := g.items[key]
	var reason string
	switch {
	case !known && len(g.items) >= g.limits.Items:
		reason = fmt.Sprintf(fmtMoreItems, g.limits.Items, g.what)
	case g.bytes-old+w > g.limits.Bytes:
		reason = fmt.Sprintf(fmtMoreBytes, g.limits.Bytes>>20, g.what)
	default:
		g.items[key] = w
		g.bytes += w - old
		return admitted
	}
	g.reachedLocked(reason, listing)
	if known {
		delete(g.items, key)
		g.bytes -= old
		return evicted
	}
	return refused
}

// forget records that an object was deleted; it returns false for an
// object the guard never passed on.
func (g *guard) forget(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w, ok := g.items[m.GetName()]
	if !ok {
		return false
	}
	delete(g.items, m.GetName())
	g.bytes -= w
	if g.reached.String() != "" && len(g.items) < g.limits.Items && g.bytes < g.limits.Bytes {
		select {
		case g.relist <- struct{}{}:
		default:
		}
	}
	return true
}

func (g *guard) reachedLocked(reason string, listing bool) {
	if listing {
		g.cut.Add(reason)
		return
	}
	before := g.reached.String()
	g.reached.Add(reason)
	if g.reached.String() != before {
		// Users read the reason; the object left out caused no event.
		go g.changed()
	}
}

// lister returns lw with its lists paged and guarded, and its watches
// guarded.
func (g *guard) lister(lw lister) lister {
	return lister{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			first := o.Continue == ""
			if first {
				// The newest version, paged: a list at version "0" is
				// served whole from the API server's cache.
				o.ResourceVersion, o.ResourceVersionMatch = "", ""
			}
			o.Limit = g.limits.PageSize
			l, err := lw.list(ctx, o)
			if err != nil {
				return l, err
			}
			if first {
				g.begin()
			}
			if err := g.page(l); err != nil {
				return nil, err
			}
			return l, nil
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.watch(ctx, o)
			if err != nil {
				return w, err
			}
			initial := o.SendInitialEvents != nil && *o.SendInitialEvents
			if initial {
				g.begin()
			}
			gw := &guardedWatch{g: g, w: w, initial: initial, out: make(chan watch.Event), stop: make(chan struct{})}
			go gw.run()
			return gw, nil
		},
	}
}

// page slims and admits the objects of one page of a list. Once a bound is
// reached the list stops: its later pages would not fit either.
func (g *guard) page(l runtime.Object) error {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return err
	}
	kept := make([]runtime.Object, 0, len(objs))
	full := false
	for _, obj := range objs {
		s := g.limits.Slim(obj)
		switch g.admit(s, true) {
		case admitted:
			kept = append(kept, s)
			continue
		case evicted:
			// A name listed twice, too large the second time: neither
			// copy is kept.
			kept = slices.DeleteFunc(kept, func(o runtime.Object) bool { return sameName(o, s) })
		case refused:
		}
		full = true
	}
	if err := meta.SetList(l, kept); err != nil {
		return err
	}
	lm, err := meta.ListAccessor(l)
	if err != nil {
		return err
	}
	if full {
		lm.SetContinue("")
	}
	if lm.GetContinue() == "" {
		g.end()
	}
	return nil
}

func sameName(a, b runtime.Object) bool {
	ma, erra := meta.Accessor(a)
	mb, errb := meta.Accessor(b)
	return erra == nil && errb == nil && ma.GetName() == mb.GetName()
}

// A guardedWatch passes on the events of a watch that fit the guard.
type guardedWatch struct {
	g       *guard
	w       watch.Interface
	initial bool
	out     chan watch.Event
	stop    chan struct{}
	once    sync.Once
}

func (gw *guardedWatch) Stop() {
	gw.once.Do(func() { close(gw.stop) })
	gw.w.Stop()
}

func (gw *guardedWatch) ResultChan() <-chan watch.Event { return gw.out }

func (gw *guardedWatch) run() {
	defer close(gw.out)
	listing := gw.initial
	for {
		var ev watch.Event
		select {
		case <-gw.stop:
			return
		case <-gw.g.relist:
			// A deletion made room for what was left out: an expired
			// watch makes the reflector list again.
			ev = watch.Event{Type: watch.Error, Object: &kerrors.NewResourceExpired("kilomesh: list again, there is room for what was left out").ErrStatus}
			select {
			case gw.out <- ev:
			case <-gw.stop:
			}
			return
		case e, ok := <-gw.w.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		var keep bool
		if ev, keep = gw.filter(ev, &listing); !keep {
			continue
		}
		select {
		case gw.out <- ev:
		case <-gw.stop:
			return
		}
	}
}

// filter slims an event's object and decides whether it is passed on.
func (gw *guardedWatch) filter(ev watch.Event, listing *bool) (watch.Event, bool) {
	g := gw.g
	switch ev.Type {
	case watch.Added, watch.Modified:
		ev.Object = g.limits.Slim(ev.Object)
		switch g.admit(ev.Object, *listing) {
		case admitted:
			return ev, true
		case evicted:
			return watch.Event{Type: watch.Deleted, Object: ev.Object}, true
		default:
			return ev, false
		}
	case watch.Deleted:
		ev.Object = g.limits.Slim(ev.Object)
		return ev, g.forget(ev.Object)
	case watch.Error:
		// client-go logs what the member says, and makes it an error.
		if s, ok := ev.Object.(*metav1.Status); ok {
			if msg := cutText(s.Message); msg != s.Message {
				s = s.DeepCopy()
				s.Message = msg
				ev.Object = s
			}
		}
	case watch.Bookmark:
		if m, err := meta.Accessor(ev.Object); err == nil && *listing && m.GetAnnotations()[initialEventsEnd] == "true" {
			*listing = false
			g.end()
		}
	}
	return ev, true
}
