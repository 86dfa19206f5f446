package main

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// provider-kubernetes' namespaced Object. Its Go module is not a dependency:
// its kinds are written as plain objects.
const (
	objectAPIVersion = "kubernetes.m.crossplane.io/v1alpha1"
	objectKind       = "Object"
)

// A label on composed Objects: the member their Peer is written into.
const labelTargetCluster = "kilomesh.io/target-cluster"

// objectDelivery composes one provider-kubernetes Object per Peer, named
// peer-<target>-<peer>.
type objectDelivery struct{}

func (objectDelivery) compose(cp *composition, c meshv1alpha1.Cluster, peers []*kilov1alpha1.Peer) error {
	ref := providerConfigRef(c.ProviderConfigRef)
	target := object(map[string]*structpb.Value{labelTargetCluster: str(c.Name)})
	for _, peer := range peers {
		cp.put(prefixPeer+c.Name+"-"+peer.Name, &structpb.Struct{Fields: map[string]*structpb.Value{
			"apiVersion": str(objectAPIVersion),
			"kind":       str(objectKind),
			"metadata":   object(map[string]*structpb.Value{"labels": target}),
			"spec": object(map[string]*structpb.Value{
				"providerConfigRef": ref,
				"forProvider":       object(map[string]*structpb.Value{"manifest": cp.conv.peer(peer)}),
			}),
		}})
	}
	return nil
}

func (objectDelivery) target(name string, s *structpb.Struct) (string, bool) {
	if !strings.HasPrefix(name, prefixPeer) {
		return "", false
	}
	return get(s, "metadata", "labels", labelTargetCluster).GetStringValue(), true
}

func (objectDelivery) composed(_ map[string]*kubev1alpha1.SegmentSet, name string, s *structpb.Struct) []composedPeer {
	manifest := get(s, "spec", "forProvider", "manifest")
	return []composedPeer{{
		resource: name,
		target:   get(s, "metadata", "labels", labelTargetCluster).GetStringValue(),
		source:   get(manifest.GetStructValue(), "metadata", "labels", meshv1alpha1.LabelSourceCluster).GetStringValue(),
		name:     get(manifest.GetStructValue(), "metadata", "name").GetStringValue(),
		spec:     peerSpecOf(get(manifest.GetStructValue(), "spec")),
	}}
}

// problems counts the failing Objects per member, quoting the first failure
// by name.
func (objectDelivery) problems(o *observed, members map[string]bool, out map[string]string) {
	byTarget := map[string]*problemCount{}
	for _, name := range sortedNames(o, prefixPeer) {
		s := o.resources[name].GetResource()
		target := get(s, "metadata", "labels", labelTargetCluster).GetStringValue()
		if !members[target] {
			continue // being deleted with its member: not the mesh's problem
		}
		f := byTarget[target]
		if f == nil {
			f = &problemCount{}
			byTarget[target] = f
		}
		f.seen++
		if c, ok := condition(s, "Synced"); ok && c.status == "False" {
			if f.count == 0 {
				f.first = cut(c.message)
			}
			f.count++
		}
	}
	for target, f := range byTarget {
		if f.count > 0 {
			out[target] = f.String()
		}
	}
}
