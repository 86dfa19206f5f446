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

package controller_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// realisticPeers returns n Peers as the function composes them into a
// PeerSet: a name of mesh, cluster and node with a hash, the source label,
// a pod CIDR, an internal and a WireGuard host route, an endpoint and a
// keepalive.
func realisticPeers(n int) []v1alpha1.DesiredPeer {
	out := make([]v1alpha1.DesiredPeer, n)
	for i := range n {
		cluster := fmt.Sprintf("cluster-%02d", i%64)
		var k [kilov1alpha1.KeyLen]byte
		copy(k[:], fmt.Sprintf("size-%026d", i))
		out[i] = v1alpha1.DesiredPeer{
			Name:   mesh.PeerName("platform-network", "production-mesh", cluster, fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i/65536%256, i/256%256, i%256)),
			Labels: map[string]string{"kilomesh.io/source-cluster": cluster},
			Spec: v1alpha1.PeerSpec{
				AllowedIPs: []string{
					fmt.Sprintf("10.%d.%d.0/24", 64+i/65536, i/256%256),
					fmt.Sprintf("192.168.%d.%d/32", i/256%256, i%256),
					fmt.Sprintf("10.4.%d.%d/32", i/256%256, i%256),
				},
				Endpoint:            &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{IP: fmt.Sprintf("198.51.%d.%d", i/256%256, i%256)}, Port: 51820},
				PersistentKeepalive: 25,
				PublicKey:           kilov1alpha1.EncodeKey(k),
			},
		}
	}
	return out
}

// composed returns a PeerSet as Crossplane applies a composed resource:
// unstructured, by server-side apply, under a field manager of its own, so
// that its managed fields name every field of every Peer.
func composed(t *testing.T, ns, name string, peers []v1alpha1.DesiredPeer) *unstructured.Unstructured {
	t.Helper()
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ps.SetGroupVersionKind(v1alpha1.PeerSetGroupVersionKind)
	// A config of a kind provider-kilomesh refuses: it never writes to a
	// member, only its own status.
	ps.Spec.ProviderConfigReference = ref("Measured", "none")
	ps.Spec.ForProvider.Selector = mesh.OwnedLabels(ns, "mesh")
	ps.Spec.ForProvider.Peers = peers
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ps)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u
}

// TestPeerSetBytes measures what one Peer costs a PeerSet in etcd, and
// checks that a set just under the size guard, applied as Crossplane
// applies it and with the largest status the provider writes, fits one
// object.
func TestPeerSetBytes(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	ns := namespace(ctx, t)
	apply := func(u *unstructured.Unstructured) {
		t.Helper()
		if err := cp.kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("apiextensions.crossplane.io/composed/0123456789abcdef"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}

	const sample = 500
	apply(composed(t, ns, "sample", realisticPeers(sample)))
	got := &v1alpha1.PeerSet{}
	if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sample"}, got); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(got.Spec.ForProvider.Peers)
	if err != nil {
		t.Fatal(err)
	}
	perPeer := len(spec) / sample
	t.Logf("one Peer costs a PeerSet %d bytes of spec and %d bytes stored (managed fields included); the guard of %d bytes of spec allows about %d Peers",
		perPeer, len(stored)/sample, v1alpha1.MaxPeersBytes, v1alpha1.MaxPeersBytes/perPeer)

	// The largest set the guard lets through, and the largest status.
	peers := realisticPeers(v1alpha1.MaxPeersBytes / perPeer)
	for {
		b, err := json.Marshal(peers)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) <= v1alpha1.MaxPeersBytes {
			break
		}
		peers = peers[:len(peers)-1]
	}
	apply(composed(t, ns, "largest", peers))
	eventually(ctx, t, "the largest status fits too", func() error {
		ps := &v1alpha1.PeerSet{}
		if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "largest"}, ps); err != nil {
			return err
		}
		ps.Status.AtProvider = v1alpha1.PeerSetObservation{Desired: len(peers)}
		for i := range 100 {
			ps.Status.AtProvider.Problems = append(ps.Status.AtProvider.Problems, v1alpha1.PeerProblem{
				Peer: strings.Repeat("p", 253), Reason: v1alpha1.ReasonPeerInvalid, Message: strings.Repeat(strconv.Itoa(i%10), 1024),
			})
		}
		return cp.kube.Status().Update(ctx, ps)
	})
}
