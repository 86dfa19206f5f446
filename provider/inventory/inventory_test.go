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
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// now is the clock of every test: 2026-11-22T01:00:00Z.
var now = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// seen returns a heartbeat ago before now.
func seen(ago time.Duration) string { return strconv.FormatInt(now.Add(-ago).Unix(), 10) }

// node is a Node only created through the API, with these annotations.
func node(name string, ann map[string]string) *corev1.Node {
	return nodefixture.Node{Name: name, Annotations: ann}.Object()
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
		// cut is what the inventory says it left out.
		cut string
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
				nodefixture.New("a").Label("role", "edge").Seen(now.Add(-10 * time.Second)).Object(),
				nodefixture.New("b").Label("role", "core").Object(),
				nodefixture.New("c").Object(),
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
			reason: "Nothing depends on Nodes being well-formed: a Node without a name is none the API server keeps.",
			args:   args{sel: labels.Everything(), nodes: []*corev1.Node{nil, {}}},
			cut:    ReasonBadName,
		},
		"BadNames": {
			reason: "A Node whose name is no DNS subdomain of at most 253 bytes, which only a server that is not an API server sends, is not published, whether the selector selects it or not, and the inventory says so; its slim form neither.",
			args: args{sel: labels.SelectorFromSet(labels.Set{"role": "edge"}), nodes: []*corev1.Node{
				fresh(strings.Repeat("a", MaxNameBytes+1)),
				Slim(fresh(strings.Repeat("b", 1<<20))),
				fresh("Upper"),
				nodefixture.New("ok").Label("role", "edge").Seen(now.Add(-10 * time.Second)).Object(),
			}},
			want: []v1alpha1.ObservedNode{{Name: "ok"}},
			cut:  ReasonBadName,
		},
		"TooManyLabels": {
			reason: "A Node kept without its labels is not published, whether the selector would select it or not: a cut label set could change what it selects.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{
				Slim(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "many", Labels: manyLabels(MaxLabels + 1), Annotations: fresh("many").Annotations}}),
				fresh("ok"),
			}},
			want: []v1alpha1.ObservedNode{{Name: "ok"}},
			cut:  ReasonLabels,
		},
		"StaleSince": {
			reason: "A stale node says since when: its heartbeat plus 60 s (a heartbeat before 1970 counting as 1970), or its creation plus 60 s when it never wrote one, never after now.",
			args: args{sel: labels.Everything(), nodes: []*corev1.Node{
				node("heartbeat", map[string]string{kilov1alpha1.AnnotationLastSeen: seen(5 * time.Minute)}),
				{ObjectMeta: metav1.ObjectMeta{Name: "never", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}},
				{ObjectMeta: metav1.ObjectMeta{Name: "created-ahead", CreationTimestamp: metav1.NewTime(now.Add(time.Hour))}},
				node("ancient", map[string]string{kilov1alpha1.AnnotationLastSeen: "-99999999999999"}),
			}},
			want: []v1alpha1.ObservedNode{
				{Name: "ancient", Stale: true, StaleSince: at(time.Unix(60, 0))},
				{Name: "created-ahead", Stale: true, StaleSince: at(now)},
				{Name: "heartbeat", Stale: true, StaleSince: at(now.Add(-4 * time.Minute))},
				{Name: "never", Stale: true, StaleSince: at(now.Add(-59 * time.Minute))},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, cut := ObserveNodes(tc.args.nodes, tc.args.sel, now)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(v1alpha1.ObservedNode{}, "StaleSince")); diff != "" {
				t.Errorf("\n%s\nObserveNodes(...): -want, +got:\n%s", tc.reason, diff)
			}
			if name == "StaleSince" {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("\n%s\nObserveNodes(...): -want, +got:\n%s", tc.reason, diff)
				}
			}
			if cut != tc.cut {
				t.Errorf("\n%s\nObserveNodes(...): says %q was left out, want %q", tc.reason, cut, tc.cut)
			}
		})
	}
}

// at is a published moment.
func at(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &m
}

