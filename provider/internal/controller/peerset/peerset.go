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

// Package peerset reconciles PeerSets: managed resources that keep a set of
// Kilo Peers in one member cluster.
package peerset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/metrics"
	"github.com/kilomesh/kilomesh/provider/internal/ownership"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

const (
	errObservePeers = "cannot observe the Peers of the cluster"
	errClient       = "cannot create a client for the cluster"
	errFmtApply     = "cannot apply %d of %d Peers"
	errFmtDelete    = "cannot delete %d of %d Peers"
	errFmtSkipped   = "%d Peers were not written: the cluster stopped answering"
	errFmtDeadline  = "the cluster did not complete the writes of this reconcile within %s; the rest follows at the next one"
	errConvert      = "cannot convert the Peer for apply"
	errFmtApplyPeer = "cannot apply Peer %q"
	errFmtPutPeer   = "cannot replace Peer %q"
	errFmtDelPeer   = "cannot delete Peer %q"
	errMeasure      = "cannot measure spec.forProvider.peers"
	errFmtTooLarge  = "spec.forProvider.peers: the %d Peers take %d bytes, more than the %d one PeerSet can hold (etcd keeps objects of at most 1.5 MiB, managed fields and status included): nothing is applied; split the mesh or select fewer nodes"
	errResolve      = "cannot resolve the SegmentSets the PeerSet references: nothing is applied or deleted"
	errIndex        = "cannot index PeerSets by the SegmentSets they reference"

	errFmtForeignSegments = "the SegmentSet has %s, the PeerSet %s: a PeerSet keeps only the SegmentSets of its own mesh"

	msgFmtTaken = "a Peer named %q was created in the cluster by someone else; it is not taken over"
)

// The status reports at most maxProblems problems, each message cut to
// maxProblemBytes; the Ready condition counts them all.
const (
	maxProblems     = 100
	maxProblemBytes = 1024
)

// ReasonPeerProblems is the reason of a PeerSet's Ready=False condition when
// some desired Peers cannot be applied.
const ReasonPeerProblems xpv2.ConditionReason = "PeerProblems"

// workers is how many Peers are written at once. Thousands of Peers then
// take seconds, not minutes.
const workers = 16

// DefaultWriteDeadline bounds the writes of one reconcile of a PeerSet, all
// of them together: a member that answers its watch but stalls writes holds
// a worker of the provider no longer than this per reconcile, and its sets
// are retried with a growing backoff. 2,000 Peers take a few seconds.
const DefaultWriteDeadline = 10 * time.Second

// maxListed is how many problems a condition message names.
const maxListed = 5

// IndexSegmentSetRefs indexes PeerSets by the names of the SegmentSets they
// reference, so that a changed SegmentSet wakes exactly the PeerSets of its
// namespace that reference it.
const IndexSegmentSetRefs = "spec.forProvider.segmentSetRefs.name"

