package main

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

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

// requirementMeshes is the name under which the function asks Crossplane for
// the ClusterMeshes of the namespace.
const requirementMeshes = "clustermeshes"

type deliveryMode string

const (
	deliveryObjects = deliveryMode(meshv1alpha1.DeliveryObjects)
	deliveryPeerSet = deliveryMode(meshv1alpha1.DeliveryPeerSet)
)

// xrMesh is the observed ClusterMesh.
type xrMesh struct {
	Namespace string
	Name      string
	Spec      meshv1alpha1.ClusterMeshSpec
}

func (x *xrMesh) delivery() deliveryMode {
	if x.Spec.Delivery == "" {
		return deliveryObjects
	}
	return deliveryMode(x.Spec.Delivery)
}

// decodeMesh reads the ClusterMesh from its protobuf form. A field of the
// wrong type is reported with its path.
func decodeMesh(s *structpb.Struct) (*xrMesh, error) {
	x := &xrMesh{Namespace: get(s, "metadata", "namespace").GetStringValue(), Name: get(s, "metadata", "name").GetStringValue()}
	if x.Name == "" {
		return nil, errors.New("the ClusterMesh has no metadata.name")
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

func fromStruct(s *structpb.Struct, into any) error {
	b, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

func fromValue(v *structpb.Value, into any) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// requireOtherMeshes asks Crossplane for every ClusterMesh of the namespace:
// their CIDRs must not overlap this mesh's.
func requireOtherMeshes(rsp *fnv1.RunFunctionResponse, namespace string) {
	if rsp.Requirements == nil {
		rsp.Requirements = &fnv1.Requirements{}
	}
	if rsp.Requirements.Resources == nil {
		rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	}
	rsp.Requirements.Resources[requirementMeshes] = &fnv1.ResourceSelector{
		ApiVersion: meshv1alpha1.GroupVersion.String(),
		Kind:       meshv1alpha1.Kind,
		Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}},
		Namespace:  &namespace,
	}
}

// otherMeshes are the ClusterMeshes of the namespace but this one. The bool
// is false until Crossplane has resolved the requirement.
func otherMeshes(req *fnv1.RunFunctionRequest, self string) ([]mesh.OtherMesh, bool) {
	rr, ok := req.GetRequiredResources()[requirementMeshes]
	if !ok {
		return nil, false
	}
	var out []mesh.OtherMesh
	for _, item := range rr.GetItems() {
		s := item.GetResource()
		name := get(s, "metadata", "name").GetStringValue()
		if name == self {
			continue
		}
		o := mesh.OtherMesh{Name: name}
		if err := fromValue(get(s, "spec"), &o.Spec); err != nil {
			// Its own function reports it; its CIDRs cannot be compared.
			continue
		}
		out = append(out, o)
	}
	return out, true
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
		if err := fromValue(at, &o.NodeInventoryObservation); err != nil {
			return nil, err
		}
	}
	if c, ok := condition(s, "Synced"); ok && c.status == "False" {
		o.Reachable = false
		if t, err := parseTime(c.lastTransitionTime); err == nil {
			o.UnreachableSince = t
		}
		o.Problem = c.message
	}
	if o.ObservedAt == nil && o.Reachable {
		return nil, nil //nolint:nilnil // not observed yet, nothing wrong either
	}
	return o, nil
}

func parseTime(s string) (*metav1.Time, error) {
	t := &metav1.Time{}
	if err := t.UnmarshalQueryParameter(s); err != nil {
		return nil, err
	}
	if t.IsZero() {
		return nil, errors.New("no time")
	}
	return t, nil
}

type cond struct {
	status             string
	reason             string
	message            string
	lastTransitionTime string
}

// condition reads one condition of a resource without decoding the rest.
func condition(s *structpb.Struct, typ string) (cond, bool) {
	for _, v := range get(s, "status", "conditions").GetListValue().GetValues() {
		f := v.GetStructValue().GetFields()
		if f["type"].GetStringValue() != typ {
			continue
		}
		return cond{
			status:             f["status"].GetStringValue(),
			reason:             f["reason"].GetStringValue(),
			message:            f["message"].GetStringValue(),
			lastTransitionTime: f["lastTransitionTime"].GetStringValue(),
		}, true
	}
	return cond{}, false
}

// ready tells whether a composed resource is ready: Ready=True, and not
// failing to sync (an unreachable cluster makes the mesh not ready).
func ready(r *fnv1.Resource) fnv1.Ready {
	if r == nil {
		return fnv1.Ready_READY_FALSE
	}
	c, ok := condition(r.GetResource(), "Ready")
	if !ok || c.status != "True" {
		return fnv1.Ready_READY_FALSE
	}
	if c, ok := condition(r.GetResource(), "Synced"); ok && c.status == "False" {
		return fnv1.Ready_READY_FALSE
	}
	return fnv1.Ready_READY_TRUE
}
