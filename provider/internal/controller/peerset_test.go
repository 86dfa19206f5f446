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
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

var meshLabels = map[string]string{"kilomesh.io/mesh": "m1", "kilomesh.io/target": "member"}

func desired(name, key string, cidr string) v1alpha1.DesiredPeer {
	return v1alpha1.DesiredPeer{
		Name:   name,
		Labels: map[string]string{"kilomesh.io/source": "cluster-b"},
		Spec: v1alpha1.PeerSpec{
			AllowedIPs:          []string{cidr},
			PersistentKeepalive: 10,
			PublicKey:           key,
			Endpoint:            &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{IP: "203.0.113.7"}, Port: 51820},
		},
	}
}

// peers returns the Peers of the member cluster by name.
func peers(ctx context.Context, t *testing.T, c client.Client) map[string]kilov1alpha1.Peer {
	t.Helper()
	l := &kilov1alpha1.PeerList{}
	if err := c.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	out := map[string]kilov1alpha1.Peer{}
	for _, p := range l.Items {
		out[p.Name] = p
	}
	return out
}

// hasPeers returns nil when the member cluster holds exactly the named
// Peers, each as the set wants it.
func hasPeers(ctx context.Context, t *testing.T, c client.Client, want map[string]v1alpha1.DesiredPeer, others ...string) func() error {
	return func() error {
		got := peers(ctx, t, c)
		var names []string
		for n := range got {
			names = append(names, n)
		}
		var wantNames []string
		for n := range want {
			wantNames = append(wantNames, n)
		}
		wantNames = append(wantNames, others...)
		sort.Strings(names)
		sort.Strings(wantNames)
		if d := cmp.Diff(wantNames, names); d != "" {
			return fmt.Errorf("Peers in the cluster: -want +got:\n%s", d)
		}
		for n, d := range want {
			p := got[n]
			if diff := cmp.Diff(d.Spec.Kilo(), p.Spec, cmpopts.EquateEmpty()); diff != "" {
				return fmt.Errorf("Peer %s spec: -want +got:\n%s", n, diff)
			}
			for k, v := range meshLabels {
				if p.Labels[k] != v {
					return fmt.Errorf("Peer %s lacks the selector label %s=%s: %v", n, k, v, p.Labels)
				}
			}
			if p.Labels["kilomesh.io/source"] != "cluster-b" {
				return fmt.Errorf("Peer %s lacks its own label: %v", n, p.Labels)
			}
		}
		return nil
	}
}