// Setup adds a controller that reconciles PeerSets. writeDeadline bounds
// the writes of a reconcile; DefaultWriteDeadline when zero. The
// SegmentSets that PeerSets reference are read from the manager's cache,
// which watches them: a changed SegmentSet reconciles the PeerSets that
// reference it, and no other.
func Setup(ctx context.Context, mgr ctrl.Manager, o controller.Options, reg *remote.Registry, usage *clients.UsageTracker, res *clients.Resolver, writeDeadline time.Duration) error {
	name := managed.ControllerName(v1alpha1.PeerSetKind)
	if writeDeadline <= 0 {
		writeDeadline = DefaultWriteDeadline
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.PeerSet{}, IndexSegmentSetRefs, segmentSetRefs); err != nil {
		return errors.Wrap(err, errIndex)
	}
	c := &connector{
		segments:      mgr.GetClient(),
		resolver:      res,
		usage:         usage,
		registry:      reg,
		writeDeadline: writeDeadline,
	}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.PeerSet](c),
		managed.WithInitializers(),
		managed.WithFinalizer(remote.ReleasingFinalizer{
			Finalizer: resource.NewAPIFinalizer(mgr.GetClient(), managed.FinalizerName),
			Kind:      v1alpha1.PeerSetKind,
			Usage:     usage,
			Registry:  reg,
		}),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))), //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		managed.WithPollInterval(o.PollInterval),
	}
	if o.Features != nil && o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		opts = append(opts, managed.WithManagementPolicies())
	}
	if o.MetricOptions != nil && o.MetricOptions.MRMetrics != nil {
		opts = append(opts, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
	}
	r := managed.NewReconciler(mgr, resource.ManagedKind(v1alpha1.PeerSetGroupVersionKind), opts...)

	co := o.ForControllerRuntime()
	co.RateLimiter = remote.ControllerRateLimiter()
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(co).
		For(&v1alpha1.PeerSet{}, builder.WithPredicates(resource.DesiredStateChanged())).
		Watches(&v1alpha1.SegmentSet{}, referencing(mgr.GetClient())).
		WatchesRawSource(reg.Source(v1alpha1.PeerSetKind)).
		Complete(ratelimiter.NewReconciler(name, errors.WithSilentRequeueOnConflict(r), o.GlobalRateLimiter))
}

// segmentSetRefs are the SegmentSets a PeerSet references, for the index.
func segmentSetRefs(o client.Object) []string {
	ps, ok := o.(*v1alpha1.PeerSet)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(ps.Spec.ForProvider.SegmentSetRefs))
	for _, r := range ps.Spec.ForProvider.SegmentSetRefs {
		out = append(out, r.Name)
	}
	return out
}

// segmentDelay is how long a changed SegmentSet waits before the PeerSets
// that reference it are reconciled. function-kilomesh writes a mesh's
// SegmentSets and PeerSets in one pass: a PeerSet applied with its new
// SegmentSets but its old spec (or the reverse) would keep, for a moment, a
// form of a Peer that is neither the old one nor the new one. The delay
// lets the PeerSets' own changes land first, and gathers the SegmentSets of
// one pass into one reconcile.
const segmentDelay = 300 * time.Millisecond

// referencing enqueues, after segmentDelay, the PeerSets of a SegmentSet's
// namespace that reference it.
func referencing(c client.Reader) handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		l := &v1alpha1.PeerSetList{}
		if err := c.List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexSegmentSetRefs: o.GetName()}); err != nil {
			return
		}
		for _, ps := range l.Items {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ps.Namespace, Name: ps.Name}}, segmentDelay)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e ctrlevent.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e ctrlevent.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e ctrlevent.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

type connector struct {
	// segments reads SegmentSets, from the manager's cache.
	segments      client.Reader
	resolver      *clients.Resolver
	usage         *clients.UsageTracker
	registry      *remote.Registry
	writeDeadline time.Duration
}

// Connect returns an external client of the set's cluster.
func (c *connector) Connect(ctx context.Context, cr *v1alpha1.PeerSet) (managed.TypedExternalClient[*v1alpha1.PeerSet], error) {
	u := remote.User{Kind: v1alpha1.PeerSetKind, NamespacedName: types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}}
	creds, sources, err := c.resolver.Resolve(ctx, cr)
	// The config and Secret are watched even when they are wrong, so that
	// their repair is noticed at once.
	c.registry.Depend(u, sources) //nolint:contextcheck // The watches outlive the reconcile: they run until the registry stops.
	if err != nil {
		return nil, err
	}
	if !meta.WasDeleted(cr) {
		if err := c.usage.Track(ctx, cr); err != nil {
			return nil, err
		}
	}
	cl := c.registry.Acquire(u, creds)
	kc, err := cl.Client()
	if err != nil {
		return nil, errors.Wrap(err, errClient)
	}
	return &external{peers: cl, kube: kc, segments: c.segments, origin: creds.Origin, manager: ownership.FieldManager(cr.GetNamespace(), cr.GetName()), writeDeadline: c.writeDeadline}, nil
}

