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

package inventory

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// now is the clock of every test: 2026-11-22T01:00:00Z.
var now = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// seen returns a heartbeat ago before now.
func seen(ago time.Duration) string { return strconv.FormatInt(now.Add(-ago).Unix(), 10) }

func node(name string, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
}

// fresh is a Node whose heartbeat is 10 s old.
func fresh(name string) *corev1.Node {
	return node(name, map[string]string{kilov1alpha1.AnnotationLastSeen: seen(10 * time.Second)})
}

func TestObserveNodes(t *testing.T) {
	long := strings.Repeat("x", 100_000)
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
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{fresh("b"), fresh("a")}},
			want:   []v1alpha1.ObservedNode{{Name: "a"}, {Name: "b"}},
		},
		"Selector": {
			reason: "Only Nodes the selector selects are published.",
			args: args{sel: labels.SelectorFromSet(labels.Set{"role": "edge"}), nodes: []*corev1.Node{
				{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"role": "edge"}, Annotations: fresh("a").Annotations}},
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
						kilov1alpha1.AnnotationLocation:            "dc1",
						kilov1alpha1.AnnotationKey:                 "not a key",
						kilov1alpha1.AnnotationWireguardIP:         "10.4.0.1/16",
						kilov1alpha1.AnnotationEndpoint:            "203.0.113.1:51820",
						kilov1alpha1.AnnotationInternalIP:          "192.168.0.2/24",
						kilov1alpha1.AnnotationForceEndpoint:       "vpn.example.com:51820",
						kilov1alpha1.AnnotationClustermeshEndpoint: "[2001:db8::1]:51820",
						kilov1alpha1.AnnotationGranularity:         "full",
						kilov1alpha1.AnnotationPersistentKeepalive: "25",
						kilov1alpha1.AnnotationDiscoveredEndpoints: `{"k":{"IP":"198.51.100.1","Port":51820,"Zone":""}}`,
						kilov1alpha1.AnnotationForceInternalIP:     "192.168.0.3/24",
						kilov1alpha1.AnnotationAllowedLocationIPs:  "10.9.0.0/24,10.9.1.0/24",
						kilov1alpha1.AnnotationLeader:              "false",
						kilov1alpha1.AnnotationLastSeen:            seen(59 * time.Second),
						"unrelated":                                "dropped",
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
				Kilo: &v1alpha1.KiloAnnotations{
					Key:                 "not a key",
					WireguardIP:         "10.4.0.1/16",
					Endpoint:            "203.0.113.1:51820",
					InternalIP:          "192.168.0.2/24",
					ForceEndpoint:       "vpn.example.com:51820",
					ClustermeshEndpoint: "[2001:db8::1]:51820",
					Granularity:         "full",
					PersistentKeepalive: "25",
					DiscoveredEndpoints: `{"k":{"IP":"198.51.100.1","Port":51820,"Zone":""}}`,
					ForceInternalIP:     "192.168.0.3/24",
					AllowedLocationIPs:  "10.9.0.0/24,10.9.1.0/24",
					Leader:              "true",
				},
			}},
		},
		"RegionAndSinglePodCIDR": {
			reason: "Without a location annotation the region label is the location; a lone spec.podCIDR is published.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{kilov1alpha1.LabelRegion: "region"}, Annotations: fresh("a").Annotations},
				Spec:       corev1.NodeSpec{PodCIDR: "10.1.0.0/24"},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
			}}},
			want: []v1alpha1.ObservedNode{{Name: "a", PodCIDRs: []string{"10.1.0.0/24"}, Location: "region"}},
		},
		"EmptyLocationAnnotation": {
			reason: "A location annotation that is present but empty wins over the region label, as in Kilo: the node is in the unnamed location.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "a",
					Labels:      map[string]string{kilov1alpha1.LabelRegion: "region"},
					Annotations: map[string]string{kilov1alpha1.AnnotationLocation: "", kilov1alpha1.AnnotationLastSeen: seen(0)},
				},
			}}},
			want: []v1alpha1.ObservedNode{{Name: "a"}},
		},
		"EmptyForceInternalIP": {
			reason: "An empty force-internal-ip (Kilo: no internal IP) is published as \"-\", so that it survives omitempty; an empty leader annotation still makes a leader.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{node("a", map[string]string{
				kilov1alpha1.AnnotationForceInternalIP: "",
				kilov1alpha1.AnnotationLeader:          "",
				kilov1alpha1.AnnotationLastSeen:        seen(0),
			})}},
			want: []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{ForceInternalIP: "-", Leader: "true"}}},
		},
		"DashForceInternalIP": {
			reason: "A force-internal-ip of \"-\" is published verbatim.",
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{node("a", map[string]string{kilov1alpha1.AnnotationForceInternalIP: "-", kilov1alpha1.AnnotationLastSeen: seen(0)})}},
			want:   []v1alpha1.ObservedNode{{Name: "a", Kilo: &v1alpha1.KiloAnnotations{ForceInternalIP: "-"}}},
		},
		"OnlyHeartbeat": {
			reason: "A Node whose only Kilo annotations are the heartbeat and empty values has no kilo block.",
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{node("a", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(0), kilov1alpha1.AnnotationKey: ""})}},
			want:   []v1alpha1.ObservedNode{{Name: "a"}},
		},
		"Stale": {
			reason: "A heartbeat 60 s old, a missing one and an unparseable one are stale (Kilo: fresh iff now - lastSeen < 60 s, a bad value reads as 0); 59 s is fresh.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{
				node("at-limit", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(60 * time.Second)}),
				node("fresh", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(59 * time.Second)}),
				node("missing", nil),
				node("unparseable", map[string]string{kilov1alpha1.AnnotationLastSeen: "yesterday"}),
			}},
			want: []v1alpha1.ObservedNode{{Name: "at-limit", Stale: true}, {Name: "fresh"}, {Name: "missing", Stale: true}, {Name: "unparseable", Stale: true}},
		},
		"Capped": {
			reason: "Values from node data are cut to their caps: a 100 KB annotation or address never reaches status whole, and a list keeps whole elements.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{
					kilov1alpha1.AnnotationKey:                 long,
					kilov1alpha1.AnnotationDiscoveredEndpoints: long,
					kilov1alpha1.AnnotationLocation:            long,
					kilov1alpha1.AnnotationAllowedLocationIPs:  strings.Repeat("10.0.0.0/24,", 1000),
					kilov1alpha1.AnnotationLastSeen:            seen(0),
				}},
				Status: corev1.NodeStatus{Addresses: func() []corev1.NodeAddress {
					var a []corev1.NodeAddress
					for i := range 20 {
						a = append(a, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i)})
					}
					return append(a, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: long})
				}()},
			}}},
			want: []v1alpha1.ObservedNode{{
				Name: "a",
				InternalIPs: func() []string {
					var a []string
					for i := range MaxAddresses {
						a = append(a, fmt.Sprintf("192.168.0.%d", i))
					}
					return a
				}(),
				ExternalIPs: []string{long[:MaxAddressBytes]},
				Location:    long[:MaxLocationBytes],
				Kilo: &v1alpha1.KiloAnnotations{
					Key:                 long[:MaxKeyBytes],
					DiscoveredEndpoints: long[:MaxDiscoveredEndpointsBytes],
					AllowedLocationIPs:  strings.TrimSuffix(strings.Repeat("10.0.0.0/24,", (MaxAllowedLocationIPsBytes+1)/12), ","),
				},
			}},
		},
		"NilNode": {
			reason: "Nothing depends on Nodes being well-formed.",
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{nil, {}}},
			want:   []v1alpha1.ObservedNode{{Stale: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ObserveNodes(tc.args.nodes, tc.args.sel, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserveNodes(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStaleAt(t *testing.T) {
	type want struct {
		stale bool
		at    time.Time
		ok    bool
	}
	cases := map[string]struct {
		reason   string
		lastSeen int64
		want     want
	}{
		"Fresh": {
			reason:   "A heartbeat 10 s old turns stale 60 s after it was written.",
			lastSeen: now.Unix() - 10,
			want:     want{at: now.Add(50 * time.Second), ok: true},
		},
		"JustFresh": {
			reason:   "A heartbeat 59 s old turns stale in a second.",
			lastSeen: now.Unix() - 59,
			want:     want{at: now.Add(time.Second), ok: true},
		},
		"AtLimit": {
			reason:   "A heartbeat 60 s old is stale: no transition is ahead.",
			lastSeen: now.Unix() - 60,
			want:     want{stale: true},
		},
		"Missing": {
			reason:   "A missing heartbeat reads as 0: stale.",
			lastSeen: 0,
			want:     want{stale: true},
		},
		"Future": {
			reason:   "A heartbeat from the future is fresh until 60 s after it, as in Kilo.",
			lastSeen: now.Unix() + 100,
			want:     want{at: now.Add(160 * time.Second), ok: true},
		},
		"Overflow": {
			reason:   "Kilo's int64 subtraction overflows for a heartbeat far in the past, which it then reads as fresh; no transition can be scheduled.",
			lastSeen: -1 << 63,
			want:     want{},
		},
		"FarFuture": {
			reason:   "A heartbeat so far ahead that adding 60 s overflows is fresh for good.",
			lastSeen: 1<<63 - 1,
			want:     want{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stale := Stale(tc.lastSeen, now)
			at, ok := StaleAt(tc.lastSeen, now)
			got := want{stale: stale, at: at, ok: ok}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nStale, StaleAt(%d): -want, +got:\n%s", tc.reason, tc.lastSeen, diff)
			}
			if ok && !Stale(tc.lastSeen, at) {
				t.Errorf("\n%s\nStale(%d) at StaleAt = %v is false", tc.reason, tc.lastSeen, at)
			}
			if ok && Stale(tc.lastSeen, at.Add(-time.Second)) {
				t.Errorf("\n%s\nStale(%d) a second before StaleAt = %v is true", tc.reason, tc.lastSeen, at)
			}
		})
	}
}

func TestNextStale(t *testing.T) {
	type want struct {
		at time.Time
		ok bool
	}
	cases := map[string]struct {
		reason string
		nodes  []*corev1.Node
		sel    labels.Selector
		want   want
	}{
		"None": {
			reason: "Without Nodes nothing turns stale.",
			sel:    labels.Everything(),
		},
		"Earliest": {
			reason: "The earliest heartbeat of a fresh Node decides; stale Nodes do not count.",
			sel:    labels.Everything(),
			nodes: []*corev1.Node{
				node("a", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(5 * time.Second)}),
				node("b", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(40 * time.Second)}),
				node("c", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(90 * time.Second)}),
				nil,
			},
			want: want{at: now.Add(20 * time.Second), ok: true},
		},
		"Selected": {
			reason: "Only Nodes the selector selects count.",
			sel:    labels.SelectorFromSet(labels.Set{"role": "edge"}),
			nodes: []*corev1.Node{
				node("a", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(40 * time.Second)}),
				{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"role": "edge"}, Annotations: map[string]string{kilov1alpha1.AnnotationLastSeen: seen(10 * time.Second)}}},
			},
			want: want{at: now.Add(50 * time.Second), ok: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			at, ok := NextStale(tc.nodes, tc.sel, now)
			if diff := cmp.Diff(tc.want, want{at: at, ok: ok}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nNextStale(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSlim(t *testing.T) {
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"pool": "p"},
			Annotations: map[string]string{
				kilov1alpha1.AnnotationKey:      strings.Repeat("k", 100),
				kilov1alpha1.AnnotationLastSeen: "0001700000000",
				kilov1alpha1.AnnotationLeader:   "yes",
				"csi.volume.kubernetes.io/x":    "dropped",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}, ProviderID: "dropped"},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "a"}, {Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(now), Reason: "KubeletReady"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
			},
			Images: []corev1.ContainerImage{{Names: []string{"dropped"}}},
		},
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"pool": "p"},
			Annotations: map[string]string{
				kilov1alpha1.AnnotationKey:      strings.Repeat("k", MaxKeyBytes),
				kilov1alpha1.AnnotationLastSeen: "1700000000",
				kilov1alpha1.AnnotationLeader:   "",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.1.0.0/24"}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	got := Slim(full)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Slim keeps only what an inventory reads, cut, with the heartbeat as Kilo parses it: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(got, Slim(got)); diff != "" {
		t.Errorf("Slim of a slim Node must be the same Node: -once, +twice:\n%s", diff)
	}
	if diff := cmp.Diff(ObserveNode(full, now), ObserveNode(got, now)); diff != "" {
		t.Errorf("A slim Node must publish what the full Node publishes: -full, +slim:\n%s", diff)
	}
}