// manyLabels returns n distinct labels.
func manyLabels(n int) map[string]string {
	l := make(map[string]string, n)
	for i := range n {
		l[fmt.Sprintf("label-%d", i)] = "v"
	}
	return l
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
				nodefixture.New("b").Label("role", "edge").Seen(now.Add(-10 * time.Second)).Object(),
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

// TestSlimHostile slims what a server that is no API server may send: every
// value a Node keeps is bounded, and a Node that cannot be kept whole is
// marked so that it is never published.
func TestSlimHostile(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	cases := map[string]struct {
		reason string
		in     *corev1.Node
		want   *corev1.Node
	}{
		"LongName": {
			reason: "A name of 1 MiB is cut, with a digest of the whole after a character no name holds: unique, bounded and still invalid.",
			in:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: huge}},
			want:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: SlimName(huge)}},
		},
		"TooManyLabels": {
			reason: "A Node with more labels than MaxLabels keeps none, and is marked.",
			in:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: manyLabels(MaxLabels + 1)}},
			want:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{annotationCut: ReasonLabels}}},
		},
		"LabelBytes": {
			reason: "A Node whose labels take more than MaxLabelBytes keeps none, and is marked.",
			in:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"a": strings.Repeat("v", MaxLabelBytes)}}},
			want:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{annotationCut: ReasonLabels}}},
		},
		"MetaAndSpec": {
			reason: "A UID, a version, pod CIDRs and the Ready status are cut; the creation time is kept, for staleSince.",
			in: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(huge), ResourceVersion: huge, CreationTimestamp: metav1.NewTime(now)},
				Spec:       corev1.NodeSpec{PodCIDR: huge, PodCIDRs: slices.Repeat([]string{huge}, 100)},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionStatus(huge)}}},
			},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(huge[:MaxMetaBytes]), ResourceVersion: huge[:MaxMetaBytes], CreationTimestamp: metav1.NewTime(now)},
				Spec:       corev1.NodeSpec{PodCIDR: huge[:MaxAddressBytes], PodCIDRs: slices.Repeat([]string{huge[:MaxAddressBytes]}, MaxAddresses)},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionStatus(huge[:MaxWordBytes])}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Slim(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nSlim(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(got, Slim(got)); diff != "" {
				t.Errorf("\n%s\nSlim of a slim Node must be the same Node: -once, +twice:\n%s", tc.reason, diff)
			}
			if b := NodeBytes(got); b > 16<<10 {
				t.Errorf("\n%s\nthe slim Node weighs %d bytes", tc.reason, b)
			}
		})
	}
	if a, b := SlimName(huge), SlimName(huge[1:]+"y"); a == b || len(a) > MaxNameBytes || ValidName(a) {
		t.Errorf("SlimName: two long names must stay apart, bounded and invalid: %q, %q", a, b)
	}
}

func TestSlimPeer(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	in := &kilov1alpha1.Peer{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"mesh": "m"}, Annotations: map[string]string{"a": "dropped"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs:          slices.Repeat([]string{huge}, MaxPeerAllowedIPs+10),
			Endpoint:            &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: huge, IP: huge}, Port: 51820},
			PersistentKeepalive: 25,
			PresharedKey:        huge,
			PublicKey:           huge,
		},
	}
	want := &kilov1alpha1.Peer{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"mesh": "m"}},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs:          slices.Repeat([]string{huge[:MaxAddressBytes]}, MaxPeerAllowedIPs+1),
			Endpoint:            &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: huge[:MaxNameBytes+1], IP: huge[:MaxAddressBytes]}, Port: 51820},
			PersistentKeepalive: 25,
			PresharedKey:        huge[:MaxKeyBytes],
			PublicKey:           huge[:MaxKeyBytes],
		},
	}
	got := SlimPeer(in)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SlimPeer keeps every value cut, and one allowed IP more than a Peer may publish: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(got, SlimPeer(got)); diff != "" {
		t.Errorf("SlimPeer of a slim Peer must be the same Peer: -once, +twice:\n%s", diff)
	}
}

