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
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/inventory"
)

// ErrPeerCRDMissing is returned when the cluster does not serve Kilo's Peer.
var ErrPeerCRDMissing = errors.New("kilo.squat.ai Peer CRD not installed in this cluster")

const (
	// peerRecheck is how long the absence of the Peer CRD is believed
	// before the Peers are listed again.
	peerRecheck = 10 * time.Second

	// DefaultTimeout bounds every request to a member cluster: a list, the
	// start of a watch, a write.
	DefaultTimeout = 30 * time.Second

	// nodePageSize and peerPageSize are how many objects a page of a list
	// holds: about 1 MB of real Nodes, or of Peers.
	nodePageSize = 100
	peerPageSize = 500

	errNewNodeClient = "cannot create a client for the Nodes of the cluster"
	errNewClient     = "cannot create a client for the cluster"
	errNewHTTP       = "cannot create the connection settings of the cluster"
)

// Scheme knows the kinds provider-kilomesh reads and writes in member
// clusters.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := kilov1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	addServiceKinds(s)
	return s
}()

// restMapper maps the kinds provider-kilomesh uses in member clusters. It
// is fixed, so that a client never asks a member's discovery API, which
// would be a request without a deadline in the middle of a reconcile.
var restMapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{kilov1alpha1.GroupVersion, corev1.SchemeGroupVersion})
	m.Add(kilov1alpha1.GroupVersion.WithKind(kilov1alpha1.Kind), meta.RESTScopeRoot)
	m.Add(corev1.SchemeGroupVersion.WithKind("Node"), meta.RESTScopeRoot)
	addServiceMappings(m)
	return m
}()

// A Cluster is one member cluster reached with one set of credentials.
// Every client of it shares one HTTP transport whose connections are its
// own, so that stopping the cluster closes them. No method of a Cluster
// waits for the cluster while it holds its lock, and every request has a
// deadline.
type Cluster struct {
	id      uint64
	ctx     context.Context
	cancel  context.CancelFunc
	cfg     *rest.Config
	conns   *conns
	wake    func(kinds ...string)
	now     func() time.Time
	timeout time.Duration

	// started counts the watches started, for Registry.Watch.
	started atomic.Int64

	mu     sync.Mutex
	http   *http.Client
	timed  *http.Client
	client client.Client
	nodes  *feed
	peers  *feed
	// peersAbsent is set when the cluster last said it has no Peer kind,
	// and cleared when the Peers are listed; until peersAbsentTill no new
	// watch of Peers starts.
	peersAbsent     bool
	peersAbsentTill time.Time
	// services are the watches of one kind of one namespace, for
	// ServiceSyncs (see services.go).
	services map[serviceFeedKey]*feed
	// serviceUsers are the namespaces each user reads: a namespace's
	// watches stop when no user reads it.
	serviceUsers map[User]map[string]bool
}

func newCluster(ctx context.Context, id uint64, cfg *rest.Config, wake func(kinds ...string), timeout time.Duration, now func() time.Time) *Cluster {
	ctx, cancel := context.WithCancel(ctx)
	d := newConns()
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = d.DialContext
	return &Cluster{id: id, ctx: ctx, cancel: cancel, cfg: cfg, conns: d, wake: wake, now: now, timeout: timeout}
}

// stop ends the cluster's watches and closes its connections.
func (c *Cluster) stop() {
	c.cancel()
	c.conns.closeAll()
}

// httpLocked returns the HTTP client of the cluster's watches, and the one
// of its other requests, which share one transport: the second has a
// deadline for the whole request.
func (c *Cluster) httpLocked() (*http.Client, *http.Client, error) {
	if c.http != nil {
		return c.http, c.timed, nil
	}
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		return nil, nil, errors.Wrap(err, errNewHTTP)
	}
	hc = &http.Client{Transport: answerOrFail(limitBodies(hc.Transport)), Timeout: hc.Timeout}
	c.http = hc
	c.timed = &http.Client{Transport: hc.Transport, Timeout: c.timeout}
	return c.http, c.timed, nil
}

// Client returns a client of the cluster that knows Kilo's Peer. Each of
// its requests fails after the cluster's timeout.
func (c *Cluster) Client() (client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return c.client, nil
	}
	_, timed, err := c.httpLocked()
	if err != nil {
		return nil, err
	}
	kc, err := client.New(c.cfg, client.Options{Scheme: Scheme, Mapper: restMapper, HTTPClient: timed})
	if err != nil {
		return nil, errors.Wrap(err, errNewClient)
	}
	c.client = kc
	return kc, nil
}