// PeerLister lists the Peers of a cluster.
type PeerLister interface {
	Peers(ctx context.Context) ([]*kilov1alpha1.Peer, error)
	// PeersIncomplete names the bounds that left Peers of the cluster
	// unread, or is empty.
	PeersIncomplete() string
}

// An external keeps one set's Peers in its cluster. It reads the cluster
// through the shared watch and writes through kube.
type external struct {
	peers PeerLister
	kube  client.Client
	// segments reads the SegmentSets of the control plane.
	segments client.Reader
	// origin names the credentials, to explain a refusal.
	origin string
	// manager is the set's own field manager.
	manager string
	// writeDeadline bounds the writes of one reconcile.
	writeDeadline time.Duration

	// plan is the result of the last Observe, used by the Create, Update or
	// Delete of the same reconcile, and selector the set's selector.
	plan     Plan
	selector map[string]string
	// ready is the set's Ready condition as the reconcile found it.
	ready xpv2.Condition
}

// Observe compares the set with the Peers of the cluster. A set whose
// selector reaches beyond its own namespace's meshes, or whose Peers would
// not fit one object, is refused before anything is written. An error that
// quotes the cluster is cut to remote.MaxErrorBytes, as are those of
// Create, Update and Delete: each becomes the Synced condition's message.
func (e *external) Observe(ctx context.Context, cr *v1alpha1.PeerSet) (managed.ExternalObservation, error) {
	o, err := e.observe(ctx, cr)
	return o, remote.CutError(err)
}

func (e *external) observe(ctx context.Context, cr *v1alpha1.PeerSet) (managed.ExternalObservation, error) {
	selector, err := ownership.Selector(cr.GetNamespace(), cr.Spec.ForProvider.Selector)
	if err != nil {
		if meta.WasDeleted(cr) {
			// A set that was always refused never wrote a Peer.
			return managed.ExternalObservation{ResourceExists: false}, nil
		}
		return managed.ExternalObservation{}, err
	}
	params := cr.Spec.ForProvider
	if !meta.WasDeleted(cr) {
		if err := checkSize(params); err != nil {
			return managed.ExternalObservation{}, err
		}
		// A set being deleted deletes what it owns, whatever it keeps.
		peers, err := e.resolve(ctx, cr)
		if err != nil {
			return managed.ExternalObservation{}, errors.Wrap(err, errResolve)
		}
		params.Peers = peers
	}
	params.SegmentSetRefs = nil
	actual, err := e.peers.Peers(ctx)
	switch {
	case meta.WasDeleted(cr) && errors.Is(err, remote.ErrPeerCRDMissing):
		// Without the CRD there is no Peer left to delete.
		return managed.ExternalObservation{ResourceExists: false}, nil
	case errors.Is(err, remote.ErrPending) && !meta.WasDeleted(cr) && cr.GetCondition(xpv2.TypeSynced).Status != corev1.ConditionFalse:
		// The cluster has not answered the watch yet: nothing is known,
		// so nothing is written and nothing changes. The end of the first
		// list, or its failure, wakes the set again.
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	case err != nil:
		// A set that cannot read its cluster does nothing: above all, it
		// deletes no Peer.
		return managed.ExternalObservation{}, errors.Wrap(clients.Explain(err, e.origin), errObservePeers)
	}
	params.Selector = selector
	e.plan = NewPlan(params, actual, e.peers.PeersIncomplete())
	e.selector = selector
	if meta.WasDeleted(cr) {
		return managed.ExternalObservation{ResourceExists: len(e.plan.Owned) > 0}, nil
	}
	e.ready = cr.GetCondition(xpv2.TypeReady)
	setStatus(cr, e.plan.Desired, e.plan.Applied, e.plan.Problems, e.ready)
	// The set "exists" from the start: its Peers are created by Update,
	// which keeps Crossplane's creation annotations (and their writes) out
	// of a resource that is only ever re-applied.
	return managed.ExternalObservation{
		ResourceExists:   true,
		ResourceUpToDate: e.plan.UpToDate(),
		Diff:             e.diff(),
	}, nil
}

