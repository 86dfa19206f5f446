package mesh

import (
	"net/netip"
	"strings"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// maxClusterIDLen is the longest cluster ID: a DNS label, since it is one
// in per-endpoint DNS names (<hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local).
const maxClusterIDLen = 63

// ClusterID is a member's cluster ID in the ClusterSet the mesh's members
// form (KEP-2149's cluster.clusterset.k8s.io): the member's name and a
// hash of the mesh's namespace, the mesh and the member, so the same
// cluster has a different ID in each mesh, and IDs never collide across
// meshes. It is a DNS label.
func ClusterID(namespace, mesh, cluster string) string {
	suffix := "-" + meshv1alpha1.IdentityHash("clusterset", namespace, mesh, cluster)
	readable := cluster
	if len(readable) > maxClusterIDLen-len(suffix) {
		readable = strings.TrimRight(readable[:maxClusterIDLen-len(suffix)], "-")
	}
	return readable + suffix
}

// A ServiceMember is what one member of a mesh that shares Services is
// told: who it is, where its own endpoints may lie, and whom it imports
// from.
type ServiceMember struct {
	// Name of the member, and its ClusterID.
	Name, ClusterID string
	// Networks its endpoints may lie in.
	Networks []string
	// Sources are the other members, in spec order.
	Sources []ServiceSource
}

// A ServiceSource is another member that a member imports from.
type ServiceSource struct {
	Name, ClusterID string
	Ref             meshv1alpha1.ProviderConfigReference
	Networks        []string
}

// ServicePolicy says, for a mesh whose spec validated, what each member
// shares: nil when the mesh shares no Services. Every member imports from
// every other one. The endpoints of a member may lie only where the mesh
// routes to it: its pod networks, its additional networks, and its node
// networks when node addresses are routed. The family is the mesh's, IPv4
// or IPv6.
func ServicePolicy(namespace, name string, spec *meshv1alpha1.ClusterMeshSpec) ([]ServiceMember, string) {
	if spec.Services == nil || len(spec.Clusters) == 0 {
		return nil, ""
	}
	fam := "IPv4"
	if p, err := netip.ParsePrefix(string(spec.Clusters[0].WireguardCIDR)); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() {
		fam = "IPv6"
	}
	nodes := spec.AdvertiseNodeIPs == nil || *spec.AdvertiseNodeIPs
	sources := make([]ServiceSource, len(spec.Clusters))
	for i, c := range spec.Clusters {
		nets := make([]string, 0, len(c.PodCIDRs)+len(c.AdditionalCIDRs)+len(c.NodeCIDRs))
		for _, cidr := range c.PodCIDRs {
			nets = append(nets, string(cidr))
		}
		for _, cidr := range c.AdditionalCIDRs {
			nets = append(nets, string(cidr))
		}
		if nodes {
			for _, cidr := range c.NodeCIDRs {
				nets = append(nets, string(cidr))
			}
		}
		sources[i] = ServiceSource{Name: c.Name, ClusterID: ClusterID(namespace, name, c.Name), Ref: c.ProviderConfigRef, Networks: nets}
	}
	out := make([]ServiceMember, len(spec.Clusters))
	for i, s := range sources {
		m := ServiceMember{Name: s.Name, ClusterID: s.ClusterID, Networks: s.Networks}
		for j, o := range sources {
			if j != i {
				m.Sources = append(m.Sources, o)
			}
		}
		out[i] = m
	}
	return out, fam
}
