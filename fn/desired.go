package main

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// A composition is the desired state being written for one mesh.
type composition struct {
	x       *xrMesh
	o       *observed
	desired map[string]*fnv1.Resource
	conv    *converter
	// owned are the labels that mark the mesh's Peers in every member.
	owned *structpb.Value
	// maxPeerSet is the most bytes a PeerSet may hold.
	maxPeerSet int
	// shared is the shared form of the PeerSets, nil when they hold their
	// Peers inline.
	shared *sharedForm
}

// put adds a composed resource, ready when its observed self is.
func (cp *composition) put(name string, s *structpb.Struct) {
	cp.desired[name] = &fnv1.Resource{Resource: s, Ready: ready(cp.o.resources[name])}
}

// compose writes the desired composed resources of a planned mesh: one
// NodeInventory per member, and its Peers as its delivery writes them. It
// returns the sizes of the Values it added up as it built them.
func compose(rsp *fnv1.RunFunctionResponse, x *xrMesh, o *observed, plan *mesh.Plan, maxPeerSet, threshold int) (knownSizes, error) {
	if maxPeerSet == 0 {
		maxPeerSet = maxPeerSetBytes
	}
	owned := mesh.OwnedLabels(x.Namespace, x.Name)
	cp := &composition{
		x:          x,
		o:          o,
		desired:    map[string]*fnv1.Resource{},
		conv:       newConverter(),
		owned:      stringMap(owned),
		maxPeerSet: maxPeerSet,
	}
	keepUnobserved(x, o, plan, owned)
	d := delivererOf(x)
	handOver(cp, x, d)
	if _, ok := d.(peerSetDelivery); ok && useShared(o, plan.PeerRefs, threshold) {
		sf, err := share(x, plan.PeerRefs)
		if err != nil {
			return nil, err
		}
		cp.shared = sf
		composeSegments(cp, sf)
	}
	for _, c := range x.Spec.Clusters {
		params := map[string]*structpb.Value{"ownedPeerLabels": cp.owned}
		if c.NodeSelector != nil {
			sel, err := toValue(c.NodeSelector)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot convert the nodeSelector of cluster %s", c.Name)
			}
			params["nodeSelector"] = sel
		}
		inventory := &structpb.Struct{Fields: map[string]*structpb.Value{
			"apiVersion": str(kubev1alpha1.GroupVersion.String()),
			"kind":       str(kubev1alpha1.NodeInventoryKind),
			"metadata": object(map[string]*structpb.Value{
				"labels":      stringMap(memberLabels(x.Namespace, c)),
				"annotations": stringMap(map[string]string{meshv1alpha1.AnnotationMeshName: x.Name}),
			}),
			"spec": object(map[string]*structpb.Value{
				"providerConfigRef": providerConfigRef(c.ProviderConfigRef),
				"forProvider":       object(params),
			}),
		}}
		cp.put(prefixInventory+c.Name, inventory)
		if err := d.compose(cp, c, plan.PeerRefs[c.Name]); err != nil {
			return nil, err
		}
	}
	composeServices(cp, x)
	orphanConflicting(cp, plan)
	holdRefused(cp, x)
	keepReferenced(cp)
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	rsp.Desired.Resources = cp.desired
	return cp.conv.sizes, nil
}

// holdRefused keeps the delivery resources of every member whose
// credentials provider-kilomesh refused exactly as observed: nothing new,
// changed or deleted is handed to a provider for that member. The same
// credentials deliver its Peers (a PeerSet, or provider-kubernetes for
// Objects, which does not check them), so a member that provider-kilomesh
// would not even observe receives nothing until its credentials pass.
func holdRefused(cp *composition, x *xrMesh) {
	refused := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		if _, ok := credentialsRefused(cp.o.resources[prefixInventory+c.Name]); ok {
			refused[c.Name] = true
		}
	}
	if len(refused) == 0 {
		return
	}
	targetOf := func(name string, s *structpb.Struct) (string, bool) {
		for _, d := range deliverers {
			if t, ok := d.target(name, s); ok {
				return t, true
			}
		}
		return "", false
	}
	for name, r := range cp.desired {
		if t, ok := targetOf(name, r.GetResource()); ok && refused[t] {
			delete(cp.desired, name)
		}
	}
	for name, r := range cp.o.resources {
		if t, ok := targetOf(name, r.GetResource()); ok && refused[t] {
			cp.desired[name] = &fnv1.Resource{Resource: intent(r.GetResource()), Ready: ready(r)}
		}
	}
}
