package mesh

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

func TestClusterID(t *testing.T) {
	long := "cabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij12"
	cases := map[string]struct {
		reason        string
		ns, mesh, c   string
		wantReadable  string
		differentFrom [3]string
	}{
		"Short": {
			reason: "A short member name is kept, and the ID differs from the same member's in another mesh.",
			ns:     "network", mesh: "mesh", c: "cluster-a",
			wantReadable:  "cluster-a-",
			differentFrom: [3]string{"network", "other", "cluster-a"},
		},
		"Namespace": {
			reason: "The same mesh name in another namespace gives another ID.",
			ns:     "network", mesh: "mesh", c: "cluster-a",
			wantReadable:  "cluster-a-",
			differentFrom: [3]string{"tenant", "mesh", "cluster-a"},
		},
		"Long": {
			reason: "A member name of 63 characters is cut so that the ID stays a DNS label.",
			ns:     "network", mesh: "mesh", c: long,
			wantReadable:  long[:54],
			differentFrom: [3]string{"network", "mesh", long[:62]},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ClusterID(tc.ns, tc.mesh, tc.c)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%s\nClusterID(...) = %q is not a DNS label: %v", tc.reason, got, errs)
			}
			if got[:len(tc.wantReadable)] != tc.wantReadable {
				t.Errorf("%s\nClusterID(...) = %q, want it to start with %q", tc.reason, got, tc.wantReadable)
			}
			if other := ClusterID(tc.differentFrom[0], tc.differentFrom[1], tc.differentFrom[2]); other == got {
				t.Errorf("%s\nClusterID(%v) = ClusterID(...) = %q", tc.reason, tc.differentFrom, got)
			}
		})
	}
}

func TestServicePolicy(t *testing.T) {
	no := false
	pods := func(c ...meshv1alpha1.CIDR) []meshv1alpha1.CIDR { return c }
	clusters := []meshv1alpha1.Cluster{
		{Name: "a", ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ProviderConfig", Name: "a"}, PodCIDRs: pods("10.1.0.0/16"), WireguardCIDR: "10.201.0.0/16", NodeCIDRs: pods("192.168.1.0/24"), AdditionalCIDRs: pods("172.16.0.0/16")},
		{Name: "b", ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "b"}, PodCIDRs: pods("10.2.0.0/16"), WireguardCIDR: "10.202.0.0/16"},
	}
	a := ServiceSource{Name: "a", ClusterID: ClusterID("ns", "m", "a"), Ref: clusters[0].ProviderConfigRef, Networks: []string{"10.1.0.0/16", "172.16.0.0/16", "192.168.1.0/24"}}
	b := ServiceSource{Name: "b", ClusterID: ClusterID("ns", "m", "b"), Ref: clusters[1].ProviderConfigRef, Networks: []string{"10.2.0.0/16"}}
	cases := map[string]struct {
		reason     string
		spec       meshv1alpha1.ClusterMeshSpec
		want       []ServiceMember
		wantFamily string
	}{
		"Off": {
			reason: "A mesh without spec.services shares nothing.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: clusters},
		},
		"On": {
			reason: "Every member imports from every other one; endpoints may lie in pod, additional and node networks.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: clusters, Services: &meshv1alpha1.Services{Namespaces: []meshv1alpha1.Namespace{"shop"}}},
			want: []ServiceMember{
				{Name: "a", ClusterID: a.ClusterID, Networks: a.Networks, Sources: []ServiceSource{b}},
				{Name: "b", ClusterID: b.ClusterID, Networks: b.Networks, Sources: []ServiceSource{a}},
			},
			wantFamily: "IPv4",
		},
		"NodeIPsNotRouted": {
			reason: "With advertiseNodeIPs: false no node address is routed, so no endpoint may lie in the node networks.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: clusters, AdvertiseNodeIPs: &no, Services: &meshv1alpha1.Services{Namespaces: []meshv1alpha1.Namespace{"shop"}}},
			want: []ServiceMember{
				{Name: "a", ClusterID: a.ClusterID, Networks: a.Networks[:2], Sources: []ServiceSource{b}},
				{Name: "b", ClusterID: b.ClusterID, Networks: b.Networks, Sources: []ServiceSource{{Name: "a", ClusterID: a.ClusterID, Ref: a.Ref, Networks: a.Networks[:2]}}},
			},
			wantFamily: "IPv4",
		},
		"IPv6": {
			reason: "The family is the mesh's, from its WireGuard networks.",
			spec: meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{
				{Name: "a", PodCIDRs: pods("fd01::/48"), WireguardCIDR: "fd10::/64"},
				{Name: "b", PodCIDRs: pods("fd02::/48"), WireguardCIDR: "fd20::/64"},
			}, Services: &meshv1alpha1.Services{Namespaces: []meshv1alpha1.Namespace{"shop"}}},
			want: []ServiceMember{
				{Name: "a", ClusterID: a.ClusterID, Networks: []string{"fd01::/48"}, Sources: []ServiceSource{{Name: "b", ClusterID: b.ClusterID, Networks: []string{"fd02::/48"}}}},
				{Name: "b", ClusterID: b.ClusterID, Networks: []string{"fd02::/48"}, Sources: []ServiceSource{{Name: "a", ClusterID: a.ClusterID, Networks: []string{"fd01::/48"}}}},
			},
			wantFamily: "IPv6",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, fam := ServicePolicy("ns", "m", &tc.spec)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nServicePolicy(...): -want, +got:\n%s", tc.reason, diff)
			}
			if fam != tc.wantFamily {
				t.Errorf("%s\nServicePolicy(...) family = %q, want %q", tc.reason, fam, tc.wantFamily)
			}
		})
	}
}