func TestChanged(t *testing.T) {
	with := func(ann map[string]string, rv string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv, Annotations: ann}}
	}
	cases := map[string]struct {
		reason string
		a, b   *corev1.Node
		want   bool
	}{
		"FreshHeartbeat": {
			reason: "A heartbeat that keeps a node fresh changes nothing: Kilo's heartbeats wake no one.",
			a:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(30 * time.Second)}, "1"),
			b:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(0)}, "2"),
			want:   false,
		},
		"StaleHeartbeat": {
			reason: "A heartbeat written while the node stays stale changes nothing.",
			a:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(5 * time.Minute)}, "1"),
			b:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(2 * time.Minute)}, "2"),
			want:   false,
		},
		"BackToFresh": {
			reason: "A heartbeat that makes a stale node fresh again is a change.",
			a:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(5 * time.Minute)}, "1"),
			b:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(0)}, "2"),
			want:   true,
		},
		"HeartbeatRemoved": {
			reason: "A fresh node whose heartbeat is removed is stale: a change.",
			a:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(0)}, "1"),
			b:      with(nil, "2"),
			want:   true,
		},
		"OtherAnnotation": {
			reason: "A change of a published annotation is a change, whatever the heartbeat does.",
			a:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(10 * time.Second), kilov1alpha1.AnnotationEndpoint: "203.0.113.1:51820"}, "1"),
			b:      with(map[string]string{kilov1alpha1.AnnotationLastSeen: seen(0), kilov1alpha1.AnnotationEndpoint: "203.0.113.2:51820"}, "2"),
			want:   true,
		},
		"OnlyVersion": {
			reason: "A new resource version alone is no change.",
			a:      with(nil, "1"),
			b:      with(nil, "2"),
			want:   false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Changed(tc.a, tc.b, now); got != tc.want {
				t.Errorf("\n%s\nChanged(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestObserveForeignPeers(t *testing.T) {
	owned := map[string]string{"mesh": "m1", "target": "a"}
	peer := func(name, key string, l map[string]string, allowed ...string) *kilov1alpha1.Peer {
		return &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: kilov1alpha1.PeerSpec{PublicKey: key, AllowedIPs: allowed}}
	}
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)
		}
		return out
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
			reason: "Peers without every owned label are reported, sorted by name, keys and allowed IPs verbatim.",
			args: args{owned: owned, peers: []*kilov1alpha1.Peer{
				peer("z", "kz", nil, "10.8.0.0/24", "192.168.9.9/32"),
				peer("ours", "ko", map[string]string{"mesh": "m1", "target": "a", "extra": "x"}),
				peer("half", "kh", map[string]string{"mesh": "m1"}),
				peer("other-value", "not base64!", map[string]string{"mesh": "m2", "target": "a"}),
				nil,
			}},
			want: []v1alpha1.ForeignPeer{
				{Name: "half", PublicKey: "kh"},
				{Name: "other-value", PublicKey: "not base64!"},
				{Name: "z", PublicKey: "kz", AllowedIPs: []string{"10.8.0.0/24", "192.168.9.9/32"}},
			},
		},
		"Capped": {
			reason: "A key and an allowed IP are cut to their caps, one Peer publishes at most MaxPeerAllowedIPs, and all together at most MaxForeignAllowedIPs, later names losing theirs first.",
			args: args{owned: owned, peers: []*kilov1alpha1.Peer{
				peer("a", strings.Repeat("k", 100), nil, append(many(MaxPeerAllowedIPs+10), strings.Repeat("1", 100))...),
				peer("b", "k", nil, many(MaxPeerAllowedIPs)...),
				peer("c", "k", nil, many(MaxPeerAllowedIPs)...),
				peer("d", "k", nil, many(MaxPeerAllowedIPs)...),
				peer("e", "k", nil, many(10)...),
				peer("f", "k", nil, strings.Repeat("1", 100)),
			}},
			want: []v1alpha1.ForeignPeer{
				{Name: "a", PublicKey: strings.Repeat("k", MaxKeyBytes), AllowedIPs: many(MaxPeerAllowedIPs)},
				{Name: "b", PublicKey: "k", AllowedIPs: many(MaxPeerAllowedIPs)},
				{Name: "c", PublicKey: "k", AllowedIPs: many(MaxPeerAllowedIPs)},
				{Name: "d", PublicKey: "k", AllowedIPs: many(MaxForeignAllowedIPs - 3*MaxPeerAllowedIPs)},
				{Name: "e", PublicKey: "k"},
				{Name: "f", PublicKey: "k"},
			},
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