func TestJSONLen(t *testing.T) {
	cases := map[string]string{
		"Empty":      "",
		"ASCII":      "10.0.0.0/24",
		"Escapes":    "\"\\\n\r\t\b\f\x00\x1f<>&",
		"Multibyte":  "é€😀",
		"Separators": "\u2028\u2029",
		"Replaced":   safetext.Cut("a\xffb", 10),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonLen(s); got != len(b) {
				t.Errorf("jsonLen(%q) = %d, encoding/json writes %d bytes: %s", s, got, len(b), b)
			}
		})
	}
	// Every character below 128, and a few above.
	for r := rune(0); r < 0x3000; r++ {
		s := string(r)
		if b, err := json.Marshal(s); err != nil || jsonLen(s) != len(b) {
			t.Errorf("jsonLen(%q) = %d, encoding/json writes %d bytes", s, jsonLen(s), len(b))
		}
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
	named := func(prefix string, n int, routes ...string) []*kilov1alpha1.Peer {
		out := make([]*kilov1alpha1.Peer, n)
		for i := range out {
			out[i] = peer(fmt.Sprintf("%s-%05d", prefix, i), "k", nil, routes...)
		}
		return out
	}
	longName := func(i int) string { return fmt.Sprintf("%05d-%s", i, strings.Repeat("n", MaxNameBytes-6)) }
	cases := map[string]struct {
		reason string
		args   args
		want   []v1alpha1.ForeignPeer
		cut    string
		// check replaces want for the largest cases.
		check func(t *testing.T, got []v1alpha1.ForeignPeer)
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
			cut: "more than 4096 routes in one Peer; more than 16384 routes",
		},
		"VictimPastTheRouteBudget": {
			reason: "Junk Peers named to sort first spend the route budget: the victim's name and key are still published, and the inventory says routes are missing, so that its owner writes no new route there.",
			args: args{owned: owned, peers: append(named("aaa", 4, many(MaxPeerAllowedIPs)...),
				peer("victim", keyOf("victim"), nil, "10.200.0.0/16"))},
			check: func(t *testing.T, got []v1alpha1.ForeignPeer) {
				t.Helper()
				last := got[len(got)-1]
				if diff := cmp.Diff(v1alpha1.ForeignPeer{Name: "victim", PublicKey: keyOf("victim")}, last); diff != "" {
					t.Errorf("the victim past the route budget: -want, +got:\n%s", diff)
				}
			},
			cut: "more than 16384 routes",
		},
		"ExactlyTheRouteBudget": {
			reason: "Routes that fill the budget exactly leave nothing out: nothing is reported.",
			args:   args{owned: owned, peers: named("p", 4, many(MaxPeerAllowedIPs)...)},
			check: func(t *testing.T, got []v1alpha1.ForeignPeer) {
				t.Helper()
				if n := len(got[3].AllowedIPs); n != MaxPeerAllowedIPs {
					t.Errorf("the last Peer publishes %d routes, want %d", n, MaxPeerAllowedIPs)
				}
			},
		},
		"TooManyPeers": {
			reason: "Past MaxForeignPeers Peers, the later ones by name are left out, and the inventory says so.",
			args:   args{owned: owned, peers: named("p", MaxForeignPeers+1, "10.0.0.0/24")},
			check: func(t *testing.T, got []v1alpha1.ForeignPeer) {
				t.Helper()
				if len(got) != MaxForeignPeers || got[len(got)-1].Name != fmt.Sprintf("p-%05d", MaxForeignPeers-1) {
					t.Errorf("published %d Peers, the last %q: want the first %d by name", len(got), got[len(got)-1].Name, MaxForeignPeers)
				}
			},
			cut: fmt.Sprintf("more than %d Peers", MaxForeignPeers),
		},
		"Bytes": {
			reason: "Peers with the longest names and keys, and routes as long as a cut value gets, stop at MaxForeignBytes of JSON, routes first: every published Peer keeps its name and key.",
			args: args{owned: owned, peers: func() []*kilov1alpha1.Peer {
				out := make([]*kilov1alpha1.Peer, MaxForeignPeers)
				for i := range out {
					out[i] = peer(longName(i), strings.Repeat("k", MaxKeyBytes), nil, strings.Repeat("9", MaxAddressBytes), strings.Repeat("8", MaxAddressBytes))
				}
				return out
			}()},
			check: func(t *testing.T, got []v1alpha1.ForeignPeer) {
				t.Helper()
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > MaxForeignBytes || len(b) < MaxForeignBytes-2*MaxAddressBytes {
					t.Errorf("the foreign Peers take %d bytes of JSON, want at most %d and within a route of it", len(b), MaxForeignBytes)
				}
				if got[len(got)-1].AllowedIPs != nil || got[0].AllowedIPs == nil {
					t.Errorf("routes must go to the first Peers by name, and run out before names and keys do")
				}
			},
			cut: fmt.Sprintf("more than %d bytes of foreign Peers", MaxForeignBytes),
		},
		"BadName": {
			reason: "A Peer whose name no API server accepts is left out, and the inventory says so: its routes are unknown.",
			args:   args{owned: owned, peers: []*kilov1alpha1.Peer{peer("Bad_Name", "k", nil, "10.0.0.0/8"), SlimPeer(peer(strings.Repeat("x", 1<<20), "k", nil)), peer("ok", "k", nil)}},
			want:   []v1alpha1.ForeignPeer{{Name: "ok", PublicKey: "k"}},
			cut:    ReasonBadName,
		},
		"LabelsCut": {
			reason: "A Peer kept without its labels may or may not be owned: it is published as foreign, and reported.",
			args: args{owned: owned, peers: []*kilov1alpha1.Peer{SlimPeer(&kilov1alpha1.Peer{
				ObjectMeta: metav1.ObjectMeta{Name: "many", Labels: func() map[string]string {
					l := manyLabels(MaxLabels)
					l["mesh"], l["target"] = "m1", "a"
					return l
				}()},
				Spec: kilov1alpha1.PeerSpec{PublicKey: "k", AllowedIPs: []string{"10.1.0.0/16"}},
			})}},
			want: []v1alpha1.ForeignPeer{{Name: "many", PublicKey: "k", AllowedIPs: []string{"10.1.0.0/16"}}},
			cut:  ReasonLabels,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, cut := ObserveForeignPeers(tc.args.peers, tc.args.owned)
			if tc.check != nil {
				t.Log(tc.reason)
				tc.check(t, got)
			} else if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nObserveForeignPeers(...): -want, +got:\n%s", tc.reason, diff)
			}
			if cut != tc.cut {
				t.Errorf("\n%s\nObserveForeignPeers(...): says %q was left out, want %q", tc.reason, cut, tc.cut)
			}
			if b, err := json.Marshal(got); err != nil || len(b) > MaxForeignBytes {
				t.Errorf("\n%s\nObserveForeignPeers(...): %d bytes of JSON (%v), more than %d", tc.reason, len(b), err, MaxForeignBytes)
			}
		})
	}
}

// keyOf returns a valid WireGuard key made of a name.
func keyOf(name string) string {
	var k [kilov1alpha1.KeyLen]byte
	copy(k[:], name)
	return kilov1alpha1.EncodeKey(k)
}
