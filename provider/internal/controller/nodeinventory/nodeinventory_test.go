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

package nodeinventory

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	inv "github.com/kilomesh/kilomesh/provider/inventory"
)

// fakeCluster returns fixed Nodes and Peers. It stands in for the shared
// watch, which the API server tests of the controller package exercise.
type fakeCluster struct {
	nodes    []*corev1.Node
	nodesErr error
	peers    []*kilov1alpha1.Peer
	peersErr error
	since    time.Time
	// nodesCut and peersCut are the bounds the watch reached.
	nodesCut, peersCut string
}

func (c *fakeCluster) NodesAnsweringSince() time.Time { return c.since }

// AwaitFirstLists returns at once: the fake has listed, or never will.
func (c *fakeCluster) AwaitFirstLists(context.Context, time.Duration) {}

func (c *fakeCluster) NodesIncomplete() string { return c.nodesCut }

func (c *fakeCluster) PeersIncomplete() string { return c.peersCut }

func (c *fakeCluster) Nodes(context.Context) ([]*corev1.Node, error) { return c.nodes, c.nodesErr }

func (c *fakeCluster) Peers(context.Context) ([]*kilov1alpha1.Peer, error) {
	return c.peers, c.peersErr
}

func TestObserve(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	now := time.Date(2026, 11, 22, 2, 0, 0, 500, time.UTC)
	// in is how long from now until the whole second s seconds after now.
	in := func(s int64) time.Duration { return time.Unix(now.Unix()+s, 0).Sub(now) }
	seen := func(ago time.Duration) string { return strconv.FormatInt(now.Add(-ago).Unix(), 10) }
	nodeAt := func(ago time.Duration) *corev1.Node {
		return nodefixture.New("a").With(kilov1alpha1.AnnotationKey, "k").With(kilov1alpha1.AnnotationLastSeen, seen(ago)).Object()
	}
	// nodeA's heartbeat is 10 s old: it turns stale in 50 s.
	nodeA := nodeAt(10 * time.Second)
	observedA := []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{Key: "k"}}}
	// staleA is node a published stale since a heartbeat ago + 60 s.
	staleA := func(ago time.Duration) []v1alpha1.ObservedNode {
		since := metav1.NewTime(time.Unix(now.Add(-ago).Unix(), 0).Add(time.Minute).UTC())
		return []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{Key: "k"}, Stale: true, StaleSince: &since}}
	}
	inventory := func(synced corev1.ConditionStatus, at v1alpha1.NodeInventoryObservation, owned map[string]string) *v1alpha1.NodeInventory {
		ni := &v1alpha1.NodeInventory{}
		ni.Spec.ForProvider.OwnedPeerLabels = owned
		ni.Status.AtProvider = at
		if synced != "" {
			ni.SetConditions(xpv2.Condition{Type: xpv2.TypeSynced, Status: synced})
		}
		return ni
	}
	type want struct {
		obs  managed.ExternalObservation
		at   v1alpha1.NodeInventoryObservation
		err  error
		wake time.Duration
	}
	cases := map[string]struct {
		reason   string
		cluster  *fakeCluster
		cr       *v1alpha1.NodeInventory
		maxBytes int
		want     want
	}{
		"TooLarge": {
			reason:   "A status too large for one object is refused with advice, keeping what was published.",
			cluster:  &fakeCluster{nodes: []*corev1.Node{nodeA, nodefixture.New("b").Object()}},
			cr:       inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then}, nil),
			maxBytes: 80,
			want: want{
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &then},
				err:  errors.Errorf(errFmtTooLarge, 2, 183, 80),
				wake: in(50),
			},
		},
		"FirstObservation": {
			reason:  "The first observation publishes the Nodes and the time.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA}},
			cr:      inventory("", v1alpha1.NodeInventoryObservation{}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA},
				wake: in(50),
			},
		},
		"Unchanged": {
			reason:  "An observation equal to the status leaves it, observedAt included, untouched: no write.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA},
				wake: in(50),
			},
		},
		"WrittenWithoutNodeCount": {
			reason:  "A status an earlier version wrote without nodeCount is written again once, so that kubectl's NODES column shows the nodes after an upgrade.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA},
				wake: in(50),
			},
		},
		"Heartbeat": {
			reason:  "A newer heartbeat that keeps the node fresh changes nothing; the inventory looks again when the new heartbeat can turn stale.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(0)}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA},
				wake: in(60),
			},
		},
		"TurnedStale": {
			reason:  "A node whose heartbeat is 60 s old is published as stale, and nothing is left to turn stale.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(time.Minute)}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: staleA(time.Minute)},
			},
		},
		"StaysStale": {
			reason:  "A heartbeat written while the node stays stale changes nothing: the moment it turned stale is kept.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(2 * time.Minute)}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: staleA(5 * time.Minute)}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: staleA(5 * time.Minute)},
			},
		},
		"FreshAgain": {
			reason:  "A stale node with a new heartbeat is published as fresh.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: staleA(5 * time.Minute)}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA},
				wake: in(50),
			},
		},
		"BackFromAnOutage": {
			reason:  "A member back after an outage shows heartbeats as old as the outage, since Kilo's agents could not write them: a node published fresh stays fresh until the member has answered for a heartbeat period, and the inventory looks again then.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(2 * time.Minute)}, since: now.Add(-10 * time.Second)},
			cr:      inventory(corev1.ConditionFalse, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA},
				wake: 50 * time.Second,
			},
		},
		"BackFromAnOutageGraceOver": {
			reason:  "Once the member has answered for a heartbeat period, a node that did not check in meanwhile is stale.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(2 * time.Minute)}, since: now.Add(-61 * time.Second)},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: staleA(2 * time.Minute)},
			},
		},
		"StaleStaysStaleAfterAnOutage": {
			reason:  "A node already published stale gets no grace: it stays out until it checks in.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(2 * time.Minute)}, since: now.Add(-10 * time.Second)},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: staleA(2 * time.Minute)}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: staleA(2 * time.Minute)},
			},
		},
		"FirstObservationOfAStaleNode": {
			reason:  "An inventory that never published follows Kilo's rule at once: a stale node is stale.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeAt(2 * time.Minute)}, since: now.Add(-10 * time.Second)},
			cr:      inventory("", v1alpha1.NodeInventoryObservation{}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: staleA(2 * time.Minute)},
			},
		},
		"Pending": {
			reason:  "While the cluster has not answered the watch yet, nothing is known and nothing changes: no error, no write.",
			cluster: &fakeCluster{nodesErr: errors.Wrap(remote.ErrPending, "cannot read Nodes")},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA},
			},
		},
		"PendingAfterError": {
			reason:  "An inventory that reports an error goes on reporting one while the cluster has not answered: it never shows as synced in between.",
			cluster: &fakeCluster{nodesErr: errors.Wrap(remote.ErrPending, "cannot read Nodes")},
			cr:      inventory(corev1.ConditionFalse, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, nil),
			want: want{
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA},
				err: errors.Wrap(remote.ErrPending, "cannot read Nodes"),
			},
		},
		"Changed": {
			reason:  "A changed Node is published with a new observedAt.",
			cluster: &fakeCluster{},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA}, nil),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}},
			},
		},
		"Recovered": {
			reason:  "After an error the observation is confirmed with a new observedAt.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA}},
			cr:      inventory(corev1.ConditionFalse, v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA}, nil),
			want: want{
				obs:  managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:   v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA},
				wake: in(50),
			},
		},
		"Unreachable": {
			reason:  "An unreachable cluster is an error and leaves the published Nodes and time.",
			cluster: &fakeCluster{nodesErr: errors.New("boom")},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA}, nil),
			want: want{
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA},
				err: errors.Wrap(errors.New("boom"), errObserveNodes),
			},
		},
		"ForeignPeers": {
			reason:  "Peers without the owned labels are published.",
			cluster: &fakeCluster{peers: []*kilov1alpha1.Peer{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kilov1alpha1.PeerSpec{PublicKey: "k", AllowedIPs: []string{"10.9.0.0/16"}}}}},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then}, map[string]string{"mesh": "m"}),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, ForeignPeers: []v1alpha1.ForeignPeer{{Name: "p", PublicKey: "k", AllowedIPs: []string{"10.9.0.0/16"}}}},
			},
		},
		"NoPeerCRD": {
			reason:  "A cluster without Kilo's Peer CRD has no foreign Peers.",
			cluster: &fakeCluster{peersErr: remote.ErrPeerCRDMissing},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then}, map[string]string{"mesh": "m"}),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then},
			},
		},
		"Incomplete": {
			reason:  "The bounds that left Nodes or foreign Peers out are published, those of the watch and those of the objects alike; a Node whose name no API server accepts is not published.",
			cluster: &fakeCluster{nodes: []*corev1.Node{nodeA, nodefixture.New("Not_A_Name").Object()}, nodesCut: "more than 5000 Nodes", peersCut: "more than 16384 Peers"},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, NodeCount: 1, Nodes: observedA}, map[string]string{"mesh": "m"}),
			want: want{
				obs: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				at: v1alpha1.NodeInventoryObservation{
					ObservedAt: &metav1.Time{Time: now.Truncate(time.Second)}, NodeCount: 1, Nodes: observedA,
					NodesIncomplete:        "more than 5000 Nodes; " + inv.ReasonBadName,
					ForeignPeersIncomplete: "more than 16384 Peers",
				},
				wake: in(50),
			},
		},
		"MemberErrorCut": {
			reason:  "What a member says in an error reaches the condition cut to a bounded length, on a character boundary.",
			cluster: &fakeCluster{nodesErr: errors.New(strings.Repeat("é", 1<<20))},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA}, nil),
			want: want{
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then, Nodes: observedA},
				err: remote.CutError(errors.Wrap(errors.New(strings.Repeat("é", 1<<20)), errObserveNodes)),
			},
		},
		"PeersUnreachable": {
			reason:  "Peers that cannot be listed are an error.",
			cluster: &fakeCluster{peersErr: errors.New("boom")},
			cr:      inventory(corev1.ConditionTrue, v1alpha1.NodeInventoryObservation{ObservedAt: &then}, map[string]string{"mesh": "m"}),
			want: want{
				at:  v1alpha1.NodeInventoryObservation{ObservedAt: &then},
				err: errors.Wrap(errors.New("boom"), errObservePeers),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			maxBytes := tc.maxBytes
			if maxBytes == 0 {
				maxBytes = MaxStatusBytes
			}
			var wake time.Duration
			e := &external{cluster: tc.cluster, now: func() time.Time { return now }, maxBytes: maxBytes, wakeAfter: func(d time.Duration) { wake = d }}
			obs, err := e.Observe(context.Background(), tc.cr)
			if wake != tc.want.wake {
				t.Errorf("\n%s\nObserve(...): wakes the inventory again after %s, want %s", tc.reason, wake, tc.want.wake)
			}
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.obs, obs); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil && len(err.Error()) > remote.MaxErrorBytes {
				t.Errorf("\n%s\nObserve(...): an error of %d bytes, more than %d", tc.reason, len(err.Error()), remote.MaxErrorBytes)
			}
			if diff := cmp.Diff(tc.want.at, tc.cr.Status.AtProvider, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want atProvider, +got atProvider:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestObserveHoldsEvidence follows an inventory through discovered
// endpoints that decide no Peer: held back, with a wake-up when the
// evidence interval since the last write ends, and published then.
func TestObserveHoldsEvidence(t *testing.T) {
	const key = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	written := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	owned := map[string]string{"kilomesh.io/mesh": "m"}
	peer := &kilov1alpha1.Peer{}
	peer.Name, peer.Labels = "segment", owned
	peer.Spec.PublicKey = key
	peer.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "192.0.2.1"}, Port: 51820}
	handshake := `{"` + key + `":{"IP":"192.0.2.1","Port":51820,"Zone":""}}`
	// The node's heartbeat is far ahead: no stale wake-up.
	n := nodefixture.New("a").With(kilov1alpha1.AnnotationKey, "k").
		With(kilov1alpha1.AnnotationLastSeen, strconv.FormatInt(written.Add(time.Hour).Unix(), 10)).
		With(kilov1alpha1.AnnotationDiscoveredEndpoints, handshake).Object()
	before := []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{Key: "k", DiscoveredEndpoints: "{}"}}}
	after := []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{Key: "k", DiscoveredEndpoints: handshake}}}
	cases := map[string]struct {
		reason   string
		now      time.Time
		interval time.Duration
		peer     *kilov1alpha1.Peer
		want     []v1alpha1.ObservedNode
		wake     time.Duration
	}{
		"Held": {
			reason:   "Evidence within the interval since the last write is held back until the interval ends.",
			now:      written.Add(10 * time.Second),
			interval: 30 * time.Second,
			peer:     peer,
			want:     before,
			wake:     20 * time.Second,
		},
		"Due": {
			reason:   "Evidence once the interval has passed is published.",
			now:      written.Add(30 * time.Second),
			interval: 30 * time.Second,
			peer:     peer,
			want:     after,
		},
		"WrittenInTheFuture": {
			reason:   "A last write after now (a clock that moved back) holds nothing back.",
			now:      written.Add(-time.Hour),
			interval: 30 * time.Second,
			peer:     peer,
			want:     after,
		},
		"NoInterval": {
			reason: "Without an evidence interval evidence is published at once.",
			now:    written.Add(time.Second),
			peer:   peer,
			want:   after,
		},
		"DecidesAPeer": {
			reason:   "An endpoint that differs from its Peer's is published at once.",
			now:      written.Add(time.Second),
			interval: 30 * time.Second,
			peer: &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "segment", Labels: owned}, Spec: kilov1alpha1.PeerSpec{PublicKey: key,
				Endpoint: &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "198.51.100.1"}, Port: 51820}}},
			want: after,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			at := metav1.NewTime(written)
			cr := &v1alpha1.NodeInventory{}
			cr.Spec.ForProvider.OwnedPeerLabels = owned
			cr.Status.AtProvider = v1alpha1.NodeInventoryObservation{ObservedAt: &at, NodeCount: 1, Nodes: before}
			cr.SetConditions(xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionTrue})
			var wake time.Duration
			e := &external{
				cluster:  &fakeCluster{nodes: []*corev1.Node{n}, peers: []*kilov1alpha1.Peer{tc.peer}},
				now:      func() time.Time { return tc.now },
				maxBytes: MaxStatusBytes,
				// Only the evidence wake-up: the stale one is an hour away.
				wakeAfter: func(d time.Duration) {
					if d < time.Hour {
						wake = d
					}
				},
				evidenceInterval: tc.interval,
			}
			if _, err := e.Observe(context.Background(), cr); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cr.Status.AtProvider.Nodes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nObserve(...): -want nodes, +got nodes:\n%s", tc.reason, diff)
			}
			if wake != tc.wake {
				t.Errorf("\n%s\nObserve(...): wakes the inventory again after %s, want %s", tc.reason, wake, tc.wake)
			}
		})
	}
}
