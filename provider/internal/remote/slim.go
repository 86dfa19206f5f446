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
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/inventory"
)

// SlimNode keeps only what the inventory contract reads of a Node (see
// inventory.Slim): a Node of 5-20 KB becomes a few hundred bytes, with every
// value cut to its cap. It is idempotent, as a watch's transform must be.
func SlimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return inventory.Slim(n), nil
}

// maxLabelSets bounds the distinct label sets a labelSets keeps. Reaching
// it starts the table afresh: the objects stored so far keep their maps,
// later ones share new ones.
const maxLabelSets = 1024

// labelSets lets the objects of one watch whose labels are equal share one
// map. The Peers a mesh applies to a member carry the same few labels
// (owner, mesh, source cluster): kept once per object, their maps and
// strings were about half of what the provider keeps of a Peer. A watch's
// objects are read, never changed, so sharing is safe.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]map[string]string
}

// share returns a map equal to l that other objects may hold too: l itself
// is never shared, so nothing that holds it sees a change.
func (s *labelSets) share(l map[string]string) map[string]string {
	if len(l) == 0 {
		return l
	}
	key := inventory.LabelsKey(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.sets[key]; ok {
		return m
	}
	if s.sets == nil || len(s.sets) >= maxLabelSets {
		s.sets = make(map[string]map[string]string)
	}
	m := maps.Clone(l)
	s.sets[key] = m
	return m
}

// peerSlimmer returns the transform of one watch of Peers: it keeps what
// the provider reads of a Peer (see inventory.SlimPeer), and lets Peers of
// equal labels share them. It is idempotent, as a watch's transform must be.
func peerSlimmer() func(any) (any, error) {
	sets := &labelSets{}
	return func(obj any) (any, error) {
		p, ok := obj.(*kilov1alpha1.Peer)
		if !ok {
			return obj, nil
		}
		out := inventory.SlimPeer(p)
		out.Labels = sets.share(out.Labels)
		return out, nil
	}
}

// slimNode and slimPeer are SlimNode and SlimPeer for a guard.
func slimNode(obj runtime.Object) runtime.Object {
	if n, ok := obj.(*corev1.Node); ok {
		return inventory.Slim(n)
	}
	return obj
}

func slimPeer(obj runtime.Object) runtime.Object {
	if p, ok := obj.(*kilov1alpha1.Peer); ok {
		return inventory.SlimPeer(p)
	}
	return obj
}

// weighNode and weighPeer estimate the memory of a slim Node or Peer.
func weighNode(obj runtime.Object) int {
	if n, ok := obj.(*corev1.Node); ok {
		return inventory.NodeBytes(n)
	}
	return 0
}

func weighPeer(obj runtime.Object) int {
	if p, ok := obj.(*kilov1alpha1.Peer); ok {
		return inventory.PeerBytes(p)
	}
	return 0
}

// nodeChanged returns whether an update of a slim Node changes what an
// inventory publishes at the time now returns: Kilo's heartbeats change
// nothing as long as they keep the node as fresh, or as stale, as it was,
// and the kubelet's heartbeats are gone from a slim Node.
func nodeChanged(now func() time.Time) func(a, b any) bool {
	return func(a, b any) bool {
		x, okx := a.(*corev1.Node)
		y, oky := b.(*corev1.Node)
		if !okx || !oky {
			return true
		}
		return inventory.Changed(x, y, now())
	}
}

// peerChanged returns whether two slim Peers differ in more than their
// resource version.
func peerChanged(a, b any) bool {
	x, okx := a.(*kilov1alpha1.Peer)
	y, oky := b.(*kilov1alpha1.Peer)
	if !okx || !oky {
		return true
	}
	xc, yc := *x, *y
	xc.ResourceVersion, yc.ResourceVersion = "", ""
	return !equality.Semantic.DeepEqual(&xc, &yc)
}
