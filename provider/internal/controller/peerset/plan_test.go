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

package peerset

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

const (
	keyA = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
	keyB = "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI="
)

var sel = map[string]string{"mesh": "m1"}

func want(name, key string) v1alpha1.DesiredPeer {
	return v1alpha1.DesiredPeer{Name: name, Labels: map[string]string{"own": "x", "mesh": "overridden"}, Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.0.0.0/24"}, PublicKey: key}}
}

func have(name, key string, labels map[string]string) *kilov1alpha1.Peer {
	return &kilov1alpha1.Peer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "7"},
		Spec:       kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.0.0.0/24"}, PublicKey: key},
	}
}

var ownedLabels = map[string]string{"mesh": "m1", "own": "x"}

// summary is the part of a Plan the cases compare.
type summary struct {
	Apply    []string
	Delete   []string
	Owned    []string
	Problems []string
	Applied  int
	Desired  int
}

func summarise(p Plan) summary {
	s := summary{Applied: p.Applied, Desired: p.Desired}
	for _, c := range p.Apply {
		n := c.Want.Name
		if c.Have != nil {
			n += "(update)"
		}
		s.Apply = append(s.Apply, n)
	}
	for _, d := range p.Delete {
		s.Delete = append(s.Delete, d.Name)
	}
	for _, o := range p.Owned {
		s.Owned = append(s.Owned, o.Name)
	}
	for _, pr := range p.Problems {
		s.Problems = append(s.Problems, pr.Peer+"="+pr.Reason)
	}
	return s
}

func TestNewPlan(t *testing.T) {
	invalid := want("bad", "nope")
	invalid.Spec.AllowedIPs = []string{"banana"}
	drifted := have("a", keyA, ownedLabels)
	drifted.Spec.PresharedKey = "added by hand"
	type args struct {
		params v1alpha1.PeerSetParameters
		actual []*kilov1alpha1.Peer
	}
	cases := map[string]struct {
		reason string
		args   args
		want   summary
	}{
		"CreateAll": {
			reason: "Desired Peers missing from the cluster are applied, in name order.",
			args:   args{params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{want("b", keyB), want("a", keyA)}}},
			want:   summary{Apply: []string{"a", "b"}, Desired: 2},
		},
		"UpToDate": {
			reason: "Owned Peers as desired need nothing; extra labels added by others are fine.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{want("a", keyA)}},
				actual: []*kilov1alpha1.Peer{have("a", keyA, map[string]string{"mesh": "m1", "own": "x", "extra": "y"})},
			},
			want: summary{Owned: []string{"a"}, Applied: 1, Desired: 1},
		},
		"Drift": {
			reason: "An owned Peer edited by hand is corrected.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{want("a", keyA)}},
				actual: []*kilov1alpha1.Peer{drifted},
			},
			want: summary{Apply: []string{"a(update)"}, Owned: []string{"a"}, Desired: 1},
		},
		"Prune": {
			reason: "Owned Peers no longer desired are deleted; foreign ones never.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel},
				actual: []*kilov1alpha1.Peer{have("old", keyA, ownedLabels), have("foreign", keyB, map[string]string{"mesh": "m2"})},
			},
			want: summary{Delete: []string{"old"}, Owned: []string{"old"}},
		},
		"Conflicts": {
			reason: "A foreign Peer of the same name or key is reported and not touched; the others are applied.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{
					want("taken", "Y2xhc2huYW1lY2xhc2huYW1lY2xhc2huYW1lY2xhc2g="), want("dup-key", keyB), want("fine", keyA),
				}},
				actual: []*kilov1alpha1.Peer{have("taken", "dGFrZW50YWtlbnRha2VudGFrZW50YWtlbnRha2VudGE=", nil), have("holder", keyB, map[string]string{"mesh": "m2"})},
			},
			want: summary{Apply: []string{"fine"}, Problems: []string{"dup-key=PeerKeyConflict", "taken=PeerNameConflict"}, Desired: 3},
		},
		"KeyTwiceInTheSet": {
			reason: "The second desired Peer (by name) with an already used key is reported.",
			args:   args{params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{want("b", keyA), want("a", keyA)}}},
			want:   summary{Apply: []string{"a"}, Problems: []string{"b=PeerKeyConflict"}, Desired: 2},
		},
		"Invalid": {
			reason: "A Peer that breaks Kilo's rules is reported; an owned Peer of that name is kept, not deleted.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{invalid, want("a", keyA)}},
				actual: []*kilov1alpha1.Peer{have("bad", keyB, ownedLabels)},
			},
			want: summary{Apply: []string{"a"}, Owned: []string{"bad"}, Problems: []string{"bad=PeerInvalid"}, Desired: 2},
		},
		"EmptySelectorOwnsNothing": {
			reason: "An empty selector would own every Peer: it owns none instead.",
			args: args{
				params: v1alpha1.PeerSetParameters{},
				actual: []*kilov1alpha1.Peer{have("x", keyA, nil)},
			},
			want: summary{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summarise(NewPlan(tc.args.params, tc.args.actual))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nNewPlan(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDesired(t *testing.T) {
	d := want("a", keyA)
	d.Spec.Endpoint = &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{DNS: "a.example.com"}, Port: 51820}
	got := Desired(sel, &d)
	wantPeer := &kilov1alpha1.Peer{
		TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"own": "x", "mesh": "m1"}},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs: []string{"10.0.0.0/24"}, PublicKey: keyA,
			Endpoint: &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: "a.example.com"}, Port: 51820},
		},
	}
	if diff := cmp.Diff(wantPeer, got); diff != "" {
		t.Errorf("Desired: the selector's labels win over the Peer's own: -want, +got:\n%s", diff)
	}
}

func TestProblemMessage(t *testing.T) {
	cases := map[string]struct {
		reason   string
		problems int
		want     string
	}{
		"Few": {
			reason:   "Every problem is named.",
			problems: 2,
			want:     "2 of 9 Peers are not applied: p0: PeerInvalid: m; p1: PeerInvalid: m",
		},
		"Many": {
			reason:   "Past five problems the message points to the status.",
			problems: 7,
			want:     "7 of 9 Peers are not applied: p0: PeerInvalid: m; p1: PeerInvalid: m; p2: PeerInvalid: m; p3: PeerInvalid: m; p4: PeerInvalid: m; and 2 more (see status.atProvider.problems)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ps []v1alpha1.PeerProblem
			for i := range tc.problems {
				ps = append(ps, v1alpha1.PeerProblem{Peer: "p" + strconv.Itoa(i), Reason: v1alpha1.ReasonPeerInvalid, Message: "m"})
			}
			if diff := cmp.Diff(tc.want, problemMessage(9, ps)); diff != "" {
				t.Errorf("\n%s\nproblemMessage(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
