package main

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

// maxDeliveryMessage is how much of a provider's error a member's status
// quotes.
const maxDeliveryMessage = 300

// deliveryProblems reads, from the observed Objects and PeerSets, which
// members the mesh's Peers cannot be written into, and why: a member without
// Kilo's Peer CRD, credentials without the right to write Peers, a Peer in
// the way. The answer is by member.
func deliveryProblems(x *xrMesh, o *observed) map[string]string {
	members := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		members[c.Name] = true
	}
	names := make([]string, 0, len(o.resources))
	for name := range o.resources {
		names = append(names, name)
	}
	sort.Strings(names)

	type failing struct {
		first       string
		count, seen int
	}
	objects := map[string]*failing{}
	out := map[string]string{}
	for _, name := range names {
		s := o.resources[name].GetResource()
		switch {
		case strings.HasPrefix(name, prefixPeerSet):
			target := strings.TrimPrefix(name, prefixPeerSet)
			if msg := peerSetProblem(s); members[target] && msg != "" {
				out[target] = msg
			}
		case strings.HasPrefix(name, prefixPeer):
			target := s.GetFields()["metadata"].GetStructValue().GetFields()["labels"].GetStructValue().GetFields()[labelTargetCluster].GetStringValue()
			if !members[target] {
				continue
			}
			f := objects[target]
			if f == nil {
				f = &failing{}
				objects[target] = f
			}
			f.seen++
			if c, ok := condition(s, "Synced"); ok && c.status == "False" {
				if f.count == 0 {
					f.first = cut(c.message)
				}
				f.count++
			}
		}
	}
	for target, f := range objects {
		if f.count > 0 {
			out[target] = fmt.Sprintf("%d of %d Peers cannot be written: %s", f.count, f.seen, f.first)
		}
	}
	return out
}

// peerSetProblem is why a PeerSet cannot apply its Peers: it cannot sync, or
// it syncs but some Peers are not applied.
func peerSetProblem(s *structpb.Struct) string {
	if c, ok := condition(s, "Synced"); ok && c.status == "False" {
		return cut(c.message)
	}
	if c, ok := condition(s, "Ready"); ok && c.status == "False" {
		return cut(c.message)
	}
	return ""
}

func cut(s string) string {
	if len(s) <= maxDeliveryMessage {
		return s
	}
	return s[:maxDeliveryMessage-3] + "..."
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
