package main

import (
	"fmt"
	"slices"
	"sort"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// A deliverer writes the Peers of a mesh into its members in one way: one
// provider-kubernetes Object per Peer, or one provider-kilomesh PeerSet per
// member. It also reads back, from the observed composed resources, what it
// composed before and why a member's Peers cannot be written.
type deliverer interface {
	// compose adds to desired the resources that hold the Peers of target
	// c, sorted by name.
	compose(cp *composition, c meshv1alpha1.Cluster, peers []*kilov1alpha1.Peer) error
	// target says which member an observed composed resource writes into,
	// and false when the resource is not of this deliverer's kind.
	target(name string, s *structpb.Struct) (string, bool)
	// composed lists the Peers an observed composed resource of this
	// deliverer's kind holds; segs are the observed SegmentSets, by name.
	composed(segs map[string]*kubev1alpha1.SegmentSet, name string, s *structpb.Struct) []composedPeer
	// problems adds, by member, why its Peers cannot be written.
	problems(o *observed, members map[string]bool, out map[string]string)
}

// deliverers read every kind: a mesh's observed resources are of its own
// delivery, but reading both costs nothing and keeps a mesh whole whatever
// it composed before.
var deliverers = []deliverer{objectDelivery{}, peerSetDelivery{}}

type deliveryMode string

const (
	deliveryObjects = deliveryMode(meshv1alpha1.DeliveryObjects)
	deliveryPeerSet = deliveryMode(meshv1alpha1.DeliveryPeerSet)
)

func (x *xrMesh) delivery() deliveryMode {
	if x.Spec.Delivery == "" {
		return deliveryPeerSet
	}
	return deliveryMode(x.Spec.Delivery)
}

func delivererOf(x *xrMesh) deliverer {
	if x.delivery() == deliveryPeerSet {
		return peerSetDelivery{}
	}
	return objectDelivery{}
}

// A composedPeer is a Peer that an observed composed resource holds.
type composedPeer struct {
	// resource is the composition resource name that holds it.
	resource string
	target   string
	source   string
	name     string
	spec     kilov1alpha1.PeerSpec
}

// composedPeers lists every Peer the observed composed resources hold,
// sorted by target and name.
func composedPeers(o *observed) []composedPeer {
	var out []composedPeer
	segs := segmentIndex(o.resources)
	for name, r := range o.resources {
		for _, d := range deliverers {
			if _, ok := d.target(name, r.GetResource()); ok {
				out = append(out, d.composed(segs, name, r.GetResource())...)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].target != out[j].target {
			return out[i].target < out[j].target
		}
		return out[i].name < out[j].name
	})
	return out
}

// keepUnobserved picks, among the Peers already composed, those of members
// that have no observation now, by target. A member's inventory can lose its
// status (deleted and composed anew, or its provider's state lost): that
// must not remove the member's Peers everywhere until it is observed again.
// A member never composed before has none to keep. The kept Peers count in
// the status.
// The kept Peers are added to the plan's Peers of their target, with the
// labels owned that mark the mesh's Peers.
func keepUnobserved(x *xrMesh, o *observed, plan *mesh.Plan, owned map[string]string) {
	members := map[string]int{}
	for i, c := range x.Spec.Clusters {
		members[c.Name] = i
	}
	kept := map[string]bool{}
	for _, p := range o.composed {
		_, source := members[p.source]
		_, target := members[p.target]
		inv, observed := o.inventories[p.source]
		if !source || !target || p.source == p.target || (observed && inv.ObservedAt != nil) || kept[p.target+"/"+p.name] {
			continue
		}
		// The same Peer may be held twice while the mesh changes delivery.
		kept[p.target+"/"+p.name] = true
		labels := map[string]string{meshv1alpha1.LabelSourceCluster: p.source}
		for k, v := range owned {
			labels[k] = v
		}
		plan.PeerRefs[p.target] = append(plan.PeerRefs[p.target], &kilov1alpha1.Peer{
			TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: labels},
			Spec:       p.spec,
		})
		plan.Status.Clusters[members[p.source]].Peers++
		plan.Status.PeerCount++
	}
	for target := range plan.PeerRefs {
		peers := plan.PeerRefs[target]
		if !sortedByName(peers) { // the planner's are: only kept Peers are not
			sort.SliceStable(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
		}
	}
}

// sortedByName tells whether sorting Peers by name would leave them as they
// are.
func sortedByName(peers []*kilov1alpha1.Peer) bool {
	for i := 1; i < len(peers); i++ {
		if peers[i].Name < peers[i-1].Name {
			return false
		}
	}
	return true
}

// orphanPolicies are the managementPolicies of a composed resource the mesh
// is about to drop without deleting its Peers: it only observes, so
// deleting it leaves what it wrote in place.
var orphanPolicies = []string{"Observe"}

// handOver keeps the resources of the delivery a mesh no longer uses, while
// the mesh moves from one delivery to the other, so that no Peer is ever
// deleted on the way: first they are desired as they are but observe-only,
// then, once observed so, not at all, and Crossplane deletes them and leaves
// their Peers to the new delivery, which owns them by their labels. A
// resource of a member that left the mesh is not kept: its Peers go with it.
func handOver(cp *composition, x *xrMesh, current deliverer) {
	members := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		members[c.Name] = true
	}
	for name, r := range cp.o.resources {
		s := r.GetResource()
		for _, d := range deliverers {
			target, ok := d.target(name, s)
			if !ok || d == current || !members[target] {
				continue
			}
			if observeOnly(s) {
				break // observed as observe-only: dropped, its Peers stay
			}
			keep := intent(s)
			keep.GetFields()["spec"].GetStructValue().GetFields()["managementPolicies"] = stringList(orphanPolicies)
			cp.put(name, keep)
		}
	}
}

