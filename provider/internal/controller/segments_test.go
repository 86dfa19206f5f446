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
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// reconciled returns nil once the PeerSet's Synced condition is True for
// its current spec.
func reconciled(ctx context.Context, ns, name string) func() error {
	return func() error {
		ps, err := getPeerSet(ctx, ns, name)
		if err != nil {
			return err
		}
		c := ps.GetCondition(xpv2.TypeSynced)
		if c.Status != corev1.ConditionTrue || c.ObservedGeneration != ps.Generation {
			return fmt.Errorf("Synced is %s %q for generation %d, the spec is at %d", c.Status, c.Message, c.ObservedGeneration, ps.Generation)
		}
		return nil
	}
}

// TestSegmentSets runs a PeerSet that moves its Peers into a SegmentSet
// and back, follows the SegmentSet's changes, and refuses what it cannot
// resolve.
func TestSegmentSets(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	mc := m.Admin
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)

	a := desired("peer-a", keyA, "10.2.1.0/24")
	b := desired("peer-b", keyB, "10.2.2.0/24")
	c := desired("peer-c", keyC, "10.2.3.0/24")
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-member"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{a, b}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the inline Peers are applied", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a, "peer-b": b}))
	eventually(ctx, t, "the set is reconciled", reconciled(ctx, ns, "to-member"))

	// The SegmentSet holds a, b and c; the set omits c, and writes its own
	// form of b.
	ownB := b
	ownB.Spec.AllowedIPs = []string{"10.2.2.0/25"}
	seg := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "segments-b"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{a, b, c}}}
	if err := cp.kube.Create(ctx, seg); err != nil {
		t.Fatal(err)
	}

	t.Run("SwitchingFormsRewritesNothing", func(t *testing.T) {
		before := versions(ctx, t, mc)
		update(ctx, t, ns, "to-member", func(p *v1alpha1.PeerSet) {
			p.Spec.ForProvider.Peers = nil
			p.Spec.ForProvider.SegmentSetRefs = []v1alpha1.SegmentSetReference{{Name: "segments-b", Omit: []string{"peer-c"}}}
		})
		eventually(ctx, t, "the set is reconciled in the shared form", reconciled(ctx, ns, "to-member"))
		if d := cmp.Diff(before, versions(ctx, t, mc)); d != "" {
			t.Errorf("A PeerSet whose Peers move into a SegmentSet it references keeps the same Peers: none may be written or deleted.\n-before +after:\n%s", d)
		}
	})

	t.Run("OwnFormReplacesTheSegmentSets", func(t *testing.T) {
		update(ctx, t, ns, "to-member", func(p *v1alpha1.PeerSet) { p.Spec.ForProvider.Peers = []v1alpha1.DesiredPeer{ownB} })
		eventually(ctx, t, "the set's own form of peer-b is applied", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a, "peer-b": ownB}))
	})

	t.Run("AChangedSegmentSetIsFollowed", func(t *testing.T) {
		// Only a watch of SegmentSets brings this change: the PeerSet itself
		// does not change, and its poll is an hour.
		eventually(ctx, t, "the set is reconciled", reconciled(ctx, ns, "to-member"))
		// The set's own writes wake it once more through the member's
		// watch; that wake-up must be over before the SegmentSet changes.
		time.Sleep(2 * time.Second)
		a2 := desired("peer-a", keyA, "10.2.9.0/24")
		set, err := getPeerSet(ctx, ns, "to-member")
		if err != nil {
			t.Fatal(err)
		}
		s := &v1alpha1.SegmentSet{}
		if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "segments-b"}, s); err != nil {
			t.Fatal(err)
		}
		s.Spec.Peers = []v1alpha1.DesiredPeer{a2, b, c}
		if err := cp.kube.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "peer-a follows its SegmentSet", hasPeers(ctx, t, mc, map[string]v1alpha1.DesiredPeer{"peer-a": a2, "peer-b": ownB}))
		// The reconcile that applied it ends its status where it began.
		time.Sleep(2 * time.Second)
		got, err := getPeerSet(ctx, ns, "to-member")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.AtProvider.Desired != 2 || got.Status.AtProvider.Applied != 2 {
			t.Errorf("The status counts the Peers the set keeps through its SegmentSets: desired %d applied %d, want 2 and 2", got.Status.AtProvider.Desired, got.Status.AtProvider.Applied)
		}
		if got.ResourceVersion != set.ResourceVersion {
			t.Errorf("A reconcile that applies a change and ends with the status it began with must not write it (a watch event of the mesh for nothing): resource version %s, was %s; conditions %v, were %v",
				got.ResourceVersion, set.ResourceVersion, got.Status.Conditions, set.Status.Conditions)
		}
	})

	t.Run("AMissingSegmentSetChangesNothing", func(t *testing.T) {
		before := versions(ctx, t, mc)
		update(ctx, t, ns, "to-member", func(p *v1alpha1.PeerSet) {
			p.Spec.ForProvider.SegmentSetRefs = append(p.Spec.ForProvider.SegmentSetRefs, v1alpha1.SegmentSetReference{Name: "not-yet"})
		})
		eventually(ctx, t, "the set says which reference it cannot resolve", synced(peerSetOf(ctx, ns, "to-member"), corev1.ConditionFalse, `spec.forProvider.segmentSetRefs[1].name: Not found: "not-yet"`))
		if d := cmp.Diff(before, versions(ctx, t, mc)); d != "" {
			t.Errorf("A PeerSet that cannot resolve what it keeps must write and delete nothing.\n-before +after:\n%s", d)
		}
		// The SegmentSet's creation wakes the set.
		late := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yet"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{desired("peer-d", keyD, "10.2.4.0/24")}}}
		if err := cp.kube.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the late SegmentSet's Peer is applied", func() error {
			if _, ok := peers(ctx, t, mc)["peer-d"]; !ok {
				return errors.New("peer-d is not in the member")
			}
			return nil
		})
	})
}

