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

// Package nodeinventory reconciles NodeInventories: observe-only managed
// resources that publish the Nodes of one member cluster.
package nodeinventory

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"

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
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/inventory"
)

// MaxStatusBytes is the most status an inventory publishes. etcd refuses
// objects over 1.5 MiB by default; the rest is left for metadata, spec and
// conditions. Beyond it an inventory reports the problem instead of failing
// every write.
const MaxStatusBytes = 1_300_000

const (
	errFmtTooLarge  = "the %d selected Nodes need %d bytes of status, more than the %d one object can hold: split the cluster across NodeInventories with spec.forProvider.nodeSelector"
	errMarshal      = "cannot measure the status"
	errSelector     = "spec.forProvider.nodeSelector is not a valid label selector"
	errObserveNodes = "cannot observe the Nodes of the cluster"
	errObservePeers = "cannot observe the Peers of the cluster"
)

// DefaultEvidenceInterval is how often an inventory publishes at most a
// change that is only evidence (see inventory.EvidenceOnly): once per
// Kilo check-in period.
const DefaultEvidenceInterval = 30 * time.Second

// Setup adds a controller that reconciles NodeInventories. The clock now
// tells whether a node's heartbeat is stale. A change that is only evidence
// is published at most once per evidence interval (0: at once, like any
// other change).
func Setup(mgr ctrl.Manager, o controller.Options, reg *remote.Registry, usage *clients.UsageTracker, res *clients.Resolver, now func() time.Time, evidence time.Duration) error {
	name := managed.ControllerName(v1alpha1.NodeInventoryKind)
	c := &connector{
		resolver: res,
		usage:    usage,
		registry: reg,
		now:      now,
		evidence: evidence,
	}
	opts := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.NodeInventory](c),
		// The inventory has no external name: it is a view of a cluster.
		managed.WithInitializers(),
		managed.WithFinalizer(remote.ReleasingFinalizer{
			Finalizer: resource.NewAPIFinalizer(mgr.GetClient(), managed.FinalizerName),
			Kind:      v1alpha1.NodeInventoryKind,
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
	r := managed.NewReconciler(mgr, resource.ManagedKind(v1alpha1.NodeInventoryGroupVersionKind), opts...)

	co := o.ForControllerRuntime()
	co.RateLimiter = remote.ControllerRateLimiter()
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(co).
		For(&v1alpha1.NodeInventory{}, builder.WithPredicates(resource.DesiredStateChanged())).
		WatchesRawSource(reg.Source(v1alpha1.NodeInventoryKind)).
		Complete(ratelimiter.NewReconciler(name, errors.WithSilentRequeueOnConflict(r), o.GlobalRateLimiter))
}

// A connector resolves an inventory's cluster and hands out its shared
// watch.
type connector struct {
	resolver *clients.Resolver
	usage    *clients.UsageTracker
	registry *remote.Registry
	now      func() time.Time
	evidence time.Duration
}

// Connect returns an external client that reads the inventory's cluster. A
// deleted inventory needs no cluster at all: it is only a view, so its
// deletion finishes even when its config or cluster is gone.
func (c *connector) Connect(ctx context.Context, cr *v1alpha1.NodeInventory) (managed.TypedExternalClient[*v1alpha1.NodeInventory], error) {
	if meta.WasDeleted(cr) {
		return &deleted{}, nil
	}
	u := remote.User{Kind: v1alpha1.NodeInventoryKind, NamespacedName: types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}}
	creds, sources, err := c.resolver.Resolve(ctx, cr)
	// The config and Secret are watched even when they are wrong, so that
	// their repair is noticed at once.
	c.registry.Depend(u, sources) //nolint:contextcheck // The watches outlive the reconcile: they run until the registry stops.
	if err != nil {
		cr.SetConditions(credentials(err))
		return nil, err
	}
	cr.SetConditions(credentials(nil))
	if err := c.usage.Track(ctx, cr); err != nil {
		return nil, err
	}
	return &external{
		cluster:  c.registry.Acquire(u, creds),
		origin:   creds.Origin,
		now:      c.now,
		maxBytes: MaxStatusBytes,
		wakeAfter: func(d time.Duration) {
			c.registry.WakeAfter(u, d)
		},
		firstListWait:    c.registry.FirstListWait(),
		evidenceInterval: c.evidence,
	}, nil
}

