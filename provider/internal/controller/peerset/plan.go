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
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/inventory"
)

// A Change is a desired Peer to create or correct.
type Change struct {
	// Want is the Peer as the set writes it.
	Want *kilov1alpha1.Peer
	// Have is the owned Peer of the same name in the cluster, if any.
	Have *kilov1alpha1.Peer
	// Partial is true when some of the desired Peer's routes are withheld:
	// written, it is still not as desired.
	Partial bool
}

// A Plan is what a PeerSet must do to its cluster.
type Plan struct {
	// Apply are the desired Peers missing from the cluster or differing
	// from it, sorted by name.
	Apply []Change
	// Delete are the owned Peers the set no longer wants, sorted by name.
	Delete []*kilov1alpha1.Peer
	// Owned are every Peer of the cluster that carries the selector.
	Owned []*kilov1alpha1.Peer
	// Problems are the desired Peers that cannot be applied, sorted by name.
	Problems []v1alpha1.PeerProblem
	// Applied counts the desired Peers that are in the cluster as desired.
	Applied int
	// Desired counts the desired Peers.
	Desired int
}

// UpToDate reports whether the cluster needs no change.
func (p Plan) UpToDate() bool { return len(p.Apply) == 0 && len(p.Delete) == 0 }

// NewPlan compares what a set wants with the Peers of its cluster. A Peer
// is owned when it carries every selector label; a Peer that is not owned is
// never changed, and a desired Peer that would clash with one (same name,
// or same public key) is reported instead of applied, as is a desired Peer
// that breaks Kilo's rules or the provider's bounds. A route of a desired
// Peer that overlaps a route of a Peer the set does not own is withheld
// (see routeCheck), and so is every new route while incomplete names a
// bound that left Peers of the cluster unread. The other desired Peers are
// planned as usual.
func NewPlan(params v1alpha1.PeerSetParameters, actual []*kilov1alpha1.Peer, incomplete string) Plan {
	plan := Plan{Desired: len(params.Peers)}
	c := readCluster(params.Selector, actual, incomplete)
	plan.Owned = c.owned

	desired := append([]v1alpha1.DesiredPeer(nil), params.Peers...)
	sort.SliceStable(desired, func(i, j int) bool { return desired[i].Name < desired[j].Name })
	wanted := make(map[string]bool, len(desired))
	keyOf := map[string]string{}
	for i := range desired {
		d := &desired[i]
		wanted[d.Name] = true
		c.plan(&plan, params.Selector, d, keyOf)
	}
	for _, o := range plan.Owned {
		if !wanted[o.Name] {
			plan.Delete = append(plan.Delete, o)
		}
	}
	return plan
}

// A cluster is what a set knows of the Peers of its cluster.
type cluster struct {
	byName     map[string]*kilov1alpha1.Peer
	owned      []*kilov1alpha1.Peer
	foreignKey map[string]string
	routes     *routeCheck
}

// readCluster sorts the Peers of a cluster into the set's own and the
// others. A Peer whose name no API server accepts is left out: nothing of
// it can be trusted, and with it the cluster is not read whole.
func readCluster(selector map[string]string, actual []*kilov1alpha1.Peer, incomplete string) *cluster {
	c := &cluster{byName: make(map[string]*kilov1alpha1.Peer, len(actual)), foreignKey: map[string]string{}}
	unread := inventory.Reasons{}
	unread.Add(incomplete)
	var routes foreignRoutes
	for _, a := range actual {
		r := inventory.Unpublishable(&a.ObjectMeta)
		unread.Add(r)
		if r == inventory.ReasonBadName {
			continue
		}
		c.byName[a.Name] = a
		if Owns(selector, a) {
			c.owned = append(c.owned, a)
			continue
		}
		if prev, ok := c.foreignKey[a.Spec.PublicKey]; !ok || a.Name < prev {
			c.foreignKey[a.Spec.PublicKey] = a.Name
		}
		if len(a.Spec.AllowedIPs) > inventory.MaxPeerAllowedIPs {
			unread.Add(fmt.Sprintf("more than %d routes in one Peer", inventory.MaxPeerAllowedIPs))
		}
		routes.add(a)
	}
	sort.Slice(c.owned, func(i, j int) bool { return c.owned[i].Name < c.owned[j].Name })
	c.routes = routes.check(unread.String())
	return c
}

