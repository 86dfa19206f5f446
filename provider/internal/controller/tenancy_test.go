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
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/ownership"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// versions returns the resource version of every Peer of a member cluster.
func versions(ctx context.Context, t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for n, p := range peers(ctx, t, c) {
		out[n] = p.ResourceVersion
	}
	return out
}

// TestHostileTenant runs a tenant's hand-made PeerSets against the Peers of
// another namespace's mesh in a member both use: none may change or delete
// a victim's Peer, and every attempt is reported on the attacker's set.
func TestHostileTenant(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	victimNS := namespace(ctx, t)
	tenantNS := namespace(ctx, t)
	providerConfig(ctx, t, victimNS, "member", m.Kubeconfig)
	providerConfig(ctx, t, tenantNS, "member", m.Kubeconfig)

	// The victim's mesh, as the function composes it.
	a := desired("mesh-a-node-1", keyA, "10.2.1.0/24")
	b := desired("mesh-a-node-2", keyB, "10.2.2.0/24")
	victim := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "mesh-b"}}
	victim.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	victim.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: mesh.OwnedLabels(victimNS, "mesh"), Peers: []v1alpha1.DesiredPeer{a, b}}
	if err := cp.kube.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the victim's Peers are applied", func() error {
		got := peers(ctx, t, m.Admin)
		if len(got) != 2 {
			return fmt.Errorf("%d Peers, want 2", len(got))
		}
		return nil
	})
	before := versions(ctx, t, m.Admin)

	// squat takes the victim's names and keys, with routes of its own.
	squat := []v1alpha1.DesiredPeer{desired(a.Name, keyA, "10.66.0.0/16"), desired(b.Name, keyC, "10.2.2.0/24")}
	cases := map[string]struct {
		reason   string
		selector map[string]string
		peers    []v1alpha1.DesiredPeer
		// synced is the wanted Synced message; empty for a set that syncs.
		synced string
		// problems are the wanted problems of a set that syncs.
		problems []string
	}{
		"SelectsEveryKilomeshPeer": {
			reason:   "A set that selects every kilomesh Peer would own, and delete, every mesh's Peers: refused.",
			selector: map[string]string{meshv1alpha1.LabelManagedBy: meshv1alpha1.ManagedByValue},
			synced:   "spec.forProvider.selector: kilomesh.io/mesh is required",
		},
		"ClaimsTheVictimsNamespace": {
			reason:   "A set that names the victim's namespace and mesh is refused.",
			selector: mesh.OwnedLabels(victimNS, "mesh"),
			peers:    squat,
			synced:   fmt.Sprintf("spec.forProvider.selector: kilomesh.io/mesh-namespace=%q claims the Peers of another namespace's mesh", victimNS),
		},
		"SameMeshName": {
			reason:   "A set of a mesh with the victim's name in the tenant's namespace owns none of the victim's Peers: it deletes nothing, and taking their names is a conflict.",
			selector: map[string]string{meshv1alpha1.LabelMesh: "mesh"},
			peers:    squat,
			problems: []string{a.Name + "=" + v1alpha1.ReasonPeerNameConflict, b.Name + "=" + v1alpha1.ReasonPeerNameConflict},
		},
		"OwnMeshNoPeers": {
			reason:   "A set of the tenant's own mesh that wants no Peer deletes none of the victim's.",
			selector: mesh.OwnedLabels(tenantNS, "mesh"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := strings.ToLower(name)
			ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: n}}
			ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
			ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: tc.selector, Peers: tc.peers}
			if err := cp.kube.Create(ctx, ps); err != nil {
				t.Fatal(err)
			}
			if tc.synced != "" {
				eventually(ctx, t, tc.reason, synced(peerSetOf(ctx, tenantNS, n), corev1.ConditionFalse, tc.synced))
			} else {
				eventually(ctx, t, tc.reason, func() error {
					got, err := getPeerSet(ctx, tenantNS, n)
					if err != nil {
						return err
					}
					if c := got.GetCondition(xpv2.TypeSynced); c.Status != corev1.ConditionTrue {
						return fmt.Errorf("Synced is %s: %s", c.Status, c.Message)
					}
					var problems []string
					for _, p := range got.Status.AtProvider.Problems {
						problems = append(problems, p.Peer+"="+p.Reason)
					}
					if d := cmp.Diff(tc.problems, problems); d != "" {
						return fmt.Errorf("problems: -want +got:\n%s", d)
					}
					return nil
				})
			}
			if d := cmp.Diff(before, versions(ctx, t, m.Admin)); d != "" {
				t.Errorf("\n%s\nthe victim's Peers changed: -before +after:\n%s", tc.reason, d)
			}
			// Deleting the attacker's set deletes nothing of the victim's.
			if err := cp.kube.Delete(ctx, ps); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "the attacker's set is gone", gone(ctx, ps))
			if d := cmp.Diff(before, versions(ctx, t, m.Admin)); d != "" {
				t.Errorf("\n%s\ndeleting the attacker's set changed the victim's Peers: -before +after:\n%s", tc.reason, d)
			}
		})
	}

	t.Run("FieldManagerOfItsOwn", func(t *testing.T) {
		p := &kilov1alpha1.Peer{}
		if err := m.Admin.Get(ctx, client.ObjectKey{Name: a.Name}, p); err != nil {
			t.Fatal(err)
		}
		var managers []string
		for _, f := range p.ManagedFields {
			managers = append(managers, f.Manager)
		}
		if want := []string{ownership.FieldManager(victimNS, "mesh-b")}; !cmp.Equal(want, managers) {
			t.Errorf("field managers of a set's Peer: want %v, got %v", want, managers)
		}
	})
}

// TestPeerSetTooLarge checks that a set whose Peers one object cannot
// hold is refused before it writes anything.
func TestPeerSetTooLarge(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-large"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider.Selector = mesh.OwnedLabels(ns, "mesh")
	// A tenth over the guard: an object the API server still stores.
	sample, err := json.Marshal(realisticPeers(100))
	if err != nil {
		t.Fatal(err)
	}
	ps.Spec.ForProvider.Peers = realisticPeers(v1alpha1.MaxPeersBytes * 11 / 10 / (len(sample) / 100))
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the set is refused", synced(peerSetOf(ctx, ns, "too-large"), corev1.ConditionFalse, "spec.forProvider.peers: the "))
	if got := peers(ctx, t, m.Admin); len(got) != 0 {
		t.Errorf("a refused set wrote %d Peers, want none", len(got))
	}
}
