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
	"net/netip"
	"strings"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/prefixes"
	"github.com/kilomesh/kilomesh/provider/inventory"
)

// maxNamed is how many withheld routes of one Peer a problem names.
const maxNamed = 5

// foreignRoutes are the routes of the Peers of a cluster that a set does
// not own, each with the Peer that routes it.
type foreignRoutes struct {
	prefixes []netip.Prefix
	owner    []string
}

// add records the routes of a Peer as Kilo reads them: an allowed IP that
// is not a CIDR routes nothing.
func (r *foreignRoutes) add(p *kilov1alpha1.Peer) {
	for _, s := range p.Spec.AllowedIPs[:min(len(p.Spec.AllowedIPs), inventory.MaxPeerAllowedIPs)] {
		if pr, ok := prefixes.ParseKilo(s); ok {
			r.prefixes = append(r.prefixes, pr)
			r.owner = append(r.owner, p.Name)
		}
	}
}

// check indexes the routes. incomplete names the bounds that left Peers
// of the cluster unread, if any.
func (r *foreignRoutes) check(incomplete string) *routeCheck {
	return &routeCheck{routes: r, index: prefixes.NewIndex(r.prefixes), incomplete: incomplete}
}

// A routeCheck decides which routes of a desired Peer a set may write into
// its cluster. Whoever routes a prefix in a cluster first keeps it, as the
// planner of the function decides: a route that overlaps (contains, is
// inside, or equals) a route of a Peer the set does not own is withheld,
// unless the set's own Peer of that name already routes exactly that
// prefix. While the cluster's Peers cannot be read whole, no route is new
// enough to be safe: only those the set's Peer already routes are kept.
type routeCheck struct {
	routes     *foreignRoutes
	index      *prefixes.Index
	incomplete string
}

// keep returns the routes of allowed that may be written, given the set's
// own Peer of that name in the cluster (nil if there is none), and a
// message naming those withheld, or "".
func (rc *routeCheck) keep(allowed []string, incumbent *kilov1alpha1.Peer) ([]string, string) {
	own := map[netip.Prefix]bool{}
	if incumbent != nil {
		for _, s := range incumbent.Spec.AllowedIPs {
			if pr, ok := prefixes.ParseKilo(s); ok {
				own[pr] = true
			}
		}
	}
	var kept, taken, unknown []string
	for _, s := range allowed {
		pr, ok := prefixes.ParseKilo(s)
		switch {
		case !ok || own[pr]:
			kept = append(kept, s)
		case rc.incomplete != "":
			unknown = append(unknown, s)
		default:
			others := rc.index.Overlapping(pr)
			if len(others) == 0 {
				kept = append(kept, s)
				continue
			}
			o := others[0]
			taken = append(taken, fmt.Sprintf("%s (Peer %q routes %s)", s, rc.routes.owner[o], rc.routes.prefixes[o]))
		}
	}
	var msg []string
	if len(taken) > 0 {
		msg = append(msg, "routes not written, a Peer this set does not own routes them: "+named(taken))
	}
	if len(unknown) > 0 {
		msg = append(msg, fmt.Sprintf("new routes not written, the Peers of the cluster cannot be read whole (%s): %s", rc.incomplete, named(unknown)))
	}
	if len(kept) == 0 && len(msg) > 0 {
		msg = append(msg, "the Peer, left without a route, is not written")
	}
	return kept, strings.Join(msg, "; ")
}

// named lists the first maxNamed of s and counts the rest.
func named(s []string) string {
	if len(s) <= maxNamed {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:maxNamed], ", "), len(s)-maxNamed)
}