// credentials is the CredentialsAccepted condition after resolving the
// inventory's credentials: False when provider-kilomesh cannot use them (its
// checks refuse them, or their config or Secret cannot be read), with the
// error, which names configs and Secrets, never what they hold. The
// inventory's owner hands nothing to any provider for the member while it
// is False: the same credentials would deliver its Peers.
func credentials(err error) xpv2.Condition {
	if err != nil {
		return xpv2.Condition{
			Type:               v1alpha1.TypeCredentialsAccepted,
			Status:             corev1.ConditionFalse,
			LastTransitionTime: metav1.Now(),
			Reason:             v1alpha1.ReasonCredentialsRefused,
			Message:            safetext.Message(err.Error(), maxConditionMessage),
		}
	}
	return xpv2.Condition{
		Type:               v1alpha1.TypeCredentialsAccepted,
		Status:             corev1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             v1alpha1.ReasonCredentialsAccepted,
	}
}

// maxConditionMessage is how long the CredentialsAccepted message grows.
const maxConditionMessage = 1024

// A Cluster is the part of a member cluster an inventory reads.
type Cluster interface {
	Nodes(ctx context.Context) ([]*corev1.Node, error)
	Peers(ctx context.Context) ([]*kilov1alpha1.Peer, error)
	// NodesIncomplete and PeersIncomplete name the bounds that left Nodes
	// or Peers of the cluster out of its watch, or are empty.
	NodesIncomplete() string
	PeersIncomplete() string
	// NodesAnsweringSince is when the cluster last began answering its
	// Node watch without a failure since; zero when unknown.
	NodesAnsweringSince() time.Time
	// AwaitFirstLists waits, at most d, until the watches started so far
	// have listed or failed.
	AwaitFirstLists(ctx context.Context, d time.Duration)
}

// An external observes one inventory's cluster through its shared watch.
type external struct {
	cluster Cluster
	// origin names the credentials, to explain a refusal.
	origin   string
	now      func() time.Time
	maxBytes int
	// wakeAfter observes the inventory again after a while: a node's
	// heartbeat turns stale without any event.
	wakeAfter func(d time.Duration)
	// firstListWait is how long the first observation of a new inventory
	// waits for its cluster's first lists, so that its first status holds
	// the member's Nodes (remote.DefaultFirstListWait).
	firstListWait time.Duration
	// evidenceInterval is how long after its last write an inventory holds
	// back a change that is only evidence; 0 holds back nothing.
	evidenceInterval time.Duration
}

// Observe publishes the cluster's Nodes (and foreign Peers) in the
// inventory's status. Status changes only when a published field changes
// (or when the inventory recovers from an error), so the heartbeats of Kilo
// and the kubelet cause no writes; a node whose heartbeat goes stale or
// fresh again is a change. An error that quotes the cluster is cut to
// remote.MaxErrorBytes: it becomes the Synced condition's message.
func (e *external) Observe(ctx context.Context, cr *v1alpha1.NodeInventory) (managed.ExternalObservation, error) {
	o, err := e.observe(ctx, cr)
	return o, remote.CutError(err)
}

