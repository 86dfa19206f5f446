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
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// fullNode is a Node as a kubelet and Kilo leave it, with the fields an
// inventory does not read: managed fields, capacity, images, other
// conditions and the kubelet's heartbeat times.
func fullNode(lastSeen string, heartbeat time.Time, rv string) *corev1.Node {
	n := nodefixture.New("a").Pods("10.1.0.0/24").Internal("192.168.0.1").External("203.0.113.1").
		Label("role", "edge").
		With(kilov1alpha1.AnnotationKey, "k").
		With(kilov1alpha1.AnnotationLocation, "dc1").
		With(kilov1alpha1.AnnotationLastSeen, lastSeen).
		With("node.alpha.kubernetes.io/ttl", "0").
		Reported(corev1.ConditionTrue).Object()
	n.UID, n.ResourceVersion = "u", rv
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	n.Spec.ProviderID = "kwok://a"
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(heartbeat)
	n.Status.Conditions = append(n.Status.Conditions,
		corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(heartbeat)})
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}}
	return n
}

func TestSlimNode(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", UID: "u", ResourceVersion: "1",
			Labels:      map[string]string{"role": "edge"},
			Annotations: map[string]string{kilov1alpha1.AnnotationKey: "k", kilov1alpha1.AnnotationLocation: "dc1", kilov1alpha1.AnnotationLastSeen: "1700000000"},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.168.0.1"},
				{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	cases := map[string]struct {
		reason string
		in     any
		want   any
	}{
		"Node": {
			reason: "Only the fields of the inventory contract are kept, Kilo's heartbeat among them; the kubelet's heartbeats, managed fields and the rest go.",
			in:     fullNode("1700000000", t0, "1"),
			want:   want,
		},
		"Idempotent": {
			reason: "A slim Node stays as it is.",
			in:     want,
			want:   want,
		},
		"Other": {
			reason: "Anything else passes through.",
			in:     "tombstone",
			want:   "tombstone",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SlimNode(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nSlimNode(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestChanged(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	now := func() time.Time { return t0.Add(45 * time.Second) }
	slim := func(n *corev1.Node) any {
		s, _ := SlimNode(n)
		return s
	}
	changedKey := fullNode("1700000030", t0, "3")
	changedKey.Annotations[kilov1alpha1.AnnotationKey] = "k2"
	peer := func(rv, key string) *kilov1alpha1.Peer {
		return &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: rv}, Spec: kilov1alpha1.PeerSpec{PublicKey: key}}
	}
	cases := map[string]struct {
		reason  string
		changed func(a, b any) bool
		a, b    any
		want    bool
	}{
		"Heartbeat": {
			reason:  "Kilo's and the kubelet's heartbeats that keep the node fresh change nothing: no wake-up.",
			changed: nodeChanged(now),
			a:       slim(fullNode("1700000000", t0, "1")),
			b:       slim(fullNode("1700000030", t0.Add(30*time.Second), "2")),
			want:    false,
		},
		"Revived": {
			reason:  "A heartbeat that makes a stale node fresh is a change.",
			changed: nodeChanged(now),
			a:       slim(fullNode("1699999000", t0, "1")),
			b:       slim(fullNode("1700000030", t0, "2")),
			want:    true,
		},
		"Key": {
			reason:  "A new key is a change.",
			changed: nodeChanged(now),
			a:       slim(fullNode("1700000000", t0, "1")),
			b:       slim(changedKey),
			want:    true,
		},
		"PeerSame": {
			reason:  "A Peer written again unchanged is no change.",
			changed: peerChanged,
			a:       peer("1", "k"),
			b:       peer("2", "k"),
			want:    false,
		},
		"PeerChanged": {
			reason:  "A Peer with a new key is a change.",
			changed: peerChanged,
			a:       peer("1", "k"),
			b:       peer("2", "k2"),
			want:    true,
		},
		"Mixed": {
			reason:  "Objects of different kinds differ.",
			changed: peerChanged,
			a:       peer("1", "k"),
			b:       slim(fullNode("1", t0, "1")),
			want:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.changed(tc.a, tc.b); got != tc.want {
				t.Errorf("\n%s\nchanged(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}

func TestPeerSlimmerSharesLabels(t *testing.T) {
	slim := peerSlimmer()
	peer := func(name string, labels map[string]string) *kilov1alpha1.Peer {
		return &kilov1alpha1.Peer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec:       kilov1alpha1.PeerSpec{PublicKey: "k", AllowedIPs: []string{"10.0.0.1/32"}},
		}
	}
	kept := func(p *kilov1alpha1.Peer) *kilov1alpha1.Peer {
		t.Helper()
		o, err := slim(p)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*kilov1alpha1.Peer)
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	inA := map[string]string{"kilomesh.io/mesh": "m", "kilomesh.io/source-cluster": "a"}
	a := kept(peer("a", inA))
	b := kept(peer("b", map[string]string{"kilomesh.io/source-cluster": "a", "kilomesh.io/mesh": "m"}))
	c := kept(peer("c", map[string]string{"kilomesh.io/mesh": "m", "kilomesh.io/source-cluster": "b"}))
	// Keys and values must not run together: "ab"="" is not "a"="b".
	d := kept(peer("d", map[string]string{"kilomesh.io/mesh": "m", "kilomesh.io/source-cluster": "a", "x": ""}))
	e := kept(peer("e", map[string]string{"kilomesh.io/mesh": "m", "kilomesh.io/source-cluster": "a\x00x"}))

	if !same(a.Labels, b.Labels) {
		t.Errorf("two Peers of equal labels keep a map each; want one shared")
	}
	if same(a.Labels, inA) {
		t.Errorf("the kept labels are the object's own map; want a copy, that nothing else holds")
	}
	for name, p := range map[string]*kilov1alpha1.Peer{"c": c, "d": d, "e": e} {
		if same(a.Labels, p.Labels) {
			t.Errorf("Peer %s shares the labels of a, which differ: %v and %v", name, a.Labels, p.Labels)
		}
	}
	if diff := cmp.Diff(map[string]string{"kilomesh.io/mesh": "m", "kilomesh.io/source-cluster": "a\x00x"}, e.Labels); diff != "" {
		t.Errorf("labels kept: -want +got:\n%s", diff)
	}
	inA["kilomesh.io/mesh"] = "changed"
	if a.Labels["kilomesh.io/mesh"] != "m" {
		t.Errorf("changing the object's labels changed the kept Peer's")
	}
	if again := kept(a); !same(again.Labels, a.Labels) || cmp.Diff(a, again) != "" {
		t.Errorf("slim of a kept Peer is not the same Peer: %s", cmp.Diff(a, again))
	}
	for i := range maxLabelSets + 1 {
		kept(peer("x", map[string]string{"n": strconv.Itoa(i)}))
	}
	if a.Labels["kilomesh.io/source-cluster"] != "a" || len(a.Labels) != 2 {
		t.Errorf("a Peer's labels changed when the table was started afresh: %v", a.Labels)
	}
}
