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

package nodefixture

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// now is the clock of the tests that need one.
var now = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

func TestKey(t *testing.T) {
	a, b := Key("node-a1"), Key("node-a2")
	if a == b {
		t.Fatalf("two seeds made one key %s", a)
	}
	if again := Key("node-a1"); again != a {
		t.Errorf("Key is not the same for one seed: %s, then %s", a, again)
	}
	priv, ok := PrivateKey(a)
	if !ok {
		t.Fatalf("the process that made %s does not hold its private key", a)
	}
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())); diff != "" {
		t.Errorf("Key is the public key of the private key PrivateKey holds: -want, +got:\n%s", diff)
	}
	if _, ok := PrivateKey(base64.StdEncoding.EncodeToString(make([]byte, 32))); ok {
		t.Errorf("PrivateKey holds a key Key never made")
	}
}

func TestStale(t *testing.T) {
	seen := func(ago int64) Node {
		return Node{Annotations: map[string]string{kilov1alpha1.AnnotationLastSeen: strconv.FormatInt(now.Unix()-ago, 10)}}
	}
	cases := map[string]struct {
		reason string
		node   Node
		want   bool
	}{
		"Fresh":   {reason: "A heartbeat 59 s old is fresh.", node: seen(59), want: false},
		"Stale":   {reason: "A heartbeat two check-in periods (60 s) old is stale, as Kilo's Node.Ready says.", node: seen(60), want: true},
		"Missing": {reason: "A node without a heartbeat is stale.", node: Node{}, want: true},
		"Garbage": {reason: "A heartbeat that is no number is stale.", node: Node{Annotations: map[string]string{kilov1alpha1.AnnotationLastSeen: "yesterday"}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.node.Stale(now)); diff != "" {
				t.Errorf("%s\nStale(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestForms pins the forms of one description: the Node of the API, the
// inventory's entry and its protobuf form.
func TestForms(t *testing.T) {
	at := func(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
	cases := map[string]struct {
		reason   string
		node     Node
		object   *corev1.Node
		observed kubev1alpha1.ObservedNode
	}{
		"Created": {
			reason:   "A Node only created through the API has no status: it is not ready, and without a heartbeat stale since an unknown time.",
			node:     New("a"),
			object:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			observed: kubev1alpha1.ObservedNode{Name: "a", Stale: true},
		},
		"Reported": {
			reason: "A Node a kubelet reports on has its addresses by type, its hostname and a Ready condition; the first pod CIDR is spec.podCIDR; Kilo's annotations are published verbatim, the location annotation winning over the region label.",
			node: New("a").Pods("10.1.1.0/24", "fd00::/64").Internal("192.168.0.2").External("203.0.113.1").
				Label(kilov1alpha1.LabelRegion, "region").With(kilov1alpha1.AnnotationLocation, "dc1").
				With(kilov1alpha1.AnnotationKey, "k").With(kilov1alpha1.AnnotationEndpoint, "203.0.113.1:51820").
				Seen(now.Add(-10 * time.Second)).Reported(corev1.ConditionTrue),
			object: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:   "a",
					Labels: map[string]string{kilov1alpha1.LabelRegion: "region"},
					Annotations: map[string]string{
						kilov1alpha1.AnnotationLocation: "dc1", kilov1alpha1.AnnotationKey: "k", kilov1alpha1.AnnotationEndpoint: "203.0.113.1:51820",
						kilov1alpha1.AnnotationLastSeen: strconv.FormatInt(now.Add(-10*time.Second).Unix(), 10),
					},
				},
				Spec: corev1.NodeSpec{PodCIDR: "10.1.1.0/24", PodCIDRs: []string{"10.1.1.0/24", "fd00::/64"}},
				Status: corev1.NodeStatus{
					Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeInternalIP, Address: "192.168.0.2"},
						{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
						{Type: corev1.NodeHostName, Address: "a"},
					},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
				},
			},
			observed: kubev1alpha1.ObservedNode{
				Name: "a", PodCIDRs: []string{"10.1.1.0/24", "fd00::/64"}, InternalIPs: []string{"192.168.0.2"}, ExternalIPs: []string{"203.0.113.1"},
				Location: "dc1", Ready: true, Kilo: &kubev1alpha1.KiloAnnotations{Key: "k", Endpoint: "203.0.113.1:51820"},
			},
		},
		"PresentButEmpty": {
			reason: "An empty location annotation wins over the region label; an empty force-internal-ip is published as \"-\" and any leader annotation as \"true\"; a node not ready says so.",
			node: New("a").Label(kilov1alpha1.LabelRegion, "region").With(kilov1alpha1.AnnotationLocation, "").
				With(kilov1alpha1.AnnotationForceInternalIP, "").With(kilov1alpha1.AnnotationLeader, "").
				Seen(now.Add(-5 * time.Minute)).Reported(corev1.ConditionFalse),
			object: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:   "a",
					Labels: map[string]string{kilov1alpha1.LabelRegion: "region"},
					Annotations: map[string]string{
						kilov1alpha1.AnnotationLocation: "", kilov1alpha1.AnnotationForceInternalIP: "", kilov1alpha1.AnnotationLeader: "",
						kilov1alpha1.AnnotationLastSeen: strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10),
					},
				},
				Status: corev1.NodeStatus{
					Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "a"}},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}},
				},
			},
			observed: kubev1alpha1.ObservedNode{
				Name: "a", Stale: true, StaleSince: at(now.Add(-4 * time.Minute)),
				Kilo: &kubev1alpha1.KiloAnnotations{ForceInternalIP: "-", Leader: "true"},
			},
		},
	}
	ignoreTimes := cmpopts.IgnoreFields(corev1.NodeCondition{}, "LastHeartbeatTime", "LastTransitionTime")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.object, tc.node.Object(), ignoreTimes); diff != "" {
				t.Errorf("%s\nObject(): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.node, FromObject(tc.node.Object())); diff != "" {
				t.Errorf("%s\nFromObject(Object()): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.observed, tc.node.ObservedAt(now)); diff != "" {
				t.Errorf("%s\nObservedAt(): -want, +got:\n%s", tc.reason, diff)
			}
			j, err := tc.node.Struct(now).MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var got kubev1alpha1.ObservedNode
			if err := json.Unmarshal(j, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.observed, got); diff != "" {
				t.Errorf("%s\nStruct(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCopies pins that every change returns a copy: a Node shared by cases
// is never changed by one of them.
func TestCopies(t *testing.T) {
	base := New("a").Pods("10.1.1.0/24").Label("l", "v").With("k", "v")
	want := base.Clone()
	_ = base.Pods("10.9.9.0/24").Internal("x").External("y").Label("l", "w").With("k", "w").Without("k").Seen(now).Reported(corev1.ConditionTrue)
	base.Object().Annotations["k"] = "changed"
	if diff := cmp.Diff(want, base); diff != "" {
		t.Errorf("a change changed the original: -want, +got:\n%s", diff)
	}
}