func (e *external) observe(ctx context.Context, cr *v1alpha1.NodeInventory) (managed.ExternalObservation, error) {
	// An absent selector selects every Node (LabelSelectorAsSelector
	// would select none).
	sel := labels.Everything()
	if s := cr.Spec.ForProvider.NodeSelector; s != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return managed.ExternalObservation{}, errors.Wrap(err, errSelector)
		}
	}
	nodes, err := e.cluster.Nodes(ctx)
	if errors.Is(err, remote.ErrPending) && cr.Status.AtProvider.ObservedAt == nil {
		// A new inventory: its first status says what it observed, not
		// that it waits.
		if len(cr.Spec.ForProvider.OwnedPeerLabels) > 0 {
			_, _ = e.cluster.Peers(ctx) // starts the watch of Peers too
		}
		e.cluster.AwaitFirstLists(ctx, e.firstListWait)
		nodes, err = e.cluster.Nodes(ctx)
	}
	if errors.Is(err, remote.ErrPending) {
		return pending(cr, err)
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(clients.Explain(err, e.origin), errObserveNodes)
	}
	foreign, foreignIncomplete, peers, peersKnown, err := e.foreign(ctx, cr)
	if errors.Is(err, remote.ErrPending) {
		return pending(cr, err)
	}
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	now := e.now()
	observed, cut := inventory.ObserveNodes(nodes, sel, now)
	nodesIncomplete := inventory.JoinReasons(e.cluster.NodesIncomplete(), cut)
	next, ok := inventory.NextStale(nodes, sel, now)
	if until, graced := e.grace(cr, observed, now); graced && (!ok || until.Before(next)) {
		next, ok = until, true
	}
	if ok && e.wakeAfter != nil {
		e.wakeAfter(next.Sub(now))
	}
	keepStaleSince(cr.Status.AtProvider.Nodes, observed)

	at := &cr.Status.AtProvider
	recovering := cr.GetCondition(xpv2.TypeSynced).Status != corev1.ConditionTrue
	if recovering || !published(at, observed, foreign, nodesIncomplete, foreignIncomplete) {
		if !recovering && e.holdEvidence(cr, observed, foreign, nodesIncomplete, foreignIncomplete, peers, peersKnown, now) {
			cr.SetConditions(xpv2.Available())
			return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
		}
		if err := e.write(at, observed, foreign, nodesIncomplete, foreignIncomplete, now); err != nil {
			return managed.ExternalObservation{}, err
		}
	}
	cr.SetConditions(xpv2.Available())
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// write puts an observation into the status, unless it is larger than one
// object can hold.
func (e *external) write(at *v1alpha1.NodeInventoryObservation, observed []v1alpha1.ObservedNode, foreign []v1alpha1.ForeignPeer, nodesIncomplete, foreignIncomplete string, now time.Time) error {
	next := v1alpha1.NodeInventoryObservation{
		ObservedAt:             &metav1.Time{Time: now.UTC().Truncate(time.Second)},
		NodeCount:              len(observed),
		Nodes:                  observed,
		ForeignPeers:           foreign,
		ForeignPeersIncomplete: foreignIncomplete,
		NodesIncomplete:        nodesIncomplete,
	}
	b, err := json.Marshal(next)
	if err != nil {
		return errors.Wrap(err, errMarshal)
	}
	if len(b) > e.maxBytes {
		return errors.Errorf(errFmtTooLarge, len(observed), len(b), e.maxBytes)
	}
	*at = next
	return nil
}

// published reports whether the status holds exactly this observation,
// observedAt apart. A status without the count (an earlier version's) is
// not: it is written once.
func published(at *v1alpha1.NodeInventoryObservation, observed []v1alpha1.ObservedNode, foreign []v1alpha1.ForeignPeer, nodesIncomplete, foreignIncomplete string) bool {
	return at.ObservedAt != nil && at.NodeCount == len(observed) &&
		equality.Semantic.DeepEqual(at.Nodes, observed) &&
		equality.Semantic.DeepEqual(at.ForeignPeers, foreign) &&
		at.NodesIncomplete == nodesIncomplete && at.ForeignPeersIncomplete == foreignIncomplete
}

// foreign returns the foreign Peers of the cluster, and the bounds that
// left some of them out, for an inventory with owned labels; and all the
// Peers of the cluster, and whether they are known (they are watched only
// for an inventory with owned labels).
func (e *external) foreign(ctx context.Context, cr *v1alpha1.NodeInventory) ([]v1alpha1.ForeignPeer, string, []*kilov1alpha1.Peer, bool, error) {
	if len(cr.Spec.ForProvider.OwnedPeerLabels) == 0 {
		return nil, "", nil, false, nil
	}
	peers, err := e.cluster.Peers(ctx)
	switch {
	case errors.Is(err, remote.ErrPeerCRDMissing):
		// A cluster without Kilo's Peer has no Peer in anyone's way.
		return nil, "", nil, true, nil
	case errors.Is(err, remote.ErrPending):
		return nil, "", nil, false, err
	case err != nil:
		return nil, "", nil, false, errors.Wrap(clients.Explain(err, e.origin), errObservePeers)
	}
	foreign, cut := inventory.ObserveForeignPeers(peers, cr.Spec.ForProvider.OwnedPeerLabels)
	incomplete := inventory.JoinReasons(e.cluster.PeersIncomplete(), cut)
	// Peers left out of the watch may hold any key: none is known.
	return foreign, incomplete, peers, e.cluster.PeersIncomplete() == "", nil
}