// plan adds one desired Peer to the plan: as a change, as applied, or as
// a problem. keyOf records the keys of the set's Peers planned so far.
func (c *cluster) plan(plan *Plan, selector map[string]string, d *v1alpha1.DesiredPeer, keyOf map[string]string) {
	want := Desired(selector, d)
	have, exists := c.byName[d.Name]
	problem := func(reason, msg string) {
		plan.Problems = append(plan.Problems, v1alpha1.PeerProblem{Peer: d.Name, Reason: reason, Message: msg})
	}
	if errs := want.Validate(); len(errs) > 0 {
		problem(v1alpha1.ReasonPeerInvalid, errs.ToAggregate().Error())
		return
	}
	if msg := beyondBounds(want); msg != "" {
		problem(v1alpha1.ReasonPeerInvalid, msg)
		return
	}
	if exists && !Owns(selector, have) {
		problem(v1alpha1.ReasonPeerNameConflict, fmt.Sprintf("a Peer named %q without the labels %s of this set exists in the cluster", d.Name, labelList(selector)))
		return
	}
	if other, ok := c.foreignKey[d.Spec.PublicKey]; ok {
		problem(v1alpha1.ReasonPeerKeyConflict, fmt.Sprintf("Peer %q, which this set does not own, already uses the public key", other))
		return
	}
	if other, ok := keyOf[d.Spec.PublicKey]; ok {
		problem(v1alpha1.ReasonPeerKeyConflict, fmt.Sprintf("desired Peer %q of this set already uses the public key", other))
		return
	}
	keyOf[d.Spec.PublicKey] = d.Name
	var incumbent *kilov1alpha1.Peer
	if exists {
		incumbent = have
	}
	kept, msg := c.routes.keep(want.Spec.AllowedIPs, incumbent)
	if msg != "" {
		problem(v1alpha1.ReasonPeerRouteConflict, msg)
		if len(kept) == 0 {
			return
		}
		want.Spec.AllowedIPs = kept
	}
	if exists && Matches(have, want) {
		if msg == "" {
			plan.Applied++
		}
		return
	}
	ch := Change{Want: want, Partial: msg != ""}
	if exists {
		ch.Have = have
	}
	plan.Apply = append(plan.Apply, ch)
}

// beyondBounds says why a valid desired Peer could not be read back whole
// from the cluster (see inventory.SlimPeer), or "": the set would then find
// it different after every write, and write it forever.
func beyondBounds(p *kilov1alpha1.Peer) string {
	size := 0
	for k, v := range p.Labels {
		size += len(k) + len(v)
	}
	switch {
	case len(p.Labels) > inventory.MaxLabels || size > inventory.MaxLabelBytes:
		return fmt.Sprintf("metadata.labels: more than %d labels or %d bytes of them, more than provider-kilomesh reads back", inventory.MaxLabels, inventory.MaxLabelBytes)
	case len(p.Spec.AllowedIPs) > inventory.MaxPeerAllowedIPs:
		return fmt.Sprintf("spec.allowedIPs: more than %d, Kilo's limit", inventory.MaxPeerAllowedIPs)
	case len(p.Spec.PresharedKey) > inventory.MaxKeyBytes:
		return fmt.Sprintf("spec.presharedKey: longer than %d bytes; a WireGuard key is 44", inventory.MaxKeyBytes)
	}
	return ""
}

// Owns reports whether a Peer carries every selector label. An empty
// selector owns nothing.
func Owns(selector map[string]string, p *kilov1alpha1.Peer) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if hv, ok := p.Labels[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Desired returns the Peer a set wants for d: d's labels plus the
// selector's, which win.
func Desired(selector map[string]string, d *v1alpha1.DesiredPeer) *kilov1alpha1.Peer {
	l := make(map[string]string, len(d.Labels)+len(selector))
	for k, v := range d.Labels {
		l[k] = v
	}
	for k, v := range selector {
		l[k] = v
	}
	return &kilov1alpha1.Peer{
		TypeMeta:   metav1.TypeMeta{APIVersion: kilov1alpha1.APIVersion, Kind: kilov1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: l},
		Spec:       d.Spec.Kilo(),
	}
}

// Matches reports whether have is as want: every wanted label is present
// with its value (others may add labels) and the spec is the same.
func Matches(have, want *kilov1alpha1.Peer) bool {
	for k, v := range want.Labels {
		if hv, ok := have.Labels[k]; !ok || hv != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(have.Spec, want.Spec)
}

func labelList(l map[string]string) string {
	s := make([]string, 0, len(l))
	for k, v := range l {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}
