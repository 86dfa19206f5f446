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

// Package remote shares watches of member clusters. Every managed resource
// that reaches the same cluster with the same credentials uses one watch of
// its Nodes and one of its Peers; a change that a watch keeps wakes exactly
// the managed resources that use that cluster, through a controller-runtime
// source, so status follows the cluster within about a second and without
// polling.
package remote

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

// DefaultCoalesce is how long a wake-up waits for more changes of the same
// cluster before its managed resources are reconciled: a burst of Node
// changes (a rollout, a Kilo restart) becomes one status write.
const DefaultCoalesce = 200 * time.Millisecond

// DefaultMaxGather bounds how long changes that keep coming, each within
// the coalescing delay of the one before, are gathered into one wake-up: a
// node replaced (a Node created, another deleted) or a rollout costs one
// NodeInventory write, and so one render of every mesh that uses it, not
// one per change; a lone change still waits only the coalescing delay.
const DefaultMaxGather = 2 * time.Second

// DefaultFirstListWait is how long the first observation of a new user
// waits for its cluster's first lists (Cluster.AwaitFirstLists): the lists
// of a cluster that answers take a fraction of it.
const DefaultFirstListWait = time.Second

// A User is a managed resource that uses a cluster.
type User struct {
	// Kind of the managed resource, e.g. NodeInventory.
	Kind string
	types.NamespacedName
	// Part tells apart the clusters of a managed resource that uses
	// several (a ServiceSync reads every member); empty for the others.
	Part string
}

// A Registry hands out shared Clusters and wakes their users.
type Registry struct {
	ctx       context.Context
	coalesce  time.Duration
	maxGather time.Duration
	timeout   time.Duration
	firstList time.Duration
	now       func() time.Time

	mu       sync.Mutex
	seq      uint64
	clusters map[string]*Cluster
	users    map[User]string
	queues   map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]
	// pending are the wake-ups being gathered, by user.
	pending map[User]*gathering

	// watcher watches the objects credentials are read from; deps records
	// which of them each user's credentials came from.
	watcher SourceWatcher
	deps    map[User][]clients.Source
	watches map[clients.Source]sourceWatch
}

// A RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithCoalesce sets how long a wake-up waits for more changes.
func WithCoalesce(d time.Duration) RegistryOption {
	return func(r *Registry) { r.coalesce = d }
}

// WithMaxGather sets how long changes that keep coming are gathered into
// one wake-up at most. Below the coalescing delay, the delay is the bound.
func WithMaxGather(d time.Duration) RegistryOption {
	return func(r *Registry) { r.maxGather = d }
}

// WithTimeout sets how long a request to a member cluster may take: a
// list, the start of a watch, a write. Zero leaves requests unbounded.
func WithTimeout(d time.Duration) RegistryOption {
	return func(r *Registry) { r.timeout = d }
}

// WithFirstListWait sets how long the first observation of a new user
// waits for its cluster's first lists.
func WithFirstListWait(d time.Duration) RegistryOption {
	return func(r *Registry) { r.firstList = d }
}

// FirstListWait is how long the first observation of a new user waits for
// its cluster's first lists.
func (r *Registry) FirstListWait() time.Duration { return r.firstList }

// WithClock sets the clock that tells whether a node's heartbeat is stale.
func WithClock(now func() time.Time) RegistryOption {
	return func(r *Registry) { r.now = now }
}

// WithSourceWatcher sets how the objects credentials are read from are
// watched. Without one, a rotated Secret takes effect at the next poll.
func WithSourceWatcher(w SourceWatcher) RegistryOption {
	return func(r *Registry) { r.watcher = w }
}