// checkSize refuses desired Peers that one PeerSet cannot hold
// (v1alpha1.MaxPeersBytes, measured by TestPeerSetBytes), before anything is
// written, instead of applying them and then failing to record the set.
// What the set stores counts: its own Peers and its references; the Peers
// of the SegmentSets it references are bounded by
// v1alpha1.MaxResolvedPeers when they are resolved.
func checkSize(params v1alpha1.PeerSetParameters) error {
	peers := params.Peers
	b, err := json.Marshal(peers)
	if err != nil {
		return errors.Wrap(err, errMeasure)
	}
	n := len(b)
	if len(params.SegmentSetRefs) > 0 {
		r, err := json.Marshal(params.SegmentSetRefs)
		if err != nil {
			return errors.Wrap(err, errMeasure)
		}
		n += len(r)
	}
	if n > v1alpha1.MaxPeersBytes {
		return errors.Errorf(errFmtTooLarge, len(peers), n, v1alpha1.MaxPeersBytes)
	}
	return nil
}

// resolve returns every Peer the set keeps: its own, and those of the
// SegmentSets of its own namespace that it references. A reference never
// leaves the set's namespace: a tenant's PeerSet reaches only its own
// namespace's SegmentSets, and their Peers then meet exactly the rules of
// its own. Within the namespace, a set keeps only SegmentSets composed with
// it: those with its own controller (its mesh), or, for a set made by
// hand, SegmentSets made by hand. Another mesh's SegmentSets, or one
// written by hand under a name a mesh's PeerSet references, are refused.
// The SegmentSets are the cache's own objects, not copies (see
// controller.ManagerOptions): the Peers returned share their lists and
// maps, which NewPlan only reads (TestNewPlan checks it).
func (e *external) resolve(ctx context.Context, cr *v1alpha1.PeerSet) ([]v1alpha1.DesiredPeer, error) {
	owner := metav1.GetControllerOf(cr)
	return v1alpha1.ResolvePeers(&cr.Spec.ForProvider, func(name string) (*v1alpha1.SegmentSet, error) {
		s := &v1alpha1.SegmentSet{}
		err := e.segments.Get(ctx, types.NamespacedName{Namespace: cr.GetNamespace(), Name: name}, s)
		if kerrors.IsNotFound(err) {
			return nil, nil // not there: ResolvePeers says which reference
		}
		if err != nil {
			return nil, err
		}
		if c := metav1.GetControllerOf(s); !sameController(owner, c) {
			return nil, &v1alpha1.SegmentSetRefusedError{Detail: fmt.Sprintf(errFmtForeignSegments, controllerName(c), controllerName(owner))}
		}
		return s, nil
	})
}

// sameController tells whether two objects have the same controller, or
// both none.
func sameController(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.UID == b.UID
}

// controllerName names a controller by kind and name, for a message.
func controllerName(c *metav1.OwnerReference) string {
	if c == nil {
		return "no controller"
	}
	return c.Kind + " " + c.Name
}

func (e *external) diff() string {
	if e.plan.UpToDate() {
		return ""
	}
	return fmt.Sprintf("%d Peers to apply, %d to delete", len(e.plan.Apply), len(e.plan.Delete))
}

// Create applies the set; see Update.
func (e *external) Create(ctx context.Context, cr *v1alpha1.PeerSet) (managed.ExternalCreation, error) {
	_, err := e.Update(ctx, cr)
	return managed.ExternalCreation{}, err
}

