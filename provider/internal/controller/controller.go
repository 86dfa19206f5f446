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

// Package controller sets up every controller of provider-kilomesh.
package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/controller/nodeinventory"
	"github.com/kilomesh/kilomesh/provider/internal/controller/peerset"
	"github.com/kilomesh/kilomesh/provider/internal/controller/servicesync"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

const (
	errScheme   = "cannot build the scheme"
	errReaper   = "cannot add the watch reaper"
	errManager  = "cannot create the controller manager"
	errWatcher  = "cannot watch the credentials of member clusters"
	errSetupAll = "cannot set up the controllers"
)

// DefaultReapInterval is how often watches of deleted managed resources
// are released, should their deletion not have released them.
const DefaultReapInterval = 30 * time.Second

// Config is everything a provider-kilomesh process is made of, for the
// provider itself and for the tests that run it.
type Config struct {
	// Options of the managed reconcilers: logger, poll interval,
	// concurrency, rate limiter, features, metrics.
	Options controller.Options

	// Coalesce is how long the changes of a member cluster are gathered
	// before its users are reconciled. Defaults to remote.DefaultCoalesce.
	Coalesce time.Duration

	// MaxGather bounds how long changes of a member cluster that keep
	// coming are gathered into one reconcile. Defaults to
	// remote.DefaultMaxGather.
	MaxGather time.Duration

	// Timeout bounds every request to a member cluster. Defaults to
	// remote.DefaultTimeout.
	Timeout time.Duration

	// FirstListWait is how long the first observation of a new
	// NodeInventory waits for its member's first lists. Defaults to
	// remote.DefaultFirstListWait.
	FirstListWait time.Duration

	// WriteDeadline bounds the writes of one reconcile of a PeerSet, all
	// together. Defaults to peerset.DefaultWriteDeadline.
	WriteDeadline time.Duration

	// EvidenceInterval is how often a NodeInventory publishes at most a
	// change that is only evidence (handshakes recorded in discovered
	// endpoints that decide no Peer). Defaults to
	// nodeinventory.DefaultEvidenceInterval; negative publishes it at once.
	EvidenceInterval time.Duration

	// Allow lists the kubeconfig settings, refused by default, that an
	// administrator allows.
	Allow clients.Allowances

	// InCluster loads the provider's own identity for configs whose
	// credentials source is InjectedIdentity. Defaults to the pod's.
	InCluster func() (*rest.Config, error)

	// ReapInterval is how often watches of managed resources that no
	// longer exist are released. Defaults to DefaultReapInterval.
	ReapInterval time.Duration

	// Manager adjusts the manager's options (metrics, probes, leader
	// election), if set.
	Manager func(o *ctrl.Options)

	// Scheme adds kinds to the control plane's scheme, if set.
	Scheme func(s *runtime.Scheme) error

	// Clock tells whether heartbeats are stale. Defaults to time.Now.
	Clock func() time.Time
}

// NewManager returns a controller manager of the control plane cfg reaches
// with every controller of provider-kilomesh set up, and the registry of
// member-cluster watches they share, whose watches run until ctx is done.
func NewManager(ctx context.Context, cfg *rest.Config, c Config) (ctrl.Manager, *remote.Registry, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, nil, err
	}
	if c.Scheme != nil {
		if err := c.Scheme(s); err != nil {
			return nil, nil, errors.Wrap(err, errScheme)
		}
	}
	mo := ManagerOptions(s)
	if c.Manager != nil {
		c.Manager(&mo)
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, nil, errors.Wrap(err, errManager)
	}
	sw, err := remote.NewMetadataWatcher(mgr.GetConfig())
	if err != nil {
		return nil, nil, errors.Wrap(err, errWatcher)
	}
	ro := []remote.RegistryOption{remote.WithSourceWatcher(sw)}
	if c.Coalesce > 0 {
		ro = append(ro, remote.WithCoalesce(c.Coalesce))
	}
	if c.MaxGather > 0 {
		ro = append(ro, remote.WithMaxGather(c.MaxGather))
	}
	if c.Timeout > 0 {
		ro = append(ro, remote.WithTimeout(c.Timeout))
	}
	if c.FirstListWait > 0 {
		ro = append(ro, remote.WithFirstListWait(c.FirstListWait))
	}
	if c.Clock != nil {
		ro = append(ro, remote.WithClock(c.Clock))
	}
	reg := remote.NewRegistry(ctx, ro...)
	if err := setup(ctx, mgr, reg, c); err != nil {
		return nil, nil, errors.Wrap(err, errSetupAll)
	}
	return mgr, reg, nil
}

// setup adds the NodeInventory and PeerSet controllers to the manager. They
// share one registry of member-cluster watches, one usage tracker and one
// credentials resolver.
func setup(ctx context.Context, mgr ctrl.Manager, reg *remote.Registry, c Config) error {
	usage := clients.NewUsageTracker(mgr.GetClient())
	res := clients.NewResolver(mgr.GetClient())
	res.Allow = c.Allow
	if c.InCluster != nil {
		res.InCluster = c.InCluster
	}
	now := c.Clock
	if now == nil {
		now = time.Now
	}
	evidence := c.EvidenceInterval
	switch {
	case evidence == 0:
		evidence = nodeinventory.DefaultEvidenceInterval
	case evidence < 0:
		evidence = 0
	}
	if err := nodeinventory.Setup(mgr, c.Options, reg, usage, res, now, evidence); err != nil {
		return err
	}
	if err := peerset.Setup(ctx, mgr, c.Options, reg, usage, res, c.WriteDeadline); err != nil {
		return err
	}
	if err := servicesync.Setup(mgr, c.Options, reg, usage, res, now); err != nil {
		return err
	}
	interval := c.ReapInterval
	if interval == 0 {
		interval = DefaultReapInterval
	}
	kube := mgr.GetClient()
	exists := func(ctx context.Context, u remote.User) (bool, error) {
		var obj client.Object
		switch u.Kind {
		case v1alpha1.NodeInventoryKind:
			obj = &v1alpha1.NodeInventory{}
		case v1alpha1.PeerSetKind:
			obj = &v1alpha1.PeerSet{}
		case v1alpha1.ServiceSyncKind:
			obj = &v1alpha1.ServiceSync{}
		default:
			return true, nil
		}
		err := kube.Get(ctx, u.NamespacedName, obj)
		if kerrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	return errors.Wrap(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		reg.Reap(ctx, interval, exists)
		return nil
	})), errReaper)
}

// NewScheme returns the scheme of provider-kilomesh's control-plane client.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, errors.Wrap(err, errScheme)
		}
	}
	return s, nil
}

// ManagerOptions returns the manager options every provider-kilomesh
// process uses, tests included. Secrets are read straight from the API
// server (caching them would watch every Secret of the control plane) and
// cached objects drop their managed fields. SegmentSets are read from the
// cache without a copy: every PeerSet that references one reads it whole
// at every reconcile (at 20 x 250, 19 SegmentSets of 250 Peers each), and
// copying them was a third of what a reconcile allocates. Only
// peerset.resolve reads them, and changes nothing it reads.
func ManagerOptions(s *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme: s,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         map[client.Object]cache.ByObject{&v1alpha1.SegmentSet{}: {UnsafeDisableDeepCopy: ptr.To(true)}},
		},
	}
}
