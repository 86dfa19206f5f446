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
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/inventory"
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

// routing returns p with other allowed IPs.
func routing(p *kilov1alpha1.Peer, allowed ...string) *kilov1alpha1.Peer {
	p.Spec.AllowedIPs = allowed
	return p
}

// wantRoutes returns a desired Peer with other allowed IPs.
func wantRoutes(name, key string, allowed ...string) v1alpha1.DesiredPeer {
	d := want(name, key)
	d.Spec.AllowedIPs = allowed
	return d
}

const keyC = "Q0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0NDQ0M="

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
		if c.Partial {
			n += fmt.Sprint(c.Want.Spec.AllowedIPs)
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
		params     v1alpha1.PeerSetParameters
		actual     []*kilov1alpha1.Peer
		incomplete string
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
				actual: []*kilov1alpha1.Peer{
					routing(have("taken", "dGFrZW50YWtlbnRha2VudGFrZW50YWtlbnRha2VudGE=", nil), "10.8.0.0/24"),
					routing(have("holder", keyB, map[string]string{"mesh": "m2"}), "10.9.0.0/24"),
				},
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
		"RouteTaken": {
			reason: "A route that overlaps a foreign Peer's (inside it, containing it, or equal) is withheld and reported; the rest of the Peer is applied, and it does not count as applied.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{
					wantRoutes("a", keyA, "10.0.1.0/24", "10.7.0.0/16", "10.9.0.0/24", "192.168.0.0/16"),
				}},
				actual: []*kilov1alpha1.Peer{
					routing(have("vpn", keyB, nil), "10.0.0.0/16", "not a route"),
					routing(have("host", keyC, map[string]string{"mesh": "m2"}), "10.7.1.5/32", "10.9.0.0/24"),
				},
			},
			want: summary{Apply: []string{"a[192.168.0.0/16]"}, Problems: []string{"a=PeerRouteConflict"}, Desired: 1},
		},
		"EveryRouteTaken": {
			reason: "A Peer left without a route is not applied.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{wantRoutes("a", keyA, "10.0.1.0/24")}},
				actual: []*kilov1alpha1.Peer{routing(have("vpn", keyB, nil), "0.0.0.0/0")},
			},
			want: summary{Problems: []string{"a=PeerRouteConflict"}, Desired: 1},
		},
		"Incumbent": {
			reason: "Whoever routes a prefix first keeps it: the set's own Peer that already routes exactly that prefix keeps it when a foreign Peer comes to overlap it; a new route of the same Peer is still withheld.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{wantRoutes("a", keyA, "10.0.0.0/24", "10.0.1.0/24")}},
				actual: []*kilov1alpha1.Peer{
					routing(have("a", keyA, ownedLabels), "10.0.0.0/24"),
					routing(have("late", keyB, nil), "10.0.0.0/16"),
				},
			},
			want: summary{Owned: []string{"a"}, Problems: []string{"a=PeerRouteConflict"}, Desired: 1},
		},
		"IncumbentUpToDate": {
			reason: "A Peer whose routes all were routed first by the set is applied as usual.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{wantRoutes("a", keyA, "10.0.0.0/24")}},
				actual: []*kilov1alpha1.Peer{
					routing(have("a", keyA, ownedLabels), "10.0.0.0/24"),
					routing(have("late", keyB, nil), "10.0.0.0/16"),
				},
			},
			want: summary{Owned: []string{"a"}, Applied: 1, Desired: 1},
		},
		"IncumbencyIsByName": {
			reason: "Another Peer of the set routing the prefix is no incumbent of this one.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{wantRoutes("a", keyA, "10.0.0.0/24"), wantRoutes("b", keyB, "10.5.0.0/24")}},
				actual: []*kilov1alpha1.Peer{
					routing(have("b", keyB, ownedLabels), "10.0.0.0/24"),
					routing(have("vpn", keyC, nil), "10.0.0.0/16"),
				},
			},
			want: summary{Apply: []string{"b(update)"}, Owned: []string{"b"}, Problems: []string{"a=PeerRouteConflict"}, Desired: 2},
		},
		"IncompleteWritesNoNewRoute": {
			reason: "While the cluster's Peers cannot be read whole, no new route is written: an unread Peer may route it. Routes the set's own Peer already has are kept.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{
					wantRoutes("a", keyA, "10.0.0.0/24", "10.0.1.0/24"), wantRoutes("b", keyB, "10.1.0.0/24"),
				}},
				actual:     []*kilov1alpha1.Peer{routing(have("a", keyA, ownedLabels), "10.0.0.0/24")},
				incomplete: "more than 16384 Peers",
			},
			want: summary{Owned: []string{"a"}, Problems: []string{"a=PeerRouteConflict", "b=PeerRouteConflict"}, Desired: 2},
		},
		"UnreadablePeer": {
			reason: "A Peer whose name no API server accepts, or one kept without its labels, means the cluster's Peers are not read whole.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: []v1alpha1.DesiredPeer{wantRoutes("a", keyA, "10.0.0.0/24")}},
				actual: []*kilov1alpha1.Peer{routing(have("Bad_Name", keyB, nil), "10.9.0.0/24")},
			},
			want: summary{Problems: []string{"a=PeerRouteConflict"}, Desired: 1},
		},
		"BeyondBounds": {
			reason: "A Peer the provider could not read back whole (too many labels, allowed IPs, a preshared key too long) is invalid: it would be written at every reconcile.",
			args: args{
				params: v1alpha1.PeerSetParameters{Selector: sel, Peers: func() []v1alpha1.DesiredPeer {
					labels := want("labels", keyA)
					labels.Labels = map[string]string{}
					for i := range inventory.MaxLabels {
						labels.Labels[fmt.Sprintf("l%d", i)] = "v"
					}
					routes := want("routes", keyB)
					routes.Spec.AllowedIPs = nil
					for i := range inventory.MaxPeerAllowedIPs + 1 {
						routes.Spec.AllowedIPs = append(routes.Spec.AllowedIPs, fmt.Sprintf("10.%d.%d.0/24", i/256, i%256))
					}
					psk := want("psk", keyC)
					psk.Spec.PresharedKey = strings.Repeat("k", inventory.MaxKeyBytes+1)
					return []v1alpha1.DesiredPeer{labels, routes, psk}
				}()},
			},
			want: summary{Problems: []string{"labels=PeerInvalid", "psk=PeerInvalid", "routes=PeerInvalid"}, Desired: 3},
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
			// What NewPlan reads is the cache's own (the SegmentSets'
			// Peers, the cluster's Peers): it must change none of it.
			params := tc.args.params.DeepCopy()
			actual := make([]*kilov1alpha1.Peer, len(tc.args.actual))
			for i, a := range tc.args.actual {
				actual[i] = a.DeepCopy()
			}
			got := summarise(NewPlan(tc.args.params, tc.args.actual, tc.args.incomplete))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nNewPlan(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(*params, tc.args.params); diff != "" {
				t.Errorf("NewPlan(...) changed the desired Peers it read: -before, +after:\n%s", diff)
			}
			if diff := cmp.Diff(actual, tc.args.actual, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("NewPlan(...) changed the cluster's Peers it read: -before, +after:\n%s", diff)
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

func TestRouteCheck(t *testing.T) {
	var r foreignRoutes
	r.add(routing(have("vpn", keyB, nil), "10.0.0.0/16"))
	r.add(routing(have("host", keyC, nil), "10.9.1.1/32"))
	type want struct {
		kept []string
		msg  string
	}
	cases := map[string]struct {
		reason     string
		allowed    []string
		incumbent  *kilov1alpha1.Peer
		incomplete string
		want       want
	}{
		"Free": {
			reason:  "Routes no foreign Peer overlaps are kept, and nothing is said.",
			allowed: []string{"10.1.0.0/16"},
			want:    want{kept: []string{"10.1.0.0/16"}},
		},
		"Taken": {
			reason:  "A withheld route is named with the foreign Peer and its route.",
			allowed: []string{"10.0.1.0/24", "10.9.0.0/16", "10.1.0.0/16"},
			want: want{
				kept: []string{"10.1.0.0/16"},
				msg:  `routes not written, a Peer this set does not own routes them: 10.0.1.0/24 (Peer "vpn" routes 10.0.0.0/16), 10.9.0.0/16 (Peer "host" routes 10.9.1.1/32)`,
			},
		},
		"NoneLeft": {
			reason:  "A Peer left without a route is said not to be written.",
			allowed: []string{"10.0.0.0/8"},
			want:    want{msg: `routes not written, a Peer this set does not own routes them: 10.0.0.0/8 (Peer "vpn" routes 10.0.0.0/16); the Peer, left without a route, is not written`},
		},
		"Incomplete": {
			reason:     "While the Peers cannot be read whole, the bound is named with the routes withheld; the incumbent's route stays.",
			allowed:    []string{"10.1.0.0/16", "10.2.0.0/16"},
			incumbent:  routing(have("a", keyA, ownedLabels), "10.1.0.0/16"),
			incomplete: "more than 16384 Peers",
			want: want{
				kept: []string{"10.1.0.0/16"},
				msg:  "new routes not written, the Peers of the cluster cannot be read whole (more than 16384 Peers): 10.2.0.0/16",
			},
		},
		"Many": {
			reason:  "Past five routes, the rest are counted.",
			allowed: []string{"10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.4.0/24", "10.0.5.0/24", "10.0.6.0/24", "10.0.7.0/24"},
			want: want{msg: `routes not written, a Peer this set does not own routes them: ` +
				`10.0.1.0/24 (Peer "vpn" routes 10.0.0.0/16), 10.0.2.0/24 (Peer "vpn" routes 10.0.0.0/16), 10.0.3.0/24 (Peer "vpn" routes 10.0.0.0/16), ` +
				`10.0.4.0/24 (Peer "vpn" routes 10.0.0.0/16), 10.0.5.0/24 (Peer "vpn" routes 10.0.0.0/16) and 2 more; the Peer, left without a route, is not written`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kept, msg := r.check(tc.incomplete).keep(tc.allowed, tc.incumbent)
			if diff := cmp.Diff(tc.want, want{kept: kept, msg: msg}, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\nkeep(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