// NewRegistry returns a Registry whose watches run until ctx is done.
func NewRegistry(ctx context.Context, o ...RegistryOption) *Registry {
	r := &Registry{
		ctx:       ctx,
		coalesce:  DefaultCoalesce,
		maxGather: DefaultMaxGather,
		timeout:   DefaultTimeout,
		firstList: DefaultFirstListWait,
		pending:   map[User]*gathering{},
		now:       time.Now,
		clusters:  map[string]*Cluster{},
		users:     map[User]string{},
		queues:    map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{},
		deps:      map[User][]clients.Source{},
		watches:   map[clients.Source]sourceWatch{},
	}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// Source returns a controller-runtime source that enqueues managed
// resources of the supplied kind when the cluster they use changes.
func (r *Registry) Source(kind string) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.queues[kind] = q
		return nil
	})
}

// Acquire returns the cluster the credentials reach, starting it if no one
// uses it yet, and records that u uses it. A user that moves to other
// credentials releases the cluster it used before.
func (r *Registry) Acquire(u User, creds *clients.Credentials) *Cluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.users[u]; ok && old != creds.Key {
		r.releaseLocked(u)
	}
	c, ok := r.clusters[creds.Key]
	if !ok {
		key := creds.Key
		r.seq++
		c = newCluster(r.ctx, r.seq, creds.Config, func(kinds ...string) { r.wake(key, kinds...) }, r.timeout, r.now)
		r.clusters[key] = c
	}
	r.users[u] = creds.Key
	return c
}

// Release records that u no longer uses a cluster nor depends on the
// objects its credentials came from. A cluster nobody uses stops its
// watches and closes its connections.
func (r *Registry) Release(u User) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(u)
	r.forgetLocked(u)
}

// A Watch describes the watch of one cluster.
type Watch struct {
	// ID is different for every start of a cluster's watch: a cluster
	// watched again after its watch stopped has a new ID.
	ID uint64
	// Started counts the watches of Nodes and of Peers started for the
	// cluster. A watch that reconnects is not started again.
	Started int64
}

// Watch describes the watch of the cluster of the key, if it is watched.
func (r *Registry) Watch(key string) (Watch, bool) {
	r.mu.Lock()
	c, ok := r.clusters[key]
	r.mu.Unlock()
	if !ok {
		return Watch{}, false
	}
	return Watch{ID: c.id, Started: c.started.Load()}, true
}

func (r *Registry) releaseLocked(u User) {
	key, ok := r.users[u]
	if !ok {
		return
	}
	delete(r.users, u)
	if c, ok := r.clusters[key]; ok {
		c.releaseServices(u)
	}
	for _, k := range r.users {
		if k == key {
			return
		}
	}
	if c, ok := r.clusters[key]; ok {
		c.stop()
		delete(r.clusters, key)
	}
}

// ClusterOf returns the key of the cluster u uses, if any.
func (r *Registry) ClusterOf(u User) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.users[u]
	return k, ok
}

// Watching reports whether the cluster of the key is watched.
func (r *Registry) Watching(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.clusters[key]
	return ok
}

// Reap releases, every interval until ctx is done, the users that no
// longer exist. A managed resource normally releases its cluster when its
// finalizer is removed; a reconcile that raced with the deletion, or a
// finalizer removed by hand, would otherwise keep a watch running forever.
func (r *Registry) Reap(ctx context.Context, interval time.Duration, exists func(ctx context.Context, u User) (bool, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		users := make([]User, 0, len(r.users)+len(r.deps))
		for u := range r.users {
			users = append(users, u)
		}
		for u := range r.deps {
			if _, ok := r.users[u]; !ok {
				users = append(users, u)
			}
		}
		r.mu.Unlock()
		for _, u := range users {
			if ok, err := exists(ctx, u); err == nil && !ok {
				r.Release(u)
			}
		}
	}
}

// wake enqueues every user of the cluster whose kind is among kinds, after
// the coalescing delay. The work queue keeps one entry per user, so a burst
// of changes within the delay costs one reconcile.
func (r *Registry) wake(key string, kinds ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, k := range r.users {
		if k != key {
			continue
		}
		for _, kind := range kinds {
			if kind == u.Kind {
				r.enqueueLocked(u)
			}
		}
	}
}