// Update applies the desired Peers that are missing or differ and deletes
// the owned Peers no longer desired. A Peer the API server rejects, or whose
// name someone else took meanwhile, is reported as a problem; the others are
// still applied. Once the cluster stops answering, or the writes of this
// reconcile have taken writeDeadline, nothing more is tried: the reconcile
// fails, and the rest follows at the next, after a backoff.
func (e *external) Update(ctx context.Context, cr *v1alpha1.PeerSet) (_ managed.ExternalUpdate, err error) {
	wctx, cancel := context.WithTimeout(ctx, e.deadlineOrDefault())
	defer cancel()
	defer observeApply(time.Now(), &err)
	out := e.applyAll(wctx, e.plan.Apply)
	problems := append(append([]v1alpha1.PeerProblem(nil), e.plan.Problems...), out.rejected...)
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Peer < problems[j].Peer })
	setStatus(cr, e.plan.Desired, e.plan.Applied+out.applied, problems, e.ready)

	var errs []error
	if len(out.failed) > 0 {
		errs = append(errs, errors.Wrapf(errors.Join(out.failed...), errFmtApply, len(out.failed), len(e.plan.Apply)))
	}
	if out.skipped > 0 {
		errs = append(errs, errors.Errorf(errFmtSkipped, out.skipped))
	} else if derr, skipped := e.deleteAll(wctx, e.plan.Delete); len(derr) > 0 || skipped > 0 {
		errs = append(errs, deleteError(derr, skipped, len(e.plan.Delete)))
	}
	if len(errs) > 0 {
		return managed.ExternalUpdate{}, remote.CutError(e.deadline(wctx, errors.Join(errs...)))
	}
	return managed.ExternalUpdate{}, nil
}

// Delete deletes every Peer the set owns, and nothing else, within the
// write deadline of a reconcile.
func (e *external) Delete(ctx context.Context, _ *v1alpha1.PeerSet) (managed.ExternalDelete, error) {
	wctx, cancel := context.WithTimeout(ctx, e.deadlineOrDefault())
	defer cancel()
	if derr, skipped := e.deleteAll(wctx, e.plan.Owned); len(derr) > 0 || skipped > 0 {
		return managed.ExternalDelete{}, remote.CutError(e.deadline(wctx, deleteError(derr, skipped, len(e.plan.Owned))))
	}
	return managed.ExternalDelete{}, nil
}

// observeApply records in the apply-duration metric how long the writes of
// a reconcile that began at start took, and whether they all succeeded.
func observeApply(start time.Time, err *error) {
	result := metrics.ResultOK
	if *err != nil {
		result = metrics.ResultError
	}
	metrics.ApplyDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

func (e *external) deadlineOrDefault() time.Duration {
	if e.writeDeadline <= 0 {
		return DefaultWriteDeadline
	}
	return e.writeDeadline
}

// deadline says so first when the writes' deadline ended them: the
// requests' own errors say only that they were cancelled.
func (e *external) deadline(wctx context.Context, err error) error {
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return errors.Wrapf(err, errFmtDeadline, e.deadlineOrDefault())
	}
	return err
}

func deleteError(errs []error, skipped, total int) error {
	failed := len(errs)
	if skipped > 0 {
		errs = append(errs, errors.Errorf(errFmtSkipped, skipped))
	}
	return errors.Wrapf(errors.Join(errs...), errFmtDelete, failed+skipped, total)
}

// Disconnect does nothing: the watch is shared and outlives a reconcile.
func (e *external) Disconnect(_ context.Context) error { return nil }

// applied is the outcome of applyAll.
type applied struct {
	// rejected are the Peers the API server rejected or whose name someone
	// else took.
	rejected []v1alpha1.PeerProblem
	// failed are the errors that may pass on a retry.
	failed []error
	// skipped counts the Peers not tried once the cluster stopped
	// answering.
	skipped int
	// applied counts the Peers written as desired: not those written with
	// routes withheld.
	applied int
}

