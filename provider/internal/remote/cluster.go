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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// ErrPeerCRDMissing is returned when the cluster does not serve Kilo's Peer.
var ErrPeerCRDMissing = errors.New("kilo.squat.ai Peer CRD not installed in this cluster")

const (
	// syncWait bounds how long a reconcile waits for a new watch's first
	// list; the end of that list wakes the users again anyway.
	syncWait = 10 * time.Second

	// peerRecheck is how long the absence of the Peer CRD is believed
	// before discovery is asked again.
	peerRecheck = 10 * time.Second

	errNewNodeClient = "cannot create a client for the Nodes of the cluster"
	errNewClient     = "cannot create a client for the cluster"
	errNewHTTP       = "cannot create the connection settings of the cluster"
	errDiscovery     = "cannot discover whether the cluster serves kilo.squat.ai Peers"
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
	return s
}()

// A Cluster is one member cluster reached with one set of credentials.
// Every client of it shares one HTTP client whose connections are its own,
// so that stopping the cluster closes them.
type Cluster struct {
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	cfg    *rest.Config
	conns  *conns
	wake   func(kinds ...string)
	now    func() time.Time

	// started counts the watches started, for Registry.Watch.
	started atomic.Int64

	mu              sync.Mutex
	http            *http.Client
	client          client.WithWatch
	nodes           *feed
	peers           *feed
	peersAbsentTill time.Time
}

func newCluster(ctx context.Context, id uint64, cfg *rest.Config, wake func(kinds ...string)) *Cluster {
	ctx, cancel := context.WithCancel(ctx)
	d := newConns()
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = d.DialContext
	return &Cluster{id: id, ctx: ctx, cancel: cancel, cfg: cfg, conns: d, wake: wake, now: time.Now}
}

// stop ends the cluster's watches and closes its connections.
func (c *Cluster) stop() {
	c.cancel()
	c.conns.closeAll()
}

// httpLocked returns the HTTP client every client of the cluster uses.
func (c *Cluster) httpLocked() (*http.Client, error) {
	if c.http != nil {
		return c.http, nil
	}
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		return nil, errors.Wrap(err, errNewHTTP)
	}
	c.http = hc
	return hc, nil
}

// Client returns a client of the cluster that knows Kilo's Peer.
func (c *Cluster) Client() (client.WithWatch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientLocked()
}

func (c *Cluster) clientLocked() (client.WithWatch, error) {
	if c.client != nil {
		return c.client, nil
	}
	hc, err := c.httpLocked()
	if err != nil {
		return nil, err
	}
	kc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: Scheme, HTTPClient: hc})
	if err != nil {
		return nil, errors.Wrap(err, errNewClient)
	}
	c.client = kc
	return kc, nil
}

// Nodes returns the slimmed Nodes of the cluster (see SlimNode), starting
// the watch on first use. It fails while the cluster cannot be reached.
func (c *Cluster) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	f, err := c.nodeFeed()
	if err != nil {
		return nil, err
	}
	items, err := f.items(ctx, syncWait)
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
	hc, err := c.httpLocked()
	if err != nil {
		return nil, err
	}
	cs, err := corev1client.NewForConfigAndClient(pc, hc)
	if err != nil {
		return nil, errors.Wrap(err, errNewNodeClient)
	}
	lw := lister{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.Nodes().List(ctx, o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.Nodes().Watch(ctx, o)
		},
	}
	changed := func() { c.wake(kubev1alpha1.NodeInventoryKind) }
	c.started.Add(1)
	c.nodes = startFeed(c.ctx, "Nodes", lw, &corev1.Node{}, SlimNode, changed, func() {})
	return c.nodes, nil
}

// Peers returns the slimmed Peers of the cluster (see SlimPeer), starting
// the watch on first use. It returns ErrPeerCRDMissing when the cluster does
// not serve Kilo's Peer, and fails while the cluster cannot be reached.
func (c *Cluster) Peers(ctx context.Context) ([]*kilov1alpha1.Peer, error) {
	f, err := c.peerFeed()
	if err != nil {
		return nil, err
	}
	items, err := f.items(ctx, syncWait)
	if err != nil {
		if kerrors.IsNotFound(err) {
			return nil, ErrPeerCRDMissing
		}
		return nil, err
	}
	out := make([]*kilov1alpha1.Peer, 0, len(items))
	for _, o := range items {
		if p, ok := o.(*kilov1alpha1.Peer); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *Cluster) peerFeed() (*feed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers != nil {
		return c.peers, nil
	}
	if c.now().Before(c.peersAbsentTill) {
		return nil, ErrPeerCRDMissing
	}
	ok, err := c.servesPeersLocked()
	if err != nil {
		return nil, err
	}
	if !ok {
		c.peersAbsentTill = c.now().Add(peerRecheck)
		return nil, ErrPeerCRDMissing
	}
	kc, err := c.clientLocked()
	if err != nil {
		return nil, err
	}
	lw := lister{
		list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l := &kilov1alpha1.PeerList{}
			return l, kc.List(ctx, l, &client.ListOptions{Raw: &o})
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kc.Watch(ctx, &kilov1alpha1.PeerList{}, &client.ListOptions{Raw: &o})
		},
	}
	changed := func() { c.wake(kubev1alpha1.NodeInventoryKind, kubev1alpha1.PeerSetKind) }
	c.started.Add(1)
	c.peers = startFeed(c.ctx, "Peers", lw, &kilov1alpha1.Peer{}, SlimPeer, changed, c.dropPeers)
	return c.peers, nil
}

// dropPeers stops the Peer watch once the CRD is gone, so that the next
// use asks discovery again instead of retrying a kind that does not exist.
func (c *Cluster) dropPeers() {
	c.mu.Lock()
	f := c.peers
	c.peers = nil
	c.mu.Unlock()
	if f != nil {
		f.stop()
	}
}

func (c *Cluster) servesPeersLocked() (bool, error) {
	hc, err := c.httpLocked()
	if err != nil {
		return false, err
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(c.cfg, hc)
	if err != nil {
		return false, errors.Wrap(err, errDiscovery)
	}
	rl, err := dc.ServerResourcesForGroupVersion(kilov1alpha1.APIVersion)
	if kerrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, errors.Wrap(err, errDiscovery)
	}
	for _, r := range rl.APIResources {
		if r.Name == "peers" {
			return true, nil
		}
	}
	return false, nil
}