func TestPeerSet(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	mc := m.Admin
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)

	// Peers someone else manages: one in the way by name, one by key, and
	// one that is merely there.
	foreign := []*kilov1alpha1.Peer{
		{ObjectMeta: metav1.ObjectMeta{Name: "clash-name"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.8.0.1/32"}, PublicKey: keyD}},
		{ObjectMeta: metav1.ObjectMeta{Name: "holds-key-c", Labels: map[string]string{"kilomesh.io/mesh": "m1"}}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.8.0.2/32"}, PublicKey: keyC}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.8.0.3/32"}, PublicKey: "YnlzdGFuZGVyYnlzdGFuZGVyYnlzdGFuZGVyYnlzdGE="}},
	}
	for _, p := range foreign {
		if err := mc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	foreignBefore := peers(ctx, t, mc)
	foreignNames := []string{"clash-name", "holds-key-c", "bystander"}
	unchangedForeign := func(t *testing.T) {
		t.Helper()
		now := peers(ctx, t, mc)
		for _, n := range foreignNames {
			if d := cmp.Diff(foreignBefore[n], now[n]); d != "" {
				t.Errorf("foreign Peer %s was changed: -before +now:\n%s", n, d)
			}
		}
	}

	a := desired("peer-a", keyA, "10.2.1.0/24")
	b := desired("peer-b", keyB, "10.2.2.0/24")
	clashName := desired("clash-name", "Y2xhc2huYW1lY2xhc2huYW1lY2xhc2huYW1lY2xhc2g=", "10.2.3.0/24")
	clashKey := desired("peer-c", keyC, "10.2.4.0/24")
	invalid := desired("peer-invalid", "not-a-key", "10.2.5.0/24")
	invalid.Spec.AllowedIPs = []string{"banana"}

	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-member"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{a, b, clashName, clashKey, invalid}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}

	t.Run("AppliesTheRestAndReportsProblems", func(t *testing.T) {
		eventually(ctx, t, "the valid Peers are applied", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a, "peer-b": b}, foreignNames...))
		eventually(ctx, t, "the problems are reported", func() error {
			got, err := getPeerSet(ctx, ns, "to-member")
			if err != nil {
				return err
			}
			at := got.Status.AtProvider
			if at.Desired != 5 || at.Applied != 2 {
				return fmt.Errorf("desired %d applied %d, want 5 and 2", at.Desired, at.Applied)
			}
			var reasons []string
			for _, p := range at.Problems {
				reasons = append(reasons, p.Peer+"="+p.Reason)
			}
			want := []string{"clash-name=PeerNameConflict", "peer-c=PeerKeyConflict", "peer-invalid=PeerInvalid"}
			if d := cmp.Diff(want, reasons); d != "" {
				return fmt.Errorf("problems: -want +got:\n%s", d)
			}
			c := got.GetCondition(xpv2.TypeReady)
			if c.Status != corev1.ConditionFalse || c.Reason != "PeerProblems" || !strings.Contains(c.Message, "3 of 5 Peers are not applied") {
				return fmt.Errorf("Ready is %s %s %q", c.Status, c.Reason, c.Message)
			}
			if s := got.GetCondition(xpv2.TypeSynced); s.Status != corev1.ConditionTrue {
				return fmt.Errorf("Synced is %s: %s", s.Status, s.Message)
			}
			return nil
		})
		unchangedForeign(t)
	})

	t.Run("HandEditsAreCorrected", func(t *testing.T) {
		// A hand edit that changes a field the set sets, and one that adds
		// a field the set does not set.
		p := &kilov1alpha1.Peer{}
		if err := mc.Get(ctx, client.ObjectKey{Name: "peer-a"}, p); err != nil {
			t.Fatal(err)
		}
		p.Spec.AllowedIPs = []string{"0.0.0.0/0"}
		p.Spec.PresharedKey = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
		if err := mc.Update(ctx, p, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the owned Peer is put back", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a, "peer-b": b}, foreignNames...))
		unchangedForeign(t)
	})

	t.Run("PeersNoLongerDesiredAreDeleted", func(t *testing.T) {
		eventually(ctx, t, "the set is updated", func() error {
			got, err := getPeerSet(ctx, ns, "to-member")
			if err != nil {
				return err
			}
			got.Spec.ForProvider.Peers = []v1alpha1.DesiredPeer{a, clashKey}
			return cp.kube.Update(ctx, got)
		})
		eventually(ctx, t, "peer-b is deleted", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a}, foreignNames...))
		unchangedForeign(t)
	})

	t.Run("DeletingTheSetDeletesExactlyItsPeers", func(t *testing.T) {
		if err := cp.kube.Delete(ctx, ps); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the set is gone", gone(ctx, &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-member"}}))
		eventually(ctx, t, "only the foreign Peers remain", hasPeers(ctx, t, mc, nil, foreignNames...))
		unchangedForeign(t)
	})
}

func TestPeerSetWithoutPeerCRD(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{NoPeerCRD: true})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-member"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{desired("peer-a", keyA, "10.2.1.0/24")}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "a missing Peer CRD is named in Synced", synced(peerSetOf(ctx, ns, "to-member"), corev1.ConditionFalse, "kilo.squat.ai Peer CRD not installed in this cluster"))

	// Nothing to delete in such a cluster: deletion finishes.
	if err := cp.kube.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the set is gone", gone(ctx, ps))
}

