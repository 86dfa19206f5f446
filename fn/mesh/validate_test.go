package mesh

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// fieldError is a field.Error reduced to its type and path.
type fieldError struct {
	Type  field.ErrorType
	Field string
}

func invalid(path string) fieldError      { return fieldError{field.ErrorTypeInvalid, path} }
func required(path string) fieldError     { return fieldError{field.ErrorTypeRequired, path} }
func duplicate(path string) fieldError    { return fieldError{field.ErrorTypeDuplicate, path} }
func notSupported(path string) fieldError { return fieldError{field.ErrorTypeNotSupported, path} }

// planErrors runs the planner and sorts what it returns into the kinds of
// error that freeze the mesh.
func planErrors(in *Input) (p *Plan, spec []fieldError, overlaps []string, other error) {
	p, err := Do(in)
	var ise *InvalidSpecError
	var oe *OverlapError
	switch {
	case err == nil:
	case errors.As(err, &ise):
		for _, e := range ise.Errors {
			spec = append(spec, fieldError{e.Type, e.Field})
		}
	case errors.As(err, &oe):
		overlaps = oe.Overlaps
	default:
		other = err
	}
	return p, spec, overlaps, other
}

func TestSpecValidation(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   meshv1alpha1.ClusterMeshSpec
		want   []fieldError
	}{
		"Valid": {
			reason: "A mesh of two well-formed clusters is valid.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()}},
		},
		"ObjectsWithNamespacedConfig": {
			reason: "delivery: Objects would hand a tenant's namespaced ProviderConfig to provider-kubernetes, which does not check it: refused, naming each such member.",
			spec: meshv1alpha1.ClusterMeshSpec{Delivery: meshv1alpha1.DeliveryObjects, Clusters: []meshv1alpha1.Cluster{
				clusterA(withConfig("ClusterProviderConfig", "a")), clusterB(), clusterC(),
			}},
			want: []fieldError{invalid("spec.clusters[1].providerConfigRef.kind"), invalid("spec.clusters[2].providerConfigRef.kind")},
		},
		"ObjectsWithClusterConfigs": {
			reason: "delivery: Objects with every member reached through a ClusterProviderConfig, an administrator's object, is valid.",
			spec: meshv1alpha1.ClusterMeshSpec{Delivery: meshv1alpha1.DeliveryObjects, Clusters: []meshv1alpha1.Cluster{
				clusterA(withConfig("ClusterProviderConfig", "a")), clusterB(withConfig("ClusterProviderConfig", "b")),
			}},
		},
		"ValidWithEverything": {
			reason: "Every optional field set to a valid value is valid.",
			spec: meshv1alpha1.ClusterMeshSpec{
				Granularity: meshv1alpha1.GranularityLocation, Delivery: meshv1alpha1.DeliveryPeerSet, AdvertiseNodeIPs: boolPtr(false),
				Clusters: []meshv1alpha1.Cluster{
					clusterA(withPods("10.1.0.0/16", "10.11.0.0/16"), withService("10.201.0.0/16"), withAdditional("172.16.0.0/16"),
						withPort(1), withKeepalive(0), withConfig("ProviderConfig", "a-creds")),
					clusterB(withPort(65535), withKeepalive(65535), withConfig("ClusterProviderConfig", "b-creds")),
				},
			},
		},
		"OneCluster": {
			reason: "A mesh needs at least two clusters.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA()}},
			want:   []fieldError{invalid("spec.clusters")},
		},
		"NoCluster": {
			reason: "A mesh without clusters is invalid.",
			spec:   meshv1alpha1.ClusterMeshSpec{},
			want:   []fieldError{invalid("spec.clusters")},
		},
		"DuplicateName": {
			reason: "Cluster names are unique in the mesh; the later entry is reported.",
			spec: meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{
				clusterA(), clusterB(), memberCluster("a", "10.3.0.0/16", "10.43.0.0/16"),
			}},
			want: []fieldError{duplicate("spec.clusters[2].name")},
		},
		"NameNotADNSLabel": {
			reason: "Cluster names are DNS labels: they appear in Peer names and labels.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), memberCluster("B_2", "10.2.0.0/16", "10.42.0.0/16")}},
			want:   []fieldError{invalid("spec.clusters[1].name")},
		},
		"PodCIDRHostBits": {
			reason: "A pod CIDR with host bits set is not a network.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withPods("10.1.0.0/16", "10.5.0.1/16")), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].podCIDRs[1]")},
		},
		"PodCIDRGarbage": {
			reason: "A pod CIDR that does not parse is invalid.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB(withPods("10.2.0.0"))}},
			want:   []fieldError{invalid("spec.clusters[1].podCIDRs[0]")},
		},
		"NoPodCIDRs": {
			reason: "A cluster has at least one pod CIDR.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withPods()), clusterB()}},
			want:   []fieldError{required("spec.clusters[0].podCIDRs")},
		},
		"NoWireguardCIDR": {
			reason: "A cluster has a wireguardCIDR.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), memberCluster("b", "10.2.0.0/16", "")}},
			want:   []fieldError{required("spec.clusters[1].wireguardCIDR")},
		},
		"WireguardCIDRHostBits": {
			reason: "A wireguardCIDR with host bits set is invalid.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), memberCluster("b", "10.2.0.0/16", "10.42.0.1/16")}},
			want:   []fieldError{invalid("spec.clusters[1].wireguardCIDR")},
		},
		"ServiceCIDR": {
			reason: "A malformed serviceCIDR is invalid.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withService("10.96.0.0/33")), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].serviceCIDR")},
		},
		"AdditionalCIDR": {
			reason: "Each additional CIDR is checked and reported with its index.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB(withAdditional("172.16.0.0/16", "172.17.0.0/15", "172.20.0.0/16"))}},
			want:   []fieldError{invalid("spec.clusters[1].additionalCIDRs[1]")},
		},
		"CIDRWithZone": {
			reason: "A CIDR with a zone is not a network.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withAdditional("fe80::%eth0/64")), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].additionalCIDRs[0]")},
		},
		"PortZero": {
			reason: "wireguardPort is 1-65535.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withPort(0)), clusterB(withPort(65536))}},
			want:   []fieldError{invalid("spec.clusters[0].wireguardPort"), invalid("spec.clusters[1].wireguardPort")},
		},
		"NegativeKeepalive": {
			reason: "persistentKeepalive is not negative.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withKeepalive(-1)), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].persistentKeepalive")},
		},
		"NoCredentials": {
			reason: "A cluster names its provider config.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withConfig("", "")), clusterB()}},
			want:   []fieldError{required("spec.clusters[0].providerConfigRef.name")},
		},
		"CredentialsKind": {
			reason: "The provider config is a ProviderConfig or a ClusterProviderConfig.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB(withConfig("Secret", "b"))}},
			want:   []fieldError{notSupported("spec.clusters[1].providerConfigRef.kind")},
		},
		"Granularity": {
			reason: "granularity is Auto, Node or Location.",
			spec:   meshv1alpha1.ClusterMeshSpec{Granularity: "Full", Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()}},
			want:   []fieldError{notSupported("spec.granularity")},
		},
		"Delivery": {
			reason: "delivery is Objects or PeerSet.",
			spec:   meshv1alpha1.ClusterMeshSpec{Delivery: "Carrier", Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB()}},
			want:   []fieldError{notSupported("spec.delivery")},
		},
		"IPv6Mesh": {
			reason: "A mesh of IPv6 clusters is valid.",
			spec: meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{
				memberCluster("a", "fd01::/48", "fd41::/64", withNodeCIDRs("fd11::/64"), withService("fd21::/108")),
				memberCluster("b", "fd02::/48", "fd42::/64"),
			}},
		},
		"MixedFamilies": {
			reason: "A mesh runs one family, that of its wireguardCIDRs: an IPv6 cluster in an IPv4 mesh is invalid, and each of its CIDRs is named.",
			spec: meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{
				clusterA(), memberCluster("b", "fd02::/48", "fd42::/64"),
			}},
			want: []fieldError{
				invalid("spec.clusters[1].wireguardCIDR"),
				invalid("spec.clusters[1].podCIDRs[0]"),
			},
		},
		"DualStackPodCIDRs": {
			reason: "A pod CIDR of the other family is invalid: Kilo routes one family, and the receiving side refuses the other's routes.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withPods("10.1.0.0/16", "fd01::/48")), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].podCIDRs[1]")},
		},
		"NodeCIDRsOtherFamily": {
			reason: "nodeCIDRs of the other family are invalid.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(withNodeCIDRs("192.168.0.0/20", "fd11::/64")), clusterB()}},
			want:   []fieldError{invalid("spec.clusters[0].nodeCIDRs[1]")},
		},
		"NodeCIDRMalformed": {
			reason: "Each nodeCIDR is checked and reported with its index.",
			spec:   meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{clusterA(), clusterB(withNodeCIDRs("192.168.16.0/20", "192.168.33.1/24"))}},
			want:   []fieldError{invalid("spec.clusters[1].nodeCIDRs[1]")},
		},
		"SeveralAtOnce": {
			reason: "Every error is reported, each with its own path.",
			spec: meshv1alpha1.ClusterMeshSpec{Clusters: []meshv1alpha1.Cluster{
				clusterA(withPods("x"), withService("y")),
				memberCluster("a", "10.2.0.0/16", "z"),
			}},
			want: []fieldError{
				invalid("spec.clusters[0].podCIDRs[0]"),
				invalid("spec.clusters[0].serviceCIDR"),
				invalid("spec.clusters[1].wireguardCIDR"),
				duplicate("spec.clusters[1].name"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &Input{Namespace: testNamespace, Name: testMesh, Spec: tc.spec}
			p, got, overlaps, other := planErrors(in)
			if other != nil || overlaps != nil {
				t.Fatalf("\n%s\nDo(...): want an InvalidSpecError or none, got %v %v", tc.reason, overlaps, other)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nDo(...): -want field errors, +got:\n%s", tc.reason, diff)
			}
			if (p == nil) != (len(tc.want) > 0) {
				t.Errorf("\n%s\nDo(...): a plan must come exactly when the spec is valid, got %v", tc.reason, p)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	cases := map[string]struct {
		reason   string
		clusters []meshv1alpha1.Cluster
		want     []string
	}{
		"Disjoint": {
			reason:   "Disjoint CIDRs do not overlap.",
			clusters: []meshv1alpha1.Cluster{clusterA(withService("10.201.0.0/16")), clusterB(withService("10.202.0.0/16"))},
		},
		"Adjacent": {
			reason: "Adjacent ranges do not overlap.",
			clusters: []meshv1alpha1.Cluster{
				memberCluster("a", "10.0.0.0/16", "10.1.0.0/16", withService("10.2.0.0/15")),
				memberCluster("b", "10.4.0.0/14", "10.8.0.0/13"),
			},
		},
		"SpecExample": {
			reason:   "A pod CIDR inside another cluster's additional CIDR: the later field is named first, then the earlier.",
			clusters: []meshv1alpha1.Cluster{clusterA(withAdditional("10.2.0.0/15")), clusterB()},
			want:     []string{"spec.clusters[1].podCIDRs[0] 10.2.0.0/16 overlaps spec.clusters[0].additionalCIDRs[0] 10.2.0.0/15"},
		},
		"Equal": {
			reason:   "Equal CIDRs of two clusters overlap.",
			clusters: []meshv1alpha1.Cluster{clusterA(), memberCluster("b", "10.1.0.0/16", "10.42.0.0/16")},
			want:     []string{"spec.clusters[1].podCIDRs[0] 10.1.0.0/16 overlaps spec.clusters[0].podCIDRs[0] 10.1.0.0/16"},
		},
		"Contained": {
			reason:   "A CIDR inside a larger one overlaps it, in either order.",
			clusters: []meshv1alpha1.Cluster{clusterA(), memberCluster("b", "10.0.0.0/8", "172.16.0.0/16")},
			want: []string{
				"spec.clusters[1].podCIDRs[0] 10.0.0.0/8 overlaps spec.clusters[0].podCIDRs[0] 10.1.0.0/16",
				"spec.clusters[1].podCIDRs[0] 10.0.0.0/8 overlaps spec.clusters[0].wireguardCIDR 10.41.0.0/16",
			},
		},
		"WithinOneCluster": {
			reason:   "CIDRs of one cluster overlap each other too: the serviceCIDR inside the pod CIDR.",
			clusters: []meshv1alpha1.Cluster{clusterA(withService("10.1.128.0/17")), clusterB()},
			want:     []string{"spec.clusters[0].serviceCIDR 10.1.128.0/17 overlaps spec.clusters[0].podCIDRs[0] 10.1.0.0/16"},
		},
		"WireguardCIDRs": {
			reason:   "WireGuard CIDRs count: two clusters on Kilo's default 10.4.0.0/16 overlap.",
			clusters: []meshv1alpha1.Cluster{memberCluster("a", "10.1.0.0/16", "10.4.0.0/16"), memberCluster("b", "10.2.0.0/16", "10.4.0.0/16")},
			want:     []string{"spec.clusters[1].wireguardCIDR 10.4.0.0/16 overlaps spec.clusters[0].wireguardCIDR 10.4.0.0/16"},
		},
		"AdditionalCIDRsOfOneCluster": {
			reason:   "Two additional CIDRs of one cluster overlap each other.",
			clusters: []meshv1alpha1.Cluster{clusterA(withAdditional("172.16.0.0/16", "172.16.5.0/24")), clusterB()},
			want:     []string{"spec.clusters[0].additionalCIDRs[1] 172.16.5.0/24 overlaps spec.clusters[0].additionalCIDRs[0] 172.16.0.0/16"},
		},
		"IPv6": {
			reason:   "IPv6 pod CIDRs of two clusters overlap.",
			clusters: []meshv1alpha1.Cluster{memberCluster("a", "fd00::/48", "fd41::/64"), memberCluster("b", "fd00:0:0:1::/64", "fd42::/64")},
			want:     []string{"spec.clusters[1].podCIDRs[0] fd00:0:0:1::/64 overlaps spec.clusters[0].podCIDRs[0] fd00::/48"},
		},
		"NodeCIDRs": {
			reason:   "nodeCIDRs count: a node network of one cluster inside another's is an overlap.",
			clusters: []meshv1alpha1.Cluster{clusterA(), clusterB(withNodeCIDRs("192.168.0.0/16"))},
			want:     []string{"spec.clusters[1].nodeCIDRs[0] 192.168.0.0/16 overlaps spec.clusters[0].nodeCIDRs[0] 192.168.0.0/20"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, spec, got, other := planErrors(meshInput(tc.clusters, nil))
			if other != nil || spec != nil {
				t.Fatalf("\n%s\nDo(...): want an OverlapError or none, got %v %v", tc.reason, spec, other)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nDo(...): -want overlaps, +got:\n%s", tc.reason, diff)
			}
			if (p == nil) != (len(tc.want) > 0) {
				t.Errorf("\n%s\nDo(...): an overlap freezes the mesh: no plan; got %v", tc.reason, p)
			}
		})
	}
}

// TestOverlapReportBounded pins that a spec with very many overlapping
// CIDRs (64 clusters sharing 74 equal ones make about 11 million pairs) is
// reported with a bounded list and an exact count, not a list of every pair.
func TestOverlapReportBounded(t *testing.T) {
	var clusters []meshv1alpha1.Cluster
	var additional []string
	for range 70 {
		additional = append(additional, "172.16.0.0/16")
	}
	for i := range 64 {
		clusters = append(clusters, memberCluster(fmt.Sprintf("c%d", i), "10.0.0.0/16", "10.1.0.0/16",
			withService("10.2.0.0/16"), withNodeCIDRs("10.3.0.0/16"), withAdditional(additional...)))
	}
	_, err := Do(meshInput(clusters, nil))
	var oe *OverlapError
	if !errors.As(err, &oe) {
		t.Fatalf("Do(...): want an OverlapError, got %v", err)
	}
	// Each of the 74 CIDRs of a cluster equals its 63 copies in the other
	// clusters, and the 70 equal additional CIDRs overlap each other
	// within every cluster too.
	n := 64 * 74
	perGroup := 64
	wantPairs := 4*perGroup*(perGroup-1)/2 + (70*64)*(70*64-1)/2
	if got := len(oe.Overlaps); got != maxOverlapsListed {
		t.Errorf("want %d overlaps listed, got %d", maxOverlapsListed, got)
	}
	if got := len(oe.Overlaps) + oe.More; got != wantPairs {
		t.Errorf("want %d overlapping pairs of %d CIDRs counted, got %d", wantPairs, n, got)
	}
	if len(err.Error()) > 10_000 {
		t.Errorf("the error is %d bytes long: it must stay bounded", len(err.Error()))
	}
}

func TestCrossMeshOverlaps(t *testing.T) {
	hub := memberCluster("hub", "10.100.0.0/16", "10.140.0.0/16", withConfig("ProviderConfig", "hub-creds"))
	other := func(clusters ...meshv1alpha1.Cluster) []OtherMesh {
		return []OtherMesh{{Name: "dev", Spec: meshv1alpha1.ClusterMeshSpec{Clusters: clusters}}}
	}
	cases := map[string]struct {
		reason string
		others []OtherMesh
		want   []string
	}{
		"Disjoint": {
			reason: "Meshes of disjoint CIDRs coexist.",
			others: other(clusterC(), memberCluster("d", "10.4.0.0/16", "10.44.0.0/16")),
		},
		"Overlap": {
			reason: "A CIDR of this mesh overlapping one of another mesh of the namespace freezes the mesh; both paths and CIDRs are named.",
			others: other(clusterC(), memberCluster("d", "10.2.0.0/20", "10.44.0.0/16")),
			want:   []string{"spec.clusters[2].podCIDRs[0] 10.2.0.0/16 overlaps ClusterMesh dev spec.clusters[1].podCIDRs[0] 10.2.0.0/20"},
		},
		"SharedHub": {
			reason: "The same cluster (same name, same credentials) in both meshes is not an overlap.",
			others: other(hub, clusterC()),
		},
		"SharedHubDefaultKind": {
			reason: "An empty credentials kind is the default, the namespaced ProviderConfig.",
			others: other(memberCluster("hub", "10.100.0.0/16", "10.140.0.0/16", withConfig("", "hub-creds")), clusterC()),
		},
		"SameNameOtherCredentials": {
			reason: "A cluster of the same name with other credentials is another cluster: its CIDRs overlap.",
			others: other(memberCluster("hub", "10.100.0.0/16", "10.140.0.0/16", withConfig("ProviderConfig", "other-creds")), clusterC()),
			want: []string{
				"spec.clusters[0].podCIDRs[0] 10.100.0.0/16 overlaps ClusterMesh dev spec.clusters[0].podCIDRs[0] 10.100.0.0/16",
				"spec.clusters[0].wireguardCIDR 10.140.0.0/16 overlaps ClusterMesh dev spec.clusters[0].wireguardCIDR 10.140.0.0/16",
			},
		},
		"SameCredentialsOtherKind": {
			reason: "A ProviderConfig and a ClusterProviderConfig of the same name are other credentials.",
			others: other(memberCluster("hub", "10.100.0.0/16", "10.140.0.0/16", withConfig("ClusterProviderConfig", "hub-creds")), clusterC()),
			want: []string{
				"spec.clusters[0].podCIDRs[0] 10.100.0.0/16 overlaps ClusterMesh dev spec.clusters[0].podCIDRs[0] 10.100.0.0/16",
				"spec.clusters[0].wireguardCIDR 10.140.0.0/16 overlaps ClusterMesh dev spec.clusters[0].wireguardCIDR 10.140.0.0/16",
			},
		},
		"SameCredentialsOtherName": {
			reason: "The same credentials under another name are another entry: its CIDRs overlap.",
			others: other(memberCluster("hub2", "10.100.0.0/16", "10.140.0.0/16", withConfig("ProviderConfig", "hub-creds")), clusterC()),
			want: []string{
				"spec.clusters[0].podCIDRs[0] 10.100.0.0/16 overlaps ClusterMesh dev spec.clusters[0].podCIDRs[0] 10.100.0.0/16",
				"spec.clusters[0].wireguardCIDR 10.140.0.0/16 overlaps ClusterMesh dev spec.clusters[0].wireguardCIDR 10.140.0.0/16",
			},
		},
		"TwoSharedClusters": {
			reason: "Two meshes may share at most one cluster.",
			others: other(hub, clusterA(), clusterC()),
			want:   []string{"ClusterMesh dev also joins clusters hub, a: two meshes may share at most one cluster"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := meshInput([]meshv1alpha1.Cluster{hub, clusterA(), clusterB()}, nil)
			in.Others = tc.others
			p, spec, got, other := planErrors(in)
			if other != nil || spec != nil {
				t.Fatalf("\n%s\nDo(...): want an OverlapError or none, got %v %v", tc.reason, spec, other)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nDo(...): -want overlaps, +got:\n%s", tc.reason, diff)
			}
			if (p == nil) != (len(tc.want) > 0) {
				t.Errorf("\n%s\nDo(...): an overlap freezes the mesh: no plan; got %v", tc.reason, p)
			}
		})
	}
}