// TestSegmentSetsStayInTheirNamespace runs a tenant's PeerSet that names a
// SegmentSet of another namespace: it is not found, and nothing of it
// reaches the member.
func TestSegmentSetsStayInTheirNamespace(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	victimNS := namespace(ctx, t)
	tenantNS := namespace(ctx, t)
	providerConfig(ctx, t, tenantNS, "member", m.Kubeconfig)

	secret := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "segments"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{desired("victim-a", keyA, "10.2.1.0/24")}}}
	if err := cp.kube.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "steal"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, SegmentSetRefs: []v1alpha1.SegmentSetReference{{Name: "segments"}}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the reference is not found in the tenant's namespace", synced(peerSetOf(ctx, tenantNS, "steal"), corev1.ConditionFalse, `segmentSetRefs[0].name: Not found: "segments"`))
	if got := peers(ctx, t, m.Admin); len(got) != 0 {
		t.Errorf("A PeerSet reaches only the SegmentSets of its own namespace; the member holds %d Peers", len(got))
	}
}

// update changes a PeerSet, retrying on conflicts.
func update(ctx context.Context, t *testing.T, ns, name string, fn func(*v1alpha1.PeerSet)) {
	t.Helper()
	eventually(ctx, t, "the PeerSet is updated", func() error {
		ps, err := getPeerSet(ctx, ns, name)
		if err != nil {
			return err
		}
		fn(ps)
		return cp.kube.Update(ctx, ps)
	})
}

// controlledBy makes owner the controller of o, as Crossplane makes a
// mesh's composite resource the controller of every resource it composes.
func controlledBy(o metav1.Object, owner *corev1.ConfigMap) {
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}})
}