// TestPeerRouteConflict shares a member between a hand-made VPN Peer and
// two tenants' PeerSets. A route that a Peer the set does not own already
// routes is withheld and reported, the rest of the Peer applied; another
// tenant's set cannot route the first tenant's prefix; and a route a set
// wrote first stays when a foreign Peer comes to overlap it.
func TestPeerRouteConflict(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	mc := m.Admin
	vpn := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "vpn"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.50.0.0/16"}, PublicKey: keyD}}
	if err := mc.Create(ctx, vpn); err != nil {
		t.Fatal(err)
	}
	tenantA, tenantB := namespace(ctx, t), namespace(ctx, t)
	providerConfig(ctx, t, tenantA, "member", m.Kubeconfig)
	providerConfig(ctx, t, tenantB, "member", m.Kubeconfig)

	pa := desired("peer-a", keyA, "10.50.1.0/24")
	pa.Spec.AllowedIPs = append(pa.Spec.AllowedIPs, "10.60.0.0/24")
	a := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "a"}}
	a.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	a.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: map[string]string{"kilomesh.io/mesh": "a"}, Peers: []v1alpha1.DesiredPeer{pa}}
	if err := cp.kube.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	problem := func(ns, name, want string) func() error {
		return func() error {
			got, err := getPeerSet(ctx, ns, name)
			if err != nil {
				return err
			}
			ps := got.Status.AtProvider.Problems
			if len(ps) != 1 || ps[0].Reason != v1alpha1.ReasonPeerRouteConflict || !strings.Contains(ps[0].Message, want) {
				return fmt.Errorf("problems %+v, want one PeerRouteConflict saying %q", ps, want)
			}
			return nil
		}
	}
	routesOf := func(name string, want ...string) func() error {
		return func() error {
			p, ok := peers(ctx, t, mc)[name]
			if !ok {
				return fmt.Errorf("no Peer %s in the member", name)
			}
			if d := cmp.Diff(want, p.Spec.AllowedIPs); d != "" {
				return fmt.Errorf("routes of %s: -want +got:\n%s", name, d)
			}
			return nil
		}
	}

	t.Run("RouteOfAHandMadePeerWithheld", func(t *testing.T) {
		eventually(ctx, t, "the route the VPN Peer has is withheld, and said", problem(tenantA, "a", `10.50.1.0/24 (Peer "vpn" routes 10.50.0.0/16)`))
		eventually(ctx, t, "the rest of the Peer is applied", routesOf("peer-a", "10.60.0.0/24"))
	})

	t.Run("AnotherTenantCannotRouteIt", func(t *testing.T) {
		pb := desired("peer-b", keyB, "10.60.0.0/25")
		b := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenantB, Name: "b"}}
		b.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
		b.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: map[string]string{"kilomesh.io/mesh": "b"}, Peers: []v1alpha1.DesiredPeer{pb}}
		if err := cp.kube.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the other tenant's route is withheld, and said", problem(tenantB, "b", `10.60.0.0/25 (Peer "peer-a" routes 10.60.0.0/24)`))
		if _, ok := peers(ctx, t, mc)["peer-b"]; ok {
			t.Error("a Peer left without a route was written")
		}
	})

	t.Run("FirstComeKeepsIt", func(t *testing.T) {
		late := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.60.0.0/16"}, PublicKey: keyC}}
		if err := mc.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		// A change of the set makes it write peer-a again, with the late
		// Peer in the member.
		eventually(ctx, t, "the set is updated", func() error {
			got, err := getPeerSet(ctx, tenantA, "a")
			if err != nil {
				return err
			}
			got.Spec.ForProvider.Peers[0].Labels["kilomesh.io/revision"] = "2"
			return cp.kube.Update(ctx, got)
		})
		eventually(ctx, t, "peer-a is written again", func() error {
			if p := peers(ctx, t, mc)["peer-a"]; p.Labels["kilomesh.io/revision"] != "2" {
				return fmt.Errorf("peer-a has labels %v", p.Labels)
			}
			return nil
		})
		if err := routesOf("peer-a", "10.60.0.0/24")(); err != nil {
			t.Errorf("the route the set wrote first must stay: %v", err)
		}
		if err := problem(tenantA, "a", `Peer "vpn"`)(); err != nil {
			t.Error(err)
		}
	})
}