// holdEvidence reports whether the inventory keeps its status although
// the observation differs: only discovered endpoints that decide no Peer
// changed (inventory.EvidenceOnly), and the inventory was written less
// than the evidence interval ago. It then observes the inventory again
// when the interval ends, so the evidence is published then, unless a
// change that decides a Peer publishes it first. Kilo's agents write their
// discovered endpoints with every handshake they learn of as they start:
// without this each of those writes would reach the mesh.
func (e *external) holdEvidence(cr *v1alpha1.NodeInventory, observed []v1alpha1.ObservedNode, foreign []v1alpha1.ForeignPeer, nodesIncomplete, foreignIncomplete string, peers []*kilov1alpha1.Peer, peersKnown bool, now time.Time) bool {
	at := &cr.Status.AtProvider
	if e.evidenceInterval <= 0 || at.ObservedAt == nil || at.NodeCount != len(observed) ||
		!equality.Semantic.DeepEqual(at.ForeignPeers, foreign) ||
		at.NodesIncomplete != nodesIncomplete || at.ForeignPeersIncomplete != foreignIncomplete {
		return false
	}
	// A last write in the future (a clock that moved back) holds nothing
	// back: the write that follows puts observedAt at now.
	due := at.ObservedAt.Add(e.evidenceInterval)
	if at.ObservedAt.After(now) || !now.Before(due) || !inventory.EvidenceOnly(at.Nodes, observed, peers, peersKnown) {
		return false
	}
	if e.wakeAfter != nil {
		e.wakeAfter(due.Sub(now))
	}
	return true
}

// keepStaleSince keeps the moment a node turned stale for as long as it
// stays stale: only a transition to stale sets it, so that a heartbeat
// written while the node stays stale, or a clock that moves, writes
// nothing.
func keepStaleSince(published, observed []v1alpha1.ObservedNode) {
	since := make(map[string]*metav1.Time, len(published))
	for _, n := range published {
		if n.Stale && n.StaleSince != nil {
			since[n.Name] = n.StaleSince
		}
	}
	for i := range observed {
		if s, ok := since[observed[i].Name]; ok && observed[i].Stale {
			observed[i].StaleSince = s.DeepCopy()
		}
	}
}

// grace keeps a node the inventory last published as fresh in that state until its
// cluster has answered for a whole heartbeat period: Kilo's agents cannot
// write their heartbeats while their API server does not answer (nor can
// the inventory see them while its watch is down), so after an outage, or
// a provider restart, every heartbeat looks old until the agents check in
// again. Marking those nodes stale would remove an unreachable member's
// Peers everywhere the moment it comes back. A node already published
// stale, or an inventory that never published, follows Kilo's rule at
// once. grace returns when the grace ends, if it spared a node.
func (e *external) grace(cr *v1alpha1.NodeInventory, observed []v1alpha1.ObservedNode, now time.Time) (time.Time, bool) {
	at := cr.Status.AtProvider
	since := e.cluster.NodesAnsweringSince()
	if at.ObservedAt == nil || since.IsZero() {
		return time.Time{}, false
	}
	ends := since.Add(inventory.StaleAfter)
	if !now.Before(ends) {
		return time.Time{}, false
	}
	wasStale := make(map[string]bool, len(at.Nodes))
	for _, n := range at.Nodes {
		wasStale[n.Name] = n.Stale
	}
	spared := false
	for i := range observed {
		if observed[i].Stale && !wasStale[observed[i].Name] {
			observed[i].Stale = false
			observed[i].StaleSince = nil
			spared = true
		}
	}
	return ends, spared
}

// pending is the observation of an inventory whose cluster has not
// answered its watch yet. Nothing is known, so nothing changes: the end of
// the first list, or its failure, wakes the inventory again. Only an
// inventory that already reports an error goes on reporting one, so that a
// member which cannot be reached is never shown as synced in between.
func pending(cr *v1alpha1.NodeInventory, err error) (managed.ExternalObservation, error) {
	if c := cr.GetCondition(xpv2.TypeSynced); c.Status == corev1.ConditionFalse {
		return managed.ExternalObservation{}, err
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// Create does nothing: an inventory only observes.
func (e *external) Create(_ context.Context, _ *v1alpha1.NodeInventory) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update does nothing: an inventory only observes.
func (e *external) Update(_ context.Context, _ *v1alpha1.NodeInventory) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

// Delete does nothing: an inventory only observes.
func (e *external) Delete(_ context.Context, _ *v1alpha1.NodeInventory) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

// Disconnect does nothing: the watch is shared and outlives a reconcile.
func (e *external) Disconnect(_ context.Context) error { return nil }

// deleted is the external client of an inventory being deleted: there is
// nothing in the cluster to remove, so it reports nothing exists.
type deleted struct{ external }

func (*deleted) Observe(_ context.Context, _ *v1alpha1.NodeInventory) (managed.ExternalObservation, error) {
	return managed.ExternalObservation{ResourceExists: false}, nil
}
