//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// testHostileTenant puts a tenant of another namespace next to the live
// mesh, with credentials of its own for a member the mesh uses, and has it
// try the attacks of the security model:
//
//   - a ClusterMesh whose additionalCIDRs cover the victim's pods, to draw
//     the victim's traffic in the shared member through its own Peer;
//   - a PeerSet by hand whose selector claims every kilomesh Peer, and one
//     that names the victim's namespace and mesh, to delete them;
//   - a PeerSet by hand that routes the victim's pod network in the shared
//     member (provider-kilomesh withholds the route);
//   - junk Peers that hold more routes than the mesh reads of the shared
//     member, so that the victim's routes are past the budget (no new route
//     is written into that member while they are);
//   - a namespaced ProviderConfig with InjectedIdentity, to act as the
//     provider itself, named by a mesh (provider-kilomesh refuses it) and by
//     a mesh with delivery: Objects (to hand it to provider-kubernetes,
//     which would not refuse it: the API refuses the mesh).
//
// None of the victim's Peers may change, and every attempt must be reported
// where the tenant looks: its mesh's status, its PeerSets' and inventories'
// conditions.
func testHostileTenant(ctx context.Context, t *testing.T, mode string, victim meshRef) {
	ns := "hostile-" + strings.ToLower(mode)
	shared := "cluster-b"
	if err := script(ctx, "providerconfigs.sh", ns, shared, noPeerCRD); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	before := uids(victim)
	var cleanup []*unstructured.Unstructured
	defer func() {
		for _, u := range cleanup {
			_ = mgmt.Delete(ctx, u)
		}
		waitManagedGone(ctx, t, ns, 90*time.Second)
		// The junk gone, the victim writes into cluster-b again.
		waitCondition(ctx, t, victim, "PeersDelivered", "True", convergeTimeout)
	}()
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if err := mgmt.Create(ctx, u); err != nil {
			t.Fatalf("cannot create %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		cleanup = append(cleanup, u)
	}

	// The route: cluster-d (no Kilo Peer CRD, but nodes) declares the
	// victim's cluster-a pod network as its additional network, so its Peer
	// in cluster-b would route it.
	attacker := meshRef{ns: ns, name: "draw"}
	d := member(noPeerCRD, noPeerCRD)
	d.AdditionalCIDRs = []meshv1alpha1.CIDR{"10.1.0.0/16"}
	b := member(shared, shared)
	b.PodCIDRs = []meshv1alpha1.CIDR{"10.2.0.0/16"}
	// A tenant has no ClusterProviderConfig of its own: its meshes deliver
	// through PeerSets, whatever the victim's delivery.
	create(newMesh(attacker, "PeerSet", b, d))

	// The PeerSets: one claiming every kilomesh Peer of cluster-b, one
	// naming the victim's namespace and mesh.
	for i, sel := range []map[string]any{
		{"app.kubernetes.io/managed-by": "kilomesh"},
		{"app.kubernetes.io/managed-by": "kilomesh", meshv1alpha1.LabelMeshNamespace: victim.ns, meshv1alpha1.LabelMesh: victim.name},
	} {
		create(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kube.kilomesh.io/v1alpha1", "kind": "PeerSet",
			"metadata": map[string]any{"name": fmt.Sprintf("wipe-%d", i), "namespace": ns},
			"spec": map[string]any{
				"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": shared},
				"forProvider":       map[string]any{"selector": sel, "peers": []any{}},
			},
		}})
	}

	// The identity: a namespaced ProviderConfig that lends the provider's
	// own, named by a mesh of the tenant.
	create(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "injected", "namespace": ns},
		"spec":     map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
	}})
	borrower := meshRef{ns: ns, name: "borrow"}
	// Its networks stay clear of the attacker's mesh, which shares
	// cluster-d with it: of two meshes of a namespace whose networks
	// overlap in a shared member, the younger freezes.
	a := member("cluster-a", "injected")
	a.PodCIDRs = []meshv1alpha1.CIDR{"10.91.0.0/16"}
	create(newMesh(borrower, "PeerSet", a, member(noPeerCRD, noPeerCRD)))

	// The identity again, through provider-kubernetes: a mesh with
	// delivery: Objects would hand the namespaced ProviderConfig to
	// provider-kubernetes, which honours InjectedIdentity. The API refuses
	// the mesh.
	handover := newMesh(meshRef{ns: ns, name: "handover"}, "PeerSet", a, member(noPeerCRD, noPeerCRD))
	_ = unstructured.SetNestedField(handover.Object, string(meshv1alpha1.DeliveryObjects), "spec", "delivery")
	objectsRefused := errors.New("a mesh with delivery: Objects naming namespaced ProviderConfigs was admitted")
	if err := mgmt.Create(ctx, handover); err != nil {
		if strings.Contains(err.Error(), "ClusterProviderConfig") {
			objectsRefused = nil
		} else {
			objectsRefused = fmt.Errorf("refused for another reason: %w", err)
		}
	} else {
		cleanup = append(cleanup, handover)
	}

	// The route again, by hand: a PeerSet of the tenant, through its own
	// config for cluster-b, routing the victim's pod network there.
	create(handPeerSet(ns, "route-by-hand", "by-hand", shared, []any{
		handPeer("by-hand-1", fixture.Key("a route by hand"), "10.1.0.0/16", "10.250.9.0/24"),
	}))

	// Every attempt is reported.
	reported := map[string]error{
		"the route is withheld: PeerRouteConflict on the attacker's mesh": retryFor(ctx, func() error {
			u, _, err := stack.GetMesh(ctx, mgmt, attacker.ns, attacker.name)
			if err != nil {
				return err
			}
			clusters, _, _ := unstructured.NestedSlice(u.Object, "status", "clusters")
			for _, c := range clusters {
				m, _ := c.(map[string]any)
				conflicts, _, _ := unstructured.NestedSlice(m, "conflicts")
				for _, x := range conflicts {
					cm, _ := x.(map[string]any)
					if cm["reason"] == "PeerRouteConflict" && strings.Contains(fmt.Sprint(cm["message"]), "10.1.0.0/16") {
						return nil
					}
				}
			}
			return fmt.Errorf("no PeerRouteConflict for 10.1.0.0/16 in the status of %s: %v", attacker, clusters)
		}),
		"the PeerSet claiming every kilomesh Peer is refused":                        refusedSet(ctx, ns, "wipe-0"),
		"the PeerSet naming the victim is refused":                                   refusedSet(ctx, ns, "wipe-1"),
		"InjectedIdentity from a namespaced ProviderConfig is refused":               problem(ctx, borrower, "cluster-a", 90*time.Second, "InjectedIdentity"),
		"delivery: Objects with a namespaced ProviderConfig is refused":              objectsRefused,
		"the route of a hand-made PeerSet is withheld: PeerRouteConflict on the set": peerSetProblem(ctx, ns, "route-by-hand", "PeerRouteConflict", "10.1.0.0/16"),
	}
	if mode == string(meshv1alpha1.DeliveryPeerSet) {
		// The budget: junk Peers that sort first and hold more routes than
		// the mesh reads of a member, so that the victim's Peers are past
		// the budget and their routes pass for free. Once in a run is
		// enough: the rule does not depend on the delivery.
		create(junkPeerSet(ns, shared))
		reported["past the route budget no new route is written: ForeignPeersIncomplete on the attacker's mesh"] =
			problem(ctx, attacker, shared, 3*time.Minute, "not known whole")
	}
	for what, err := range reported {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// What the attacker got into cluster-b: its cluster-d Peer, without the
	// victim's network.
	for _, p := range meshPeers(shared, attacker) {
		for _, a := range p.Spec.AllowedIPs {
			if strings.HasPrefix(a, "10.1.") {
				t.Errorf("the attacker's Peer %s in %s routes %s, a network of the victim", p.Name, shared, a)
			}
		}
	}
	for _, p := range rec.snapshot(shared) {
		if p.Labels[meshv1alpha1.LabelMeshNamespace] != ns {
			continue
		}
		for _, a := range p.Spec.AllowedIPs {
			if strings.HasPrefix(a, "10.1.") {
				t.Errorf("the tenant's Peer %s in %s routes %s, a network of the victim", p.Name, shared, a)
			}
		}
	}
	noChanges(t, t0, ownedBy(victim), "a hostile tenant tried to draw, delete and borrow")
	sameUIDs(t, victim, before, "a hostile tenant tried to draw, delete and borrow")
	changed := len(rec.since(shared, t0, ownedBy(victim)))
	report.notef("%s: a hostile tenant tried the route, PeerSet-selector and ProviderConfig attacks: victim Peers changed: %d; attempts reported: %d of %d", mode, changed, countNil(reported), len(reported))
}