// applyAll applies the changes, several at a time.
func (e *external) applyAll(ctx context.Context, changes []Change) applied {
	var (
		mu  sync.Mutex
		out applied
	)
	out.skipped = forEach(len(changes), func(i int) error {
		err := e.apply(ctx, changes[i])
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			if !changes[i].Partial {
				out.applied++
			}
			return nil
		}
		switch {
		case kerrors.IsAlreadyExists(err):
			out.rejected = append(out.rejected, v1alpha1.PeerProblem{Peer: changes[i].Want.Name, Reason: v1alpha1.ReasonPeerNameConflict, Message: fmt.Sprintf(msgFmtTaken, changes[i].Want.Name)})
		case kerrors.IsInvalid(err) || kerrors.IsBadRequest(err):
			out.rejected = append(out.rejected, v1alpha1.PeerProblem{Peer: changes[i].Want.Name, Reason: v1alpha1.ReasonPeerInvalid, Message: err.Error()})
		default:
			out.failed = append(out.failed, err)
		}
		return err
	})
	return out
}

// apply writes one Peer with the set's own field manager.
//
// A new Peer is created, never applied: a Peer someone else created under
// the same name since the watch last looked makes the create fail instead
// of being taken over, even when its content is the same (an apply without
// force would adopt an identical object). An owned Peer is applied with
// force and with its resource version as a precondition, so a Peer that
// changed hands in the meantime is not touched either. Server-side apply
// leaves fields that another manager added (a hand edit adding a field
// this set does not set); when the result still differs, the Peer is
// replaced with an update.
func (e *external) apply(ctx context.Context, c Change) error {
	if c.Have == nil {
		p := c.Want.DeepCopy()
		if err := e.kube.Create(ctx, p, client.FieldOwner(e.manager)); err != nil {
			return errors.Wrapf(err, errFmtApplyPeer, c.Want.Name)
		}
		return nil
	}
	u, err := toUnstructured(c.Want)
	if err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(e.manager), client.ForceOwnership}
	u.SetResourceVersion(c.Have.ResourceVersion)
	err = e.kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)
	if kerrors.IsConflict(err) {
		// The watch lagged behind a change (often this set's own last
		// apply): look again, and apply once more if the Peer is still ours.
		fresh := &kilov1alpha1.Peer{}
		if gerr := e.kube.Get(ctx, client.ObjectKey{Name: c.Want.Name}, fresh); gerr != nil {
			return errors.Wrapf(gerr, errFmtApplyPeer, c.Want.Name)
		}
		if !Owns(e.selector, fresh) {
			return errors.Wrapf(err, errFmtApplyPeer, c.Want.Name)
		}
		if Matches(fresh, c.Want) {
			return nil
		}
		u.SetResourceVersion(fresh.ResourceVersion)
		err = e.kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)
	}
	if err != nil {
		return errors.Wrapf(err, errFmtApplyPeer, c.Want.Name)
	}
	got := &kilov1alpha1.Peer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got); err != nil {
		return errors.Wrap(err, errConvert)
	}
	if Matches(got, c.Want) {
		return nil
	}
	got.Spec = *c.Want.Spec.DeepCopy()
	for k, v := range c.Want.Labels {
		if got.Labels == nil {
			got.Labels = map[string]string{}
		}
		got.Labels[k] = v
	}
	if err := e.kube.Update(ctx, got, client.FieldOwner(e.manager)); err != nil {
		return errors.Wrapf(err, errFmtPutPeer, c.Want.Name)
	}
	return nil
}