// WakeAfter reconciles u once d has passed, or sooner if something else
// wakes it: a node's heartbeat turns stale without any event, so its
// inventory asks to look again when the first of them can.
func (r *Registry) WakeAfter(u User, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q, ok := r.queues[u.Kind]; ok {
		q.AddAfter(reconcile.Request{NamespacedName: u.NamespacedName}, d)
	}
}

// A gathering is a wake-up of one user being put off while changes come.
type gathering struct {
	// first is when the first change came, at when the wake-up is due.
	first, at time.Time
	timer     *time.Timer
}

// enqueueLocked reconciles u once no change has come for the coalescing
// delay, or once changes have been gathered for maxGather, whichever is
// first: a burst of changes, or changes that keep coming a little apart,
// cost one reconcile, and a lone change waits only the coalescing delay.
func (r *Registry) enqueueLocked(u User) {
	if _, ok := r.queues[u.Kind]; !ok {
		return
	}
	now := time.Now()
	g, ok := r.pending[u]
	if !ok {
		g = &gathering{first: now, at: now.Add(r.coalesce)}
		r.pending[u] = g
		g.timer = time.AfterFunc(r.coalesce, func() { r.due(u, g) })
		return
	}
	g.at = now.Add(r.coalesce)
	if limit := g.first.Add(max(r.maxGather, r.coalesce)); g.at.After(limit) {
		g.at = limit
	}
	g.timer.Reset(time.Until(g.at))
}

// due ends a gathering when its time has come: a timer that fired just
// before it was put off again leaves it to the later firing.
func (r *Registry) due(u User, g *gathering) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[u] != g {
		return
	}
	if wait := time.Until(g.at); wait > 0 {
		g.timer.Reset(wait)
		return
	}
	delete(r.pending, u)
	if q, ok := r.queues[u.Kind]; ok {
		q.Add(reconcile.Request{NamespacedName: u.NamespacedName})
	}
}

// A ReleasingFinalizer removes the managed resource finalizer only after
// the resource's record of its provider-kubernetes config use is deleted and
// its share of a cluster watch is released.
type ReleasingFinalizer struct {
	resource.Finalizer

	Kind     string
	Usage    *clients.UsageTracker
	Registry *Registry
}

// AddFinalizer adds the finalizer and keeps the status the reconcile has
// set so far (a condition set when connecting, an observation). The write
// returns the resource as stored, without them: the status written at the
// end of the first reconcile would lack them, and the next reconcile would
// write them again, one more watch event of every mesh that composes or
// requires the resource.
func (f ReleasingFinalizer) AddFinalizer(ctx context.Context, obj resource.Object) error {
	if meta.FinalizerExists(obj, managed.FinalizerName) {
		return f.Finalizer.AddFinalizer(ctx, obj)
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return errors.Wrap(err, errKeepStatus)
	}
	if err := f.Finalizer.AddFinalizer(ctx, obj); err != nil {
		return err
	}
	status, ok := before["status"]
	if !ok {
		return nil
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return errors.Wrap(err, errKeepStatus)
	}
	after["status"] = status
	return errors.Wrap(runtime.DefaultUnstructuredConverter.FromUnstructured(after, obj), errKeepStatus)
}

const errKeepStatus = "cannot keep the status across the finalizer's write"

// RemoveFinalizer releases what the managed resource held, then removes the
// finalizer.
func (f ReleasingFinalizer) RemoveFinalizer(ctx context.Context, obj resource.Object) error {
	f.Registry.Release(User{Kind: f.Kind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
	if mg, ok := obj.(resource.ModernManaged); ok {
		if err := f.Usage.Untrack(ctx, mg); err != nil {
			return err
		}
	}
	return f.Finalizer.RemoveFinalizer(ctx, obj)
}

// ControllerRateLimiter is the per-resource retry back-off of the
// controllers that follow member clusters: from 100 ms (crossplane-runtime's
// default starts at a second) to a minute. The most common retry is a
// status write that met a cache a moment behind the previous write; waiting
// a second for it would break the promise of status within about a second.
func ControllerRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, time.Minute)
}