// handPeerSet is a PeerSet a tenant makes by hand in its namespace, for a
// mesh name of its own, through its config for member.
func handPeerSet(ns, name, mesh, member string, peers []any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kube.kilomesh.io/v1alpha1", "kind": "PeerSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": member},
			"forProvider": map[string]any{
				"selector": map[string]any{"app.kubernetes.io/managed-by": "kilomesh", meshv1alpha1.LabelMeshNamespace: ns, meshv1alpha1.LabelMesh: mesh},
				"peers":    peers,
			},
		},
	}}
}

// handPeer is one Peer of a hand-made PeerSet.
func handPeer(name, key string, allowed ...string) map[string]any {
	ips := make([]any, len(allowed))
	for i, a := range allowed {
		ips[i] = a
	}
	return map[string]any{"name": name, "spec": map[string]any{"publicKey": key, "allowedIPs": ips}}
}

// junkPeerSet holds five Peers named to sort first, each with 4,096 host
// routes of 100.64.0.0/10 (which no mesh of the stack uses): 20,480 routes,
// more than a mesh reads of a member.
func junkPeerSet(ns, member string) *unstructured.Unstructured {
	var peers []any
	for i := range 5 {
		ips := make([]string, 0, 4096)
		for j := range 4096 {
			n := i*4096 + j
			ips = append(ips, fmt.Sprintf("100.%d.%d.%d/32", 64+n>>16, n>>8&255, n&255))
		}
		peers = append(peers, handPeer(fmt.Sprintf("aaa-junk-%d", i), fixture.Key(fmt.Sprintf("junk %d", i)), ips...))
	}
	return handPeerSet(ns, "junk", "junk", member, peers)
}