// TestSegmentSetsOfAnotherMesh runs, in one namespace, a mesh's PeerSet
// that names a SegmentSet another mesh composed, and one written by hand:
// each is refused, and nothing of it reaches the member. A SegmentSet of
// the PeerSet's own mesh is kept.
func TestSegmentSetsOfAnotherMesh(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	// ConfigMaps stand for the meshes' composite resources: the provider
	// compares controllers by UID, whatever their kind.
	meshes := map[string]*corev1.ConfigMap{}
	for _, n := range []string{"mesh-a", "mesh-b"} {
		meshes[n] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
		if err := cp.kube.Create(ctx, meshes[n]); err != nil {
			t.Fatal(err)
		}
	}
	own := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-segments"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{desired("peer-a", keyA, "10.2.1.0/24")}}}
	controlledBy(own, meshes["mesh-a"])
	other := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-segments"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{desired("peer-b", keyB, "10.2.2.0/24")}}}
	controlledBy(other, meshes["mesh-b"])
	hand := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hand-made"}, Spec: v1alpha1.SegmentSetSpec{Peers: []v1alpha1.DesiredPeer{desired("peer-c", keyC, "10.2.3.0/24")}}}
	for _, s := range []*v1alpha1.SegmentSet{own, other, hand} {
		if err := cp.kube.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mesh-a-member"}}
	controlledBy(ps, meshes["mesh-a"])
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, SegmentSetRefs: []v1alpha1.SegmentSetReference{{Name: "a-segments"}}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the SegmentSet of the set's own mesh is kept", hasPeers(ctx, t, m.Admin, map[string]v1alpha1.DesiredPeer{"peer-a": own.Spec.Peers[0]}))
	eventually(ctx, t, "the set is reconciled", reconciled(ctx, ns, "mesh-a-member"))

	cases := []struct {
		name, reason, ref, want string
	}{
		{"AnotherMesh", "A SegmentSet another mesh of the namespace composed is not the PeerSet's to keep.", "b-segments", `spec.forProvider.segmentSetRefs[1].name: Forbidden: the SegmentSet has ConfigMap mesh-b, the PeerSet ConfigMap mesh-a`},
		{"HandMade", "A SegmentSet written by hand is not a mesh's PeerSet's to keep.", "hand-made", `spec.forProvider.segmentSetRefs[1].name: Forbidden: the SegmentSet has no controller, the PeerSet ConfigMap mesh-a`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := versions(ctx, t, m.Admin)
			update(ctx, t, ns, "mesh-a-member", func(p *v1alpha1.PeerSet) {
				p.Spec.ForProvider.SegmentSetRefs = []v1alpha1.SegmentSetReference{{Name: "a-segments"}, {Name: tc.ref}}
			})
			eventually(ctx, t, "the reference is refused", synced(peerSetOf(ctx, ns, "mesh-a-member"), corev1.ConditionFalse, tc.want))
			if d := cmp.Diff(before, versions(ctx, t, m.Admin)); d != "" {
				t.Errorf("%s A PeerSet that references it must write and delete nothing.\n-before +after:\n%s", tc.reason, d)
			}
		})
	}
}

// TestSegmentSetBounds runs what no SegmentSet may make a PeerSet hold or
// read: a SegmentSet of more Peers than its schema allows is refused by the
// API server, and references whose SegmentSets hold more than
// MaxReferencedPeers Peers together stop the set, even when it omits them
// all and would keep none.
func TestSegmentSetBounds(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	ns := namespace(ctx, t)
	m := testenv.StartMember(t, testenv.MemberOptions{})
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	many := func(name string, n int) *v1alpha1.SegmentSet {
		s := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for i := range n {
			s.Spec.Peers = append(s.Spec.Peers, v1alpha1.DesiredPeer{Name: fmt.Sprintf("%s-%d", name, i)})
		}
		return s
	}

	t.Run("OversizeSegmentSet", func(t *testing.T) {
		err := cp.kube.Create(ctx, many("oversize", v1alpha1.MaxSegmentSetPeers+1))
		if err == nil || !strings.Contains(err.Error(), "spec.peers: Too many") {
			t.Errorf("A SegmentSet of %d Peers must be refused by the API server (spec.peers maxItems %d); got %v", v1alpha1.MaxSegmentSetPeers+1, v1alpha1.MaxSegmentSetPeers, err)
		}
	})

	t.Run("ReadBudget", func(t *testing.T) {
		ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "omits-all"}}
		ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
		ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{desired("peer-a", keyA, "10.2.1.0/24")}}
		for k := range v1alpha1.MaxReferencedPeers/v1alpha1.MaxSegmentSetPeers + 1 {
			s := many(fmt.Sprintf("s%d", k), v1alpha1.MaxSegmentSetPeers)
			if err := cp.kube.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			r := v1alpha1.SegmentSetReference{Name: s.Name}
			for _, p := range s.Spec.Peers {
				r.Omit = append(r.Omit, p.Name)
			}
			ps.Spec.ForProvider.SegmentSetRefs = append(ps.Spec.ForProvider.SegmentSetRefs, r)
		}
		if err := cp.kube.Create(ctx, ps); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the set stops at the read budget", synced(peerSetOf(ctx, ns, "omits-all"), corev1.ConditionFalse, "segmentSetRefs[10].name: Too many"))
		if got := peers(ctx, t, m.Admin); len(got) != 0 {
			t.Errorf("A PeerSet over the read budget must write nothing, not even its own Peers; the member holds %d Peers", len(got))
		}
	})
}
