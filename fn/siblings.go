package main

// The other meshes of the namespace that share a member with this one, read
// through the function's requirements.

import (
	"sort"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// Names of the function's requirements: the NodeInventories of every
// member, whichever mesh composed them (member-<cluster>), and the other
// meshes found to share a member (mesh-<name>).
const (
	prefixRequireMember = "member-"
	prefixRequireMesh   = "mesh-"
)

// maxSiblings is how many other meshes sharing a member the function reads.
const maxSiblings = 32

// olderThan tells whether a mesh created at t (named name) came before this
// one. Of two meshes whose networks overlap, the younger one freezes and
// the older one carries on: creating or editing a mesh never stops one that
// works. A time unknown on either side counts as older, so nothing is missed.
func (x *xrMesh) olderThan(t time.Time, name string) bool {
	if x.Created.IsZero() || t.IsZero() || !t.Equal(x.Created) {
		return x.Created.IsZero() || t.IsZero() || t.Before(x.Created)
	}
	return name < x.Name
}

// memberLabels are the labels of a composed NodeInventory: which cluster it
// observes, so that meshes sharing that cluster find each other.
func memberLabels(namespace string, c meshv1alpha1.Cluster) map[string]string {
	return map[string]string{meshv1alpha1.LabelMember: mesh.MemberID(namespace, c)}
}

// siblings finds the other meshes of the namespace whose networks matter to
// this one: those that share a member with it, since both write Peers into
// that member. It asks Crossplane for the NodeInventories of each member
// (whichever mesh composed them), then for the meshes that composed them,
// by name; never for this mesh itself, and never for meshes that share
// nothing with it, so that their writes cause this mesh no watch events.
// The bool is false until Crossplane has resolved every requirement.
func siblings(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, x *xrMesh) ([]mesh.OtherMesh, bool) {
	if rsp.Requirements == nil {
		rsp.Requirements = &fnv1.Requirements{}
	}
	rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	ns := x.Namespace
	resolved := true
	names := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		key := prefixRequireMember + c.Name
		rsp.Requirements.Resources[key] = &fnv1.ResourceSelector{
			ApiVersion: kubev1alpha1.GroupVersion.String(),
			Kind:       kubev1alpha1.NodeInventoryKind,
			Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: memberLabels(ns, c)}},
			Namespace:  &ns,
		}
		rr, ok := req.GetRequiredResources()[key]
		if !ok {
			resolved = false
			continue
		}
		for _, item := range rr.GetItems() {
			if n := get(item.GetResource(), "metadata", "annotations", meshv1alpha1.AnnotationMeshName).GetStringValue(); n != "" && n != x.Name {
				names[n] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	if len(sorted) > maxSiblings {
		sorted = sorted[:maxSiblings]
	}
	var out []mesh.OtherMesh
	for _, n := range sorted {
		key := prefixRequireMesh + n
		rsp.Requirements.Resources[key] = &fnv1.ResourceSelector{
			ApiVersion: meshv1alpha1.GroupVersion.String(),
			Kind:       meshv1alpha1.Kind,
			Match:      &fnv1.ResourceSelector_MatchName{MatchName: n},
			Namespace:  &ns,
		}
		rr, ok := req.GetRequiredResources()[key]
		if !ok {
			resolved = false
			continue
		}
		for _, item := range rr.GetItems() {
			created, _ := time.Parse(time.RFC3339, get(item.GetResource(), "metadata", "creationTimestamp").GetStringValue())
			if !x.olderThan(created, n) {
				continue // the younger mesh freezes, not this one
			}
			o := mesh.OtherMesh{Name: n}
			if err := fromValue(get(item.GetResource(), "spec"), &o.Spec); err != nil {
				continue // its own function reports it; its CIDRs cannot be compared
			}
			out = append(out, o)
		}
	}
	return out, resolved
}
