package main

import (
	"strings"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// holdFirst is how long a new mesh waits for the first report of every
// member before it delivers any Peer. Every member observed makes every
// other member's Peers change: delivering before all are in writes each
// PeerSet or Object once per member, and each write comes back to the mesh
// as watch events of Crossplane's circuit breaker (a 5 x 50 mesh spent
// about 20 PeerSet writes and their status changes on its creation).
// A member that has not reported within holdFirst (a hung API server)
// delays the first delivery no longer than that.
const holdFirst = 10 * time.Second

// holdFirstDelivery tells how long the mesh still waits before its first
// delivery: while it has delivered nothing yet, is younger than holdFirst,
// and a member has neither been observed nor failed to be. Zero means
// deliver now. A dry run (no creation time) never waits.
func holdFirstDelivery(x *xrMesh, o *observed, now time.Time) time.Duration {
	if x.Created.IsZero() {
		return 0
	}
	// A clock behind the API server's makes the mesh look younger than
	// it is: the wait never exceeds holdFirst.
	left := min(holdFirst-now.Sub(x.Created), holdFirst)
	if left <= 0 {
		return 0
	}
	for name := range o.resources {
		if delivers(name) {
			return 0
		}
	}
	for _, c := range x.Spec.Clusters {
		if o.inventories[c.Name] == nil {
			return max(left, time.Second)
		}
	}
	return 0
}

// delivers tells whether a composed resource delivers Peers.
func delivers(name string) bool {
	return strings.HasPrefix(name, prefixPeerSet) || strings.HasPrefix(name, prefixPeer) || isSegments(name)
}

// withhold drops the Peers' delivery from the desired state, the
// NodeInventories stay, and asks Crossplane to call again once the wait is
// over. Reports of members call it sooner, as watch events.
func withhold(rsp *fnv1.RunFunctionResponse, wait time.Duration) {
	for name := range rsp.GetDesired().GetResources() {
		if delivers(name) {
			delete(rsp.Desired.Resources, name)
		}
	}
	rsp.Meta.Ttl = durationpb.New(wait)
}