// orphanConflicting keeps, observe-only, then drops, the Objects whose Peer
// a Peer the mesh does not own now holds the name of (relabelled, or
// replaced by hand): provider-kubernetes would delete that Peer with the
// Object otherwise. A PeerSet checks ownership itself before it deletes.
func orphanConflicting(cp *composition, plan *mesh.Plan) {
	taken := map[string]bool{}
	for _, c := range plan.Status.Clusters {
		for _, conflict := range c.Conflicts {
			if conflict.Reason == mesh.ReasonPeerNameConflict {
				taken[c.Name+"/"+conflict.Peer] = true
			}
		}
	}
	if len(taken) == 0 {
		return
	}
	for _, p := range cp.o.composed {
		if _, desired := cp.desired[p.resource]; desired || !taken[p.target+"/"+p.name] {
			continue
		}
		s := cp.o.resources[p.resource].GetResource()
		if _, ok := (objectDelivery{}).target(p.resource, s); !ok || observeOnly(s) {
			continue
		}
		keep := intent(s)
		keep.GetFields()["spec"].GetStructValue().GetFields()["managementPolicies"] = stringList(orphanPolicies)
		cp.put(p.resource, keep)
	}
}

// observeOnly tells whether a composed resource is observed with
// orphanPolicies.
func observeOnly(s *structpb.Struct) bool {
	values := get(s, "spec", "managementPolicies").GetListValue().GetValues()
	got := make([]string, 0, len(values))
	for _, v := range values {
		got = append(got, v.GetStringValue())
	}
	return slices.Equal(got, orphanPolicies)
}

// peerSpecOf reads a Peer's spec from its protobuf form.
func peerSpecOf(v *structpb.Value) kilov1alpha1.PeerSpec {
	var spec kilov1alpha1.PeerSpec
	_ = fromValue(v, &spec) // a spec this function wrote; a broken one routes nothing
	return spec
}

// problemCount summarises the failing resources of one member.
type problemCount struct {
	first       string
	count, seen int
}

func (f *problemCount) String() string {
	return fmt.Sprintf("%d of %d Peers cannot be written: %s", f.count, f.seen, f.first)
}
