package mesh

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// benchInput is a mesh of clusters x nodes, every node its own segment.
func benchInput(clusters, nodes int) *Input {
	in := &Input{Namespace: "network", Name: "mesh", Observations: map[string]*Observation{},
		Spec: meshv1alpha1.ClusterMeshSpec{Granularity: meshv1alpha1.GranularityNode}}
	now := metav1.Now()
	for c := range clusters {
		name := fmt.Sprintf("cluster-%02d", c)
		svc := meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", 200+c))
		in.Spec.Clusters = append(in.Spec.Clusters, meshv1alpha1.Cluster{
			Name: name, ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Name: name},
			PodCIDRs:      []meshv1alpha1.CIDR{meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", c+1))},
			WireguardCIDR: meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", 100+c)),
			ServiceCIDR:   &svc,
			NodeCIDRs:     []meshv1alpha1.CIDR{meshv1alpha1.CIDR(fmt.Sprintf("172.%d.0.0/16", 16+c))},
		})
		obs := &Observation{Reachable: true}
		obs.ObservedAt = &now
		for n := range nodes {
			var k [32]byte
			k[0], k[1], k[2], k[3] = byte(c), byte(n>>8), byte(n), 1
			host := fmt.Sprintf("%d.%d", n/250, n%250+1)
			node := nodefixture.New(fmt.Sprintf("node-%04d", n)).
				Pods(fmt.Sprintf("10.%d.%d.%d/28", c+1, n/16, (n%16)*16)).
				Internal(fmt.Sprintf("172.%d.%s", 16+c, host)).
				External(fmt.Sprintf("100.%d.%s", 64+c, host)).
				With(kilov1alpha1.AnnotationKey, kilov1alpha1.EncodeKey(k)).
				With(kilov1alpha1.AnnotationWireguardIP, fmt.Sprintf("10.%d.%s/16", 100+c, host)).
				With(kilov1alpha1.AnnotationEndpoint, fmt.Sprintf("100.%d.%s:51820", 64+c, host)).
				With(kilov1alpha1.AnnotationInternalIP, fmt.Sprintf("172.%d.%s/16", 16+c, host)).
				Reported(corev1.ConditionTrue).Seen(now.Time)
			obs.Nodes = append(obs.Nodes, node.ObservedAt(now.Time))
		}
		in.Observations[name] = obs
	}
	return in
}

// BenchmarkPlan measures the planner alone.
//
//	go test ./fn/mesh/ -run='^$' -bench=Plan -benchmem
func BenchmarkPlan(b *testing.B) {
	for _, size := range []struct{ clusters, nodes int }{{3, 20}, {5, 200}, {10, 500}} {
		b.Run(fmt.Sprintf("%dx%d", size.clusters, size.nodes), func(b *testing.B) {
			in := benchInput(size.clusters, size.nodes)
			var peers int
			for b.Loop() {
				p, err := Do(in)
				if err != nil {
					b.Fatal(err)
				}
				peers = p.Status.PeerCount
			}
			if want := size.clusters * (size.clusters - 1) * size.nodes; peers != want {
				b.Fatalf("planned %d Peers, want %d: the benchmark's nodes no longer pass the checks", peers, want)
			}
			b.ReportMetric(float64(peers), "peers")
		})
	}
}

// equalPrefixSpec is a mesh of the given clusters whose every CIDR field is
// filled, to its schema's limit, with copies of 10.0.0.0/8: 138 copies per
// member (8 pod CIDRs, the WireGuard and service CIDRs, 64 additional CIDRs
// and 64 node CIDRs). Any tenant may write such a spec, and the overlap
// report must still answer at once.
func equalPrefixSpec(clusters int) meshv1alpha1.ClusterMeshSpec {
	same := func(n int) []meshv1alpha1.CIDR {
		out := make([]meshv1alpha1.CIDR, n)
		for i := range out {
			out[i] = "10.0.0.0/8"
		}
		return out
	}
	eight := meshv1alpha1.CIDR("10.0.0.0/8")
	var spec meshv1alpha1.ClusterMeshSpec
	for c := range clusters {
		spec.Clusters = append(spec.Clusters, meshv1alpha1.Cluster{
			Name:              fmt.Sprintf("c%02d", c),
			ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ProviderConfig", Name: fmt.Sprintf("c%02d", c)},
			PodCIDRs:          same(8),
			WireguardCIDR:     "10.0.0.0/8",
			ServiceCIDR:       &eight,
			AdditionalCIDRs:   same(64),
			NodeCIDRs:         same(64),
		})
	}
	return spec
}

// BenchmarkOverlapReport times the overlap report of the largest spec a
// tenant can write, all of it one prefix, against as many sibling meshes as
// the function reads.
func BenchmarkOverlapReport(b *testing.B) {
	for _, size := range []struct{ clusters, siblings int }{{64, 0}, {64, 32}} {
		b.Run(fmt.Sprintf("%dclusters-%dsiblings", size.clusters, size.siblings), func(b *testing.B) {
			in := &Input{Namespace: "team", Name: "mesh", Spec: equalPrefixSpec(size.clusters)}
			for s := range size.siblings {
				in.Others = append(in.Others, OtherMesh{Name: fmt.Sprintf("sibling-%02d", s), Spec: equalPrefixSpec(size.clusters)})
			}
			for b.Loop() {
				var overlap *OverlapError
				if _, err := Do(in); !errors.As(err, &overlap) {
					b.Fatalf("want the overlap reported, got %v", err)
				}
			}
		})
	}
}