// peerSetProblem waits until a hand-made PeerSet reports a problem with the
// reason, quoting what.
func peerSetProblem(ctx context.Context, ns, name, reason, what string) error {
	return retryFor(ctx, func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kube.kilomesh.io/v1alpha1")
		u.SetKind("PeerSet")
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		problems, _, _ := unstructured.NestedSlice(u.Object, "status", "atProvider", "problems")
		for _, p := range problems {
			m, _ := p.(map[string]any)
			if m["reason"] == reason && strings.Contains(fmt.Sprint(m["message"]), what) {
				return nil
			}
		}
		return fmt.Errorf("PeerSet %s/%s reports no %s quoting %s: %v", ns, name, reason, what, problems)
	})
}

// refusedSet waits until a hand-made PeerSet says it refuses its selector.
func refusedSet(ctx context.Context, ns, name string) error {
	return retryFor(ctx, func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kube.kilomesh.io/v1alpha1")
		u.SetKind("PeerSet")
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		for _, c := range conditions(u) {
			if strings.Contains(c, "=False") && strings.Contains(c, "selector") {
				return nil
			}
		}
		return fmt.Errorf("PeerSet %s/%s does not refuse its selector: %v", ns, name, conditions(u))
	})
}

// retryFor retries check a second apart until it returns nil, for at most
// a minute and a half.
func retryFor(ctx context.Context, check func() error) error {
	return wait.Poll(ctx, "", 90*time.Second, time.Second, func() (bool, error) {
		err := check()
		return err == nil, err
	})
}

func countNil(m map[string]error) int {
	n := 0
	for _, err := range m {
		if err == nil {
			n++
		}
	}
	return n
}
