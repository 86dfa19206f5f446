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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

func TestObserveNodes(t *testing.T) {
	type args struct {
		nodes []*corev1.Node
		sel   labels.Selector
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []v1alpha1.ObservedNode
	}{
		"Empty": {
			reason: "No Nodes publish nothing.",
			args:   args{sel: labels.Everything()},
			want:   nil,
		},
		"SortedByName": {
			reason: "Nodes are published sorted by name, whatever the order of the watch.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{
				{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			}},
			want: []v1alpha1.ObservedNode{{Name: "a"}, {Name: "b"}},
		},
		"Selector": {
			reason: "Only Nodes the selector selects are published.",
			args: args{sel: labels.SelectorFromSet(labels.Set{"role": "edge"}), nodes: []*corev1.Node{
				{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"role": "edge"}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"role": "core"}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
			}},
			want: []v1alpha1.ObservedNode{{Name: "a"}},
		},
		"EveryField": {
			reason: "Addresses keep API order by type, the location annotation wins over the region label, and Kilo annotations are verbatim.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{
					Name:   "a",
					Labels: map[string]string{kilov1alpha1.LabelRegion: "region"},
					Annotations: map[string]string{
						kilov1alpha1.AnnotationLocation:    "dc1",
						kilov1alpha1.AnnotationKey:         "not a key",
						kilov1alpha1.AnnotationGranularity: "full",
						kilov1alpha1.AnnotationLastSeen:    "1700000000",
					},
				},
				Spec: corev1.NodeSpec{PodCIDRs: []string{"10.1.0.0/24", "fd00::/64"}},
				Status: corev1.NodeStatus{
					Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeExternalIP, Address: "203.0.113.2"},
						{Type: corev1.NodeInternalIP, Address: "192.168.0.2"},
						{Type: corev1.NodeHostName, Address: "a"},
						{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
					},
					Conditions: []corev1.NodeCondition{
						{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
						{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
					},
				},
			}}},
			want: []v1alpha1.ObservedNode{{
				Name:        "a",
				PodCIDRs:    []string{"10.1.0.0/24", "fd00::/64"},
				InternalIPs: []string{"192.168.0.2"},
				ExternalIPs: []string{"203.0.113.2", "203.0.113.1"},
				Location:    "dc1",
				Ready:       true,
				Kilo:        &v1alpha1.KiloAnnotations{Key: "not a key", Granularity: "full"},
			}},
		},
		"RegionAndSinglePodCIDR": {
			reason: "Without a location annotation the region label is the location; a lone spec.podCIDR is published.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{kilov1alpha1.LabelRegion: "region"}},
				Spec:       corev1.NodeSpec{PodCIDR: "10.1.0.0/24"},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
			}}},
			want: []v1alpha1.ObservedNode{{Name: "a", PodCIDRs: []string{"10.1.0.0/24"}, Location: "region"}},
		},
		"OnlyHeartbeat": {
			reason: "A Node whose only Kilo annotation is the heartbeat has no kilo block.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{kilov1alpha1.AnnotationLastSeen: "1", kilov1alpha1.AnnotationKey: ""}},
			}}},
			want: []v1alpha1.ObservedNode{{Name: "a"}},
		},
		"NilNode": {
			reason: "Nothing depends on Nodes being well-formed.",
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{nil, {}}},
			want:   []v1alpha1.ObservedNode{{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ObserveNodes(tc.args.nodes, tc.args.sel)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserveNodes(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObserveForeignPeers(t *testing.T) {
	owned := map[string]string{"mesh": "m1", "target": "a"}
	peer := func(name, key string, l map[string]string) *kilov1alpha1.Peer {
		return &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: kilov1alpha1.PeerSpec{PublicKey: key}}
	}
	type args struct {
		peers []*kilov1alpha1.Peer
		owned map[string]string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []v1alpha1.ForeignPeer
	}{
		"NoOwnedLabels": {
			reason: "Without owned labels no Peer is reported.",
			args:   args{peers: []*kilov1alpha1.Peer{peer("a", "k", nil)}},
			want:   nil,
		},
		"ForeignSorted": {
			reason: "Peers without every owned label are reported, sorted by name, keys verbatim.",
			args: args{owned: owned, peers: []*kilov1alpha1.Peer{
				peer("z", "kz", nil),
				peer("ours", "ko", map[string]string{"mesh": "m1", "target": "a", "extra": "x"}),
				peer("half", "kh", map[string]string{"mesh": "m1"}),
				peer("other-value", "not base64!", map[string]string{"mesh": "m2", "target": "a"}),
				nil,
			}},
			want: []v1alpha1.ForeignPeer{{Name: "half", PublicKey: "kh"}, {Name: "other-value", PublicKey: "not base64!"}, {Name: "z", PublicKey: "kz"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ObserveForeignPeers(tc.args.peers, tc.args.owned)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserveForeignPeers(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
