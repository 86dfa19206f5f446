//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/test/stack"
)

// An event is one change of a Peer in a member, as its watch delivered it.
type event struct {
	At   time.Time
	Type string // Added, Modified or Deleted
	Peer kilov1alpha1.Peer
}

// A waiter waits for a predicate over a member's Peers to hold.
type waiter struct {
	pred func(map[string]*kilov1alpha1.Peer) bool
	done chan struct{}
	at   time.Time
}

// memberLog is everything recorded of one member.
type memberLog struct {
	mu      sync.Mutex
	peers   map[string]*kilov1alpha1.Peer
	events  []event
	waiters []*waiter
}

// A recorder watches the Peers of every member for the whole run: the
// tests assert on what the member API servers hold and how it changed, and
// time changes by the arrival of their watch events.
type recorder struct {
	members map[string]*memberLog
}

func newRecorder(ctx context.Context, env *stack.Env, clusters []string) (*recorder, error) {
	r := &recorder{members: map[string]*memberLog{}}
	s, err := stack.Scheme()
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		cfg, err := env.RESTConfig(c)
		if err != nil {
			return nil, err
		}
		ca, err := cache.New(cfg, cache.Options{Scheme: s})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		inf, err := ca.GetInformer(ctx, &kilov1alpha1.Peer{})
		if err != nil {
			return nil, fmt.Errorf("%s: cannot watch Peers: %w", c, err)
		}
		m := &memberLog{peers: map[string]*kilov1alpha1.Peer{}}
		r.members[c] = m
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { m.record("Added", o) },
			UpdateFunc: func(_, o any) { m.record("Modified", o) },
			DeleteFunc: func(o any) { m.record("Deleted", o) },
		}); err != nil {
			return nil, err
		}
		go func() { _ = ca.Start(ctx) }()
		if !ca.WaitForCacheSync(ctx) {
			return nil, fmt.Errorf("%s: the Peer watch did not sync", c)
		}
	}
	return r, nil
}

func (m *memberLog) record(typ string, o any) {
	now := time.Now()
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*kilov1alpha1.Peer)
	if !ok {
		return
	}
	p = p.DeepCopy()
	m.mu.Lock()
	defer m.mu.Unlock()
	if typ == "Deleted" {
		delete(m.peers, p.Name)
	} else {
		m.peers[p.Name] = p
	}
	m.events = append(m.events, event{At: now, Type: typ, Peer: *p})
	keep := m.waiters[:0]
	for _, w := range m.waiters {
		if w.pred(m.peers) {
			w.at = now
			close(w.done)
			continue
		}
		keep = append(keep, w)
	}
	m.waiters = keep
}

// expect registers a wait for pred to hold over the Peers of member. It
// fails if pred holds already: a change is expected, not a state.
func (r *recorder) expect(member string, pred func(map[string]*kilov1alpha1.Peer) bool) (*waiter, error) {
	m := r.members[member]
	m.mu.Lock()
	defer m.mu.Unlock()
	if pred(m.peers) {
		return nil, fmt.Errorf("%s: the expected change holds before it was made", member)
	}
	w := &waiter{pred: pred, done: make(chan struct{})}
	m.waiters = append(m.waiters, w)
	return w, nil
}

// wait returns when the waiter's predicate came to hold: the arrival time of
// the event that made it hold.
func (w *waiter) wait(ctx context.Context) (time.Time, error) {
	select {
	case <-w.done:
		return w.at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// snapshot copies the Peers a member holds now, by name.
func (r *recorder) snapshot(member string) map[string]kilov1alpha1.Peer {
	m := r.members[member]
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]kilov1alpha1.Peer, len(m.peers))
	for k, v := range m.peers {
		out[k] = *v.DeepCopy()
	}
	return out
}

// since lists the events of a member from t on, optionally only of Peers
// that match keep.
func (r *recorder) since(member string, t time.Time, keep func(*kilov1alpha1.Peer) bool) []event {
	m := r.members[member]
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []event
	for _, e := range m.events {
		if !e.At.Before(t) && (keep == nil || keep(&e.Peer)) {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) memberNames() []string {
	out := make([]string, 0, len(r.members))
	for k := range r.members {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func describe(es []event) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "\n  %s %s %s rv=%s", e.At.Format("15:04:05.000"), e.Type, e.Peer.Name, e.Peer.ResourceVersion)
	}
	return b.String()
}