// deleteAll deletes the Peers, each only if it is still the object the
// watch saw (same UID and resource version), so a Peer that lost the set's
// labels in the meantime is never deleted. It returns the errors, and how
// many Peers it did not try once the cluster stopped answering.
func (e *external) deleteAll(ctx context.Context, peers []*kilov1alpha1.Peer) ([]error, int) {
	var (
		mu   sync.Mutex
		errs []error
	)
	skipped := forEach(len(peers), func(i int) error {
		p := peers[i]
		rv := p.ResourceVersion
		err := e.kube.Delete(ctx, &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: p.Name}},
			client.Preconditions{UID: &p.UID, ResourceVersion: &rv})
		if kerrors.IsConflict(err) {
			// The watch lagged behind a change: delete only if the Peer is
			// still this set's own.
			fresh := &kilov1alpha1.Peer{}
			if gerr := e.kube.Get(ctx, client.ObjectKey{Name: p.Name}, fresh); gerr != nil {
				err = gerr
			} else if Owns(e.selector, fresh) {
				frv := fresh.ResourceVersion
				err = e.kube.Delete(ctx, fresh, client.Preconditions{UID: &fresh.UID, ResourceVersion: &frv})
			} else {
				err = nil
			}
		}
		if resource.IgnoreNotFound(err) != nil {
			mu.Lock()
			errs = append(errs, errors.Wrapf(err, errFmtDelPeer, p.Name))
			mu.Unlock()
			return err
		}
		return nil
	})
	return errs, skipped
}

// forEach calls fn for 0 to n-1, several at a time. Once a call fails
// without an answer from the API server (a timeout, a refused connection),
// no further call is made: a cluster that stopped answering would make each
// of them wait out its timeout. It returns how many calls it did not make.
func forEach(n int, fn func(i int) error) int {
	next := make(chan int)
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil && !remote.Answered(err) {
					stopped.Store(true)
				}
			}
		}()
	}
	skipped := 0
	for i := range n {
		if stopped.Load() {
			skipped = n - i
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return skipped
}

func toUnstructured(p *kilov1alpha1.Peer) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.Spec)
	if err != nil {
		return nil, errors.Wrap(err, errConvert)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(kilov1alpha1.APIVersion)
	u.SetKind(kilov1alpha1.Kind)
	u.SetName(p.Name)
	u.SetLabels(p.Labels)
	return u, nil
}

// setStatus records the outcome and sets Ready: True when every desired
// Peer is applied, False with the problems when some cannot be. The status
// lists at most maxProblems of them, each message cut; the condition
// counts them all. A reconcile that applies changes passes through "not
// all applied" before it ends where it began: the condition then keeps
// the time it had when the reconcile began (before), so that a status
// that ends as it began is not written again (every write of a composed
// resource's status is a watch event of its mesh).
func setStatus(cr *v1alpha1.PeerSet, desired, applied int, problems []v1alpha1.PeerProblem, before xpv2.Condition) {
	listed := make([]v1alpha1.PeerProblem, 0, min(len(problems), maxProblems))
	for _, p := range problems[:min(len(problems), maxProblems)] {
		p.Message = safetext.Message(p.Message, maxProblemBytes)
		listed = append(listed, p)
	}
	if len(listed) == 0 {
		listed = nil
	}
	cr.Status.AtProvider = v1alpha1.PeerSetObservation{Desired: desired, Applied: applied, Problems: listed}
	var c xpv2.Condition
	switch {
	case len(problems) > 0:
		c = xpv2.Condition{
			Type:               xpv2.TypeReady,
			Status:             corev1.ConditionFalse,
			LastTransitionTime: metav1.Now(),
			Reason:             ReasonPeerProblems,
			Message:            problemMessage(desired, problems),
		}
	case applied < desired:
		c = xpv2.Unavailable().WithMessage(fmt.Sprintf("%d of %d Peers are applied", applied, desired))
	default:
		c = xpv2.Available()
	}
	if c.Equal(before) {
		c = before
	}
	cr.SetConditions(c)
}

func problemMessage(desired int, problems []v1alpha1.PeerProblem) string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "%d of %d Peers are not applied: ", len(problems), desired)
	for i, p := range problems {
		if i == maxListed {
			fmt.Fprintf(b, "; and %d more (see status.atProvider.problems)", len(problems)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(b, "%s: %s: %s", p.Peer, p.Reason, safetext.Message(p.Message, maxProblemBytes))
	}
	return b.String()
}
