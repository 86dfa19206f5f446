package main

import (
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// Names of the composed resources (the crossplane.io/composition-resource-name
// annotation): inventory-<cluster>, peerset-<target>, peer-<target>-<peer>.
const (
	prefixInventory = "inventory-"
	prefixPeerSet   = "peerset-"
	prefixPeer      = "peer-"
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

type deliveryMode string

const (
	deliveryObjects = deliveryMode(meshv1alpha1.DeliveryObjects)
	deliveryPeerSet = deliveryMode(meshv1alpha1.DeliveryPeerSet)
)

// xrMesh is the observed ClusterMesh.
type xrMesh struct {
	Namespace string
	Name      string
	// Created is the mesh's creationTimestamp; zero in a dry run.
	Created time.Time
	// Annotations of the mesh.
	Annotations map[string]string
	Spec        meshv1alpha1.ClusterMeshSpec
}

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

func (x *xrMesh) delivery() deliveryMode {
	if x.Spec.Delivery == "" {
		return deliveryPeerSet
	}
	return deliveryMode(x.Spec.Delivery)
}

// decodeMesh reads the ClusterMesh from its protobuf form. A field of the
// wrong type is reported with its path.
func decodeMesh(s *structpb.Struct) (*xrMesh, error) {
	x := &xrMesh{Namespace: get(s, "metadata", "namespace").GetStringValue(), Name: get(s, "metadata", "name").GetStringValue()}
	x.Created, _ = time.Parse(time.RFC3339, get(s, "metadata", "creationTimestamp").GetStringValue()) // zero when unset
	if x.Name == "" {
		return nil, errors.New("the ClusterMesh has no metadata.name")
	}
	for k, v := range get(s, "metadata", "annotations").GetStructValue().GetFields() {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[k] = v.GetStringValue()
	}
	spec := get(s, "spec").GetStructValue()
	if spec == nil {
		return nil, field.Required(field.NewPath("spec"), "a ClusterMesh has a spec")
	}
	if err := fromStruct(spec, &x.Spec); err != nil {
		return nil, locate(spec, err)
	}
	return x, nil
}

// locate finds the cluster entry a decoding error comes from, so that the
// message names it: spec.clusters[2]: ... instead of spec.clusters.
func locate(spec *structpb.Struct, err error) error {
	p := field.NewPath("spec")
	for i, v := range get(spec, "clusters").GetListValue().GetValues() {
		var c meshv1alpha1.Cluster
		if cerr := fromValue(v, &c); cerr != nil {
			return field.Invalid(p.Child("clusters").Index(i), "", cerr.Error())
		}
	}
	return field.Invalid(p, "", err.Error())
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

// observed is what the request says of the mesh's composed resources.
type observed struct {
	inventories map[string]*mesh.Observation
	resources   map[string]*fnv1.Resource
	// composed are the Peers the composed resources hold.
	composed []composedPeer
}

func readObserved(req *fnv1.RunFunctionRequest, x *xrMesh) (*observed, error) {
	o := &observed{inventories: map[string]*mesh.Observation{}, resources: req.GetObserved().GetResources()}
	o.composed = composedPeers(o)
	for _, c := range x.Spec.Clusters {
		r, ok := o.resources[prefixInventory+c.Name]
		if !ok {
			continue
		}
		inv, err := readInventory(r.GetResource())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the NodeInventory of cluster %s", c.Name)
		}
		if inv != nil {
			o.inventories[c.Name] = inv
		}
	}
	return o, nil
}

// readInventory reads what a NodeInventory observed, and why it cannot
// observe its cluster now. It returns nil while the inventory has neither
// observed its cluster nor failed to.
func readInventory(s *structpb.Struct) (*mesh.Observation, error) {
	o := &mesh.Observation{Reachable: true}
	if at := get(s, "status", "atProvider"); at != nil {
		if err := readAtProvider(at, &o.NodeInventoryObservation); err != nil {
			return nil, err
		}
	}
	if c, ok := condition(s, "Synced"); ok && c.status == "False" {
		o.Reachable = false
		if t, err := parseTime(c.lastTransitionTime); err == nil {
			o.UnreachableSince = t
		}
		o.Problem = cut(c.message) // a member's own error text: anything it sends
	}
	if o.ObservedAt == nil && o.Reachable {
		return nil, nil //nolint:nilnil // not observed yet, nothing wrong either
	}
	return o, nil
}
