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
)

// A Change is a desired Peer to create or correct.
type Change struct {
	// Want is the Peer as the set wants it.
	Want *kilov1alpha1.Peer
	// Have is the owned Peer of the same name in the cluster, if any.
	Have *kilov1alpha1.Peer
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
// that breaks Kilo's rules. The other desired Peers are planned as usual.
func NewPlan(params v1alpha1.PeerSetParameters, actual []*kilov1alpha1.Peer) Plan {
	plan := Plan{Desired: len(params.Peers)}
	byName := make(map[string]*kilov1alpha1.Peer, len(actual))
	foreignKey := map[string]string{}
	for _, a := range actual {
		byName[a.Name] = a
		if Owns(params.Selector, a) {
			plan.Owned = append(plan.Owned, a)
			continue
		}
		if prev, ok := foreignKey[a.Spec.PublicKey]; !ok || a.Name < prev {
			foreignKey[a.Spec.PublicKey] = a.Name
		}
	}
	sort.Slice(plan.Owned, func(i, j int) bool { return plan.Owned[i].Name < plan.Owned[j].Name })

	desired := append([]v1alpha1.DesiredPeer(nil), params.Peers...)
	sort.SliceStable(desired, func(i, j int) bool { return desired[i].Name < desired[j].Name })
	wanted := make(map[string]bool, len(desired))
	keyOf := map[string]string{}
	for i := range desired {
		d := &desired[i]
		wanted[d.Name] = true
		want := Desired(params.Selector, d)
		have, exists := byName[d.Name]
		problem := func(reason, msg string) {
			plan.Problems = append(plan.Problems, v1alpha1.PeerProblem{Peer: d.Name, Reason: reason, Message: msg})
		}
		if errs := want.Validate(); len(errs) > 0 {
			problem(v1alpha1.ReasonPeerInvalid, errs.ToAggregate().Error())
			continue
		}
		if exists && !Owns(params.Selector, have) {
			problem(v1alpha1.ReasonPeerNameConflict, fmt.Sprintf("a Peer named %q without the labels %s of this set exists in the cluster", d.Name, labelList(params.Selector)))
			continue
		}
		if other, ok := foreignKey[d.Spec.PublicKey]; ok {
			problem(v1alpha1.ReasonPeerKeyConflict, fmt.Sprintf("Peer %q, which this set does not own, already uses the public key", other))
			continue
		}
		if other, ok := keyOf[d.Spec.PublicKey]; ok {
			problem(v1alpha1.ReasonPeerKeyConflict, fmt.Sprintf("desired Peer %q of this set already uses the public key", other))
			continue
		}
		keyOf[d.Spec.PublicKey] = d.Name
		if exists && Matches(have, want) {
			plan.Applied++
			continue
		}
		c := Change{Want: want}
		if exists {
			c.Have = have
		}
		plan.Apply = append(plan.Apply, c)
	}
	for _, o := range plan.Owned {
		if !wanted[o.Name] {
			plan.Delete = append(plan.Delete, o)
		}
	}
	return plan
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