// Nodes returns the slimmed Nodes of the cluster (see SlimNode), starting
// the watch on first use. It fails while the cluster cannot be reached, and
// returns ErrPending until the watch has first listed them.
func (c *Cluster) Nodes(_ context.Context) ([]*corev1.Node, error) {
	f, err := c.nodeFeed()
	if err != nil {
		return nil, err
	}
	items, err := f.items()
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, 0, len(items))
	for _, o := range items {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// NodesAnsweringSince returns when the cluster last began answering its
// Node watch, without a failure since: Kilo's agents cannot write their
// heartbeats while their API server does not answer, so heartbeats older
// than that say nothing of their nodes yet. Zero before the watch lists.
func (c *Cluster) NodesAnsweringSince() time.Time {
	c.mu.Lock()
	f := c.nodes
	c.mu.Unlock()
	if f == nil {
		return time.Time{}
	}
	return f.answeringSince()
}

// NodesIncomplete returns the bounds that left Nodes of the cluster out
// of its watch (see Limits), or "".
func (c *Cluster) NodesIncomplete() string {
	c.mu.Lock()
	f := c.nodes
	c.mu.Unlock()
	if f == nil {
		return ""
	}
	return f.incomplete()
}

// PeersIncomplete returns the bounds that left Peers of the cluster out
// of its watch (see Limits), or "".
func (c *Cluster) PeersIncomplete() string {
	c.mu.Lock()
	f := c.peers
	c.mu.Unlock()
	if f == nil {
		return ""
	}
	return f.incomplete()
}

// AwaitFirstLists waits, at most d, until the watches of the cluster
// started so far have an outcome: their first list, or a failure. A new
// inventory then publishes its member at once, in one status write,
// instead of a write that says nothing yet and another a moment later,
// each a watch event of every mesh that uses it. A cluster that does not
// answer costs a reconcile the wait only until its first list fails or
// stalls: a watch that has an outcome returns at once.
func (c *Cluster) AwaitFirstLists(ctx context.Context, d time.Duration) {
	c.mu.Lock()
	feeds := []*feed{c.nodes, c.peers}
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	for _, f := range feeds {
		if f == nil {
			continue
		}
		// The channel is taken before the check: a list that ends in
		// between closes it.
		next := f.outcome()
		if _, err := f.items(); !errors.Is(err, ErrPending) {
			continue
		}
		select {
		case <-next:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (c *Cluster) nodeFeed() (*feed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes != nil {
		return c.nodes, nil
	}
	// Nodes travel as protobuf: a first list of thousands of Nodes then
	// costs a fraction of the memory JSON would.
	pc := rest.CopyConfig(c.cfg)
	pc.ContentType = runtime.ContentTypeProtobuf
	pc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	hc, _, err := c.httpLocked()
	if err != nil {
		return nil, err
	}
	cs, err := corev1client.NewForConfigAndClient(pc, hc)
	if err != nil {
		return nil, errors.Wrap(err, errNewNodeClient)
	}
	c.started.Add(1)
	c.nodes = startFeed(c.ctx, feedConfig{
		what: "Nodes",
		lw: lister{
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.Nodes().List(ctx, o)
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.Nodes().Watch(ctx, o)
			},
		},
		obj:       &corev1.Node{},
		transform: SlimNode,
		limits: &Limits{
			Items:    inventory.MaxNodes,
			Bytes:    inventory.MaxNodeCacheBytes,
			PageSize: nodePageSize,
			Slim:     slimNode,
			Weigh:    weighNode,
		},
		differ:  nodeChanged(c.now),
		changed: func() { c.wake(kubev1alpha1.NodeInventoryKind) },
		gone:    func() {},
		timeout: c.timeout,
		now:     c.now,
	})
	return c.nodes, nil
}

// Peers returns the slimmed Peers of the cluster (see peerSlimmer), starting
// the watch on first use. It returns ErrPeerCRDMissing when the cluster does
// not serve Kilo's Peer, fails while the cluster cannot be reached, and
// returns ErrPending until the watch has first listed them.
func (c *Cluster) Peers(_ context.Context) ([]*kilov1alpha1.Peer, error) {
	f, absent, err := c.peerFeed()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, ErrPeerCRDMissing
	}
	items, err := f.items()
	switch {
	case kerrors.IsNotFound(err), absent && errors.Is(err, ErrPending):
		// A new watch of a kind the cluster lacked says so until it has
		// listed: no flapping between "missing" and "pending".
		return nil, ErrPeerCRDMissing
	case err != nil:
		return nil, err
	}
	if absent {
		c.mu.Lock()
		c.peersAbsent = false
		c.mu.Unlock()
	}
	out := make([]*kilov1alpha1.Peer, 0, len(items))
	for _, o := range items {
		if p, ok := o.(*kilov1alpha1.Peer); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// peerFeed returns the watch of Peers, starting it unless the cluster
// lacked the kind a moment ago (then it returns none), and whether the
// cluster lacked it when last asked.
func (c *Cluster) peerFeed() (*feed, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers != nil {
		return c.peers, c.peersAbsent, nil
	}
	if c.now().Before(c.peersAbsentTill) {
		return nil, true, nil
	}
	hc, _, err := c.httpLocked()
	if err != nil {
		return nil, false, err
	}
	kc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: Scheme, Mapper: restMapper, HTTPClient: hc})
	if err != nil {
		return nil, false, errors.Wrap(err, errNewClient)
	}
	c.started.Add(1)
	c.peers = startFeed(c.ctx, feedConfig{
		what: "Peers",
		lw: lister{
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				l := &kilov1alpha1.PeerList{}
				// controller-runtime takes a list's page from its own
				// fields, not from Raw.
				return l, kc.List(ctx, l, &client.ListOptions{Raw: &o, Limit: o.Limit, Continue: o.Continue})
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return kc.Watch(ctx, &kilov1alpha1.PeerList{}, &client.ListOptions{Raw: &o})
			},
		},
		obj:       &kilov1alpha1.Peer{},
		transform: peerSlimmer(),
		limits: &Limits{
			Items:    inventory.MaxPeers,
			Bytes:    inventory.MaxPeerCacheBytes,
			PageSize: peerPageSize,
			Slim:     slimPeer,
			Weigh:    weighPeer,
		},
		differ:  peerChanged,
		changed: func() { c.wake(kubev1alpha1.NodeInventoryKind, kubev1alpha1.PeerSetKind) },
		gone:    c.dropPeers,
		timeout: c.timeout,
	})
	return c.peers, c.peersAbsent, nil
}

// dropPeers stops the Peer watch once the server says the kind does not
// exist, so that it is not retried until peerRecheck has passed.
func (c *Cluster) dropPeers() {
	c.mu.Lock()
	f := c.peers
	c.peers = nil
	c.peersAbsent = true
	c.peersAbsentTill = c.now().Add(peerRecheck)
	c.mu.Unlock()
	if f != nil {
		f.stop()
	}
}
