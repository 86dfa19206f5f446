package main

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// maxDeliveryMessage is how much of a provider's error a member's status
// quotes.
const maxDeliveryMessage = 300

// A deliverer writes the Peers of a mesh into its members in one way: one
// provider-kubernetes Object per Peer, or one provider-kilomesh PeerSet per
// member. It also reads back, from the observed composed resources, what it
// composed before and why a member's Peers cannot be written.
type deliverer interface {
	// compose adds to desired the resources that hold the Peers of target
	// c: the planned ones, and the kept ones composed before.
	compose(cp *composition, c meshv1alpha1.Cluster, peers []kilov1alpha1.Peer, kept []composedPeer) error
	// composed lists the Peers an observed composed resource holds, and
	// false when the resource is not of this deliverer's kind.
	composed(name string, s *structpb.Struct) ([]composedPeer, bool)
	// problems adds, by member, why its Peers cannot be written.
	problems(o *observed, members map[string]bool, out map[string]string)
}

// deliverers read every kind: a mesh's observed resources are of its own
// delivery, but reading both costs nothing and keeps a mesh whole whatever
// it composed before.
var deliverers = []deliverer{objectDelivery{}, peerSetDelivery{}}

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
	// raw is what the deliverer keeps as it is: the Object, or the
	// PeerSet's item.
	raw *structpb.Struct
}

// composedPeers lists every Peer the observed composed resources hold,
// sorted by target and name.
func composedPeers(o *observed) []composedPeer {
	var out []composedPeer
	for name, r := range o.resources {
		for _, d := range deliverers {
			if peers, ok := d.composed(name, r.GetResource()); ok {
				out = append(out, peers...)
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

// delivered is what the planner needs to know of the composed Peers: by
// target, their keys and routes.
func delivered(peers []composedPeer) map[string]map[string]mesh.DeliveredPeer {
	out := map[string]map[string]mesh.DeliveredPeer{}
	for _, p := range peers {
		if out[p.target] == nil {
			out[p.target] = map[string]mesh.DeliveredPeer{}
		}
		out[p.target][p.name] = mesh.DeliveredPeer{PublicKey: p.spec.PublicKey, AllowedIPs: p.spec.AllowedIPs}
	}
	return out
}

// keepUnobserved picks, among the Peers already composed, those of members
// that have no observation now, by target. A member's inventory can lose its
// status (deleted and composed anew, or its provider's state lost): that
// must not remove the member's Peers everywhere until it is observed again.
// A member never composed before has none to keep. The kept Peers count in
// the status.
func keepUnobserved(x *xrMesh, o *observed, peers []composedPeer, plan *mesh.Plan) map[string][]composedPeer {
	members := map[string]int{}
	for i, c := range x.Spec.Clusters {
		members[c.Name] = i
	}
	out := map[string][]composedPeer{}
	for _, p := range peers {
		_, source := members[p.source]
		_, target := members[p.target]
		inv, observed := o.inventories[p.source]
		if !source || !target || p.source == p.target || (observed && inv.ObservedAt != nil) {
			continue
		}
		out[p.target] = append(out[p.target], p)
		plan.Status.Clusters[members[p.source]].Peers++
		plan.Status.PeerCount++
	}
	return out
}

// deliveryProblems reads, from the observed Objects and PeerSets, which
// members the mesh's Peers cannot be written into, and why: a member without
// Kilo's Peer CRD, credentials without the right to write Peers, a Peer in
// the way. The answer is by member.
func deliveryProblems(x *xrMesh, o *observed) map[string]string {
	members := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		members[c.Name] = true
	}
	out := map[string]string{}
	for _, d := range deliverers {
		d.problems(o, members, out)
	}
	return out
}

// sortedNames lists the names of the observed resources with a prefix, in
// order.
func sortedNames(o *observed, prefix string) []string {
	var names []string
	for name := range o.resources {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func cut(s string) string {
	return mesh.Truncate(s, maxDeliveryMessage)
}

// reportDelivery adds the delivery problems to the members' status.
func reportDelivery(plan *mesh.Plan, problems map[string]string) {
	for i := range plan.Status.Clusters {
		c := &plan.Status.Clusters[i]
		p, ok := problems[c.Name]
		if !ok {
			continue
		}
		if c.Message != "" {
			c.Message += "; "
		}
		c.Message += p
	}
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
