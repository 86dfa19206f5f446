package main

import (
	"google.golang.org/protobuf/types/known/structpb"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// prefixServices names the ServiceSync of a member: services-<member>.
const prefixServices = "services-"

// composeServices writes one ServiceSync per member of a mesh that shares
// Services, and none otherwise (a mesh that stops sharing deletes them, and
// with them every import they made). The function decides only what may be
// shared and where: which namespaces, which members import from which, each
// member's cluster ID and where its endpoints may lie. Endpoints never pass
// through it: provider-kilomesh follows them from the members' own watches.
func composeServices(cp *composition, x *xrMesh) {
	members, family := mesh.ServicePolicy(x.Namespace, x.Name, &x.Spec)
	if members == nil {
		return
	}
	namespaces := make([]string, len(x.Spec.Services.Namespaces))
	for i, n := range x.Spec.Services.Namespaces {
		namespaces[i] = string(n)
	}
	nsValue := stringList(namespaces)
	for i, m := range members {
		c := x.Spec.Clusters[i]
		sources := make([]*structpb.Value, len(m.Sources))
		for j, s := range m.Sources {
			sources[j] = object(map[string]*structpb.Value{
				"name":              str(s.Name),
				"clusterID":         str(s.ClusterID),
				"providerConfigRef": providerConfigRef(s.Ref),
				"networks":          stringList(s.Networks),
			})
		}
		params := map[string]*structpb.Value{
			"selector":   cp.owned,
			"clusterID":  str(m.ClusterID),
			"namespaces": nsValue,
			"networks":   stringList(m.Networks),
			"family":     str(family),
			"sources":    structpb.NewListValue(&structpb.ListValue{Values: sources}),
		}
		if w := x.Spec.Services.WithdrawAfter; w != nil {
			params["withdrawAfter"] = str(w.Duration.String())
		}
		cp.put(prefixServices+c.Name, &structpb.Struct{Fields: map[string]*structpb.Value{
			"apiVersion": str(kubev1alpha1.GroupVersion.String()),
			"kind":       str(kubev1alpha1.ServiceSyncKind),
			"metadata": object(map[string]*structpb.Value{
				"annotations": stringMap(map[string]string{meshv1alpha1.AnnotationMeshName: x.Name}),
			}),
			"spec": object(map[string]*structpb.Value{
				"providerConfigRef": providerConfigRef(c.ProviderConfigRef),
				"forProvider":       object(params),
			}),
		}})
	}
}
