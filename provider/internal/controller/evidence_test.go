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
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// TestKiloStartWrites writes a Node as Kilo's agent does when it starts
// (its key; its WireGuard IP; discovered endpoints "{}"; one entry per
// handshake, each the endpoint its Peer already has; check-ins) and counts
// the inventory's status writes: what decides a Peer is written at once,
// evidence waits for the next such write (the tests' evidence interval is
// an hour), and a check-in costs nothing. An endpoint learned behind NAT
// decides a Peer: it is written at once.
func TestKiloStartWrites(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	mc := m.Admin
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)

	// The Peers the mesh wrote into this member: node-a's handshakes are
	// with them.
	owned := map[string]string{"kilomesh.io/mesh": "kilo-start"}
	for i, k := range []string{keyA, keyB} {
		p := &kilov1alpha1.Peer{
			ObjectMeta: metav1.ObjectMeta{Name: "segment-" + strconv.Itoa(i), Labels: owned},
			Spec: kilov1alpha1.PeerSpec{
				AllowedIPs:          []string{"10.9." + strconv.Itoa(i) + ".0/24"},
				PublicKey:           k,
				PersistentKeepalive: 25,
				Endpoint:            &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "192.0.2." + strconv.Itoa(i+1)}, Port: 51820},
			},
		}
		if err := mc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Hour).Unix()
	node(ctx, t, mc, "node-a", nil,
		map[string]string{
			kilov1alpha1.AnnotationEndpoint:   "203.0.113.1:51820",
			kilov1alpha1.AnnotationInternalIP: "192.168.1.11/24",
			kilov1alpha1.AnnotationLeader:     "",
			kilov1alpha1.AnnotationLastSeen:   strconv.FormatInt(future, 10),
		},
		[]string{"10.1.1.0/24"}, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.11"}}, corev1.ConditionTrue)
	inventory(ctx, t, ns, "kilo-start", "member", v1alpha1.NodeInventoryParameters{OwnedPeerLabels: owned})
	want := v1alpha1.ObservedNode{
		Name: "node-a", PodCIDRs: []string{"10.1.1.0/24"}, InternalIPs: []string{"192.168.1.11"}, Ready: true,
		Kilo: &v1alpha1.KiloAnnotations{Endpoint: "203.0.113.1:51820", InternalIP: "192.168.1.11/24", Leader: "true"},
	}
	ni := published(ctx, t, ns, "kilo-start", []v1alpha1.ObservedNode{want})

	w, err := cp.kube.Watch(ctx, &v1alpha1.NodeInventoryList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": "kilo-start"}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: ni.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	annotate := func(k, v string) {
		mutateNode(ctx, t, mc, "node-a", false, func(n *corev1.Node) { n.Annotations[k] = v })
	}
	// next waits for the next status write that satisfies ok, and returns
	// how many writes it took.
	next := func(what string, ok func(k *v1alpha1.KiloAnnotations) bool) int {
		t.Helper()
		writes := 0
		deadline := time.After(waitTimeout)
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type != watch.Modified {
					t.Fatalf("unexpected %s event", ev.Type)
				}
				writes++
				got, isInv := ev.Object.(*v1alpha1.NodeInventory)
				if !isInv {
					t.Fatalf("unexpected %T", ev.Object)
				}
				if ns := got.Status.AtProvider.Nodes; len(ns) == 1 && ns[0].Kilo != nil && ok(ns[0].Kilo) {
					return writes
				}
			case <-deadline:
				t.Fatalf("%s did not reach status within %s (%d writes)", what, waitTimeout, writes)
			}
		}
	}
	entry := func(key, ip string, port int) string {
		return `"` + key + `":{"IP":"` + ip + `","Port":` + strconv.Itoa(port) + `,"Zone":""}`
	}

	annotate(kilov1alpha1.AnnotationKey, keyC)
	if n := next("the key", func(k *v1alpha1.KiloAnnotations) bool { return k.Key == keyC }); n != 1 {
		t.Errorf("status writes for the key: want 1, got %d", n)
	}
	annotate(kilov1alpha1.AnnotationWireguardIP, "10.4.0.1/16")
	if n := next("the WireGuard IP", func(k *v1alpha1.KiloAnnotations) bool { return k.WireguardIP == "10.4.0.1/16" }); n != 1 {
		t.Errorf("status writes for the WireGuard IP: want 1, got %d", n)
	}

	// Evidence, and check-ins: nothing decides a Peer.
	handshakes := `{` + entry(keyA, "192.0.2.1", 51820) + `,` + entry(keyB, "192.0.2.2", 51820) + `}`
	// Each write is left a second alone, ten times the tests' coalescing:
	// each gets a reconcile of its own rather than one for them all.
	apart := func(k, v string) {
		annotate(k, v)
		time.Sleep(time.Second)
	}
	apart(kilov1alpha1.AnnotationDiscoveredEndpoints, "{}")
	apart(kilov1alpha1.AnnotationDiscoveredEndpoints, `{`+entry(keyA, "192.0.2.1", 51820)+`}`)
	apart(kilov1alpha1.AnnotationDiscoveredEndpoints, handshakes)
	for i := range 5 {
		apart(kilov1alpha1.AnnotationLastSeen, strconv.FormatInt(future+30*int64(i+1), 10))
	}
	// Then a change that decides a Peer: its write is the first, and it
	// carries the evidence gathered so far.
	annotate(kilov1alpha1.AnnotationAllowedLocationIPs, "10.8.0.0/24")
	if n := next("the allowed location IPs", func(k *v1alpha1.KiloAnnotations) bool { return k.AllowedLocationIPs == "10.8.0.0/24" }); n != 1 {
		t.Errorf("status writes for the discovered endpoints, check-ins and allowed location IPs: want 1, got %d", n)
	}
	ni, err = getInventory(ctx, ns, "kilo-start")
	if err != nil {
		t.Fatal(err)
	}
	if got := ni.Status.AtProvider.Nodes[0].Kilo.DiscoveredEndpoints; got != handshakes {
		t.Errorf("the evidence gathered before a change that decides a Peer: want %s, got %s", handshakes, got)
	}

	// An endpoint learned behind NAT changes the Peer: it is not held back
	// for the hour.
	nat := `{` + entry(keyA, "198.51.100.7", 40000) + `,` + entry(keyB, "192.0.2.2", 51820) + `}`
	annotate(kilov1alpha1.AnnotationDiscoveredEndpoints, nat)
	if n := next("the endpoint learned behind NAT", func(k *v1alpha1.KiloAnnotations) bool { return k.DiscoveredEndpoints == nat }); n != 1 {
		t.Errorf("status writes for an endpoint learned behind NAT: want 1, got %d", n)
	}
}
