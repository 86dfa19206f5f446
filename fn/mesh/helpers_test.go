package mesh

import (
	"encoding/base64"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// Builders shared by the tests of this package. They keep table cases to the
// fields a case is about.

const (
	testNamespace = "team-a"
	testMesh      = "prod"
)

var (
	observedAt       = metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	unreachableSince = metav1.NewTime(time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC))
)

// testKey is a WireGuard public key made of 32 bytes of value n.
func testKey(n byte) string {
	var k [32]byte
	for i := range k {
		k[i] = n
	}
	return base64.StdEncoding.EncodeToString(k[:])
}

func cidrs(ss ...string) []meshv1alpha1.CIDR {
	out := make([]meshv1alpha1.CIDR, len(ss))
	for i, s := range ss {
		out[i] = meshv1alpha1.CIDR(s)
	}
	return out
}

func cidrPtr(s string) *meshv1alpha1.CIDR {
	c := meshv1alpha1.CIDR(s)
	return &c
}

func int32Ptr(i int32) *int32 { return &i }

func boolPtr(b bool) *bool { return &b }

type clusterOpt func(*meshv1alpha1.Cluster)

// memberCluster declares a member with pod CIDRs and a WireGuard CIDR, and
// credentials named after it.
func memberCluster(name, pods, wg string, opts ...clusterOpt) meshv1alpha1.Cluster {
	c := meshv1alpha1.Cluster{
		Name:              name,
		ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Name: name},
		PodCIDRs:          cidrs(pods),
		WireguardCIDR:     meshv1alpha1.CIDR(wg),
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func withPods(p ...string) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.PodCIDRs = cidrs(p...) }
}

func withService(s string) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.ServiceCIDR = cidrPtr(s) }
}

func withAdditional(s ...string) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.AdditionalCIDRs = cidrs(s...) }
}

func withPort(p int32) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.WireguardPort = int32Ptr(p) }
}

func withKeepalive(k int32) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.PersistentKeepalive = int32Ptr(k) }
}

func withNodeCIDRs(s ...string) clusterOpt {
	return func(c *meshv1alpha1.Cluster) { c.NodeCIDRs = cidrs(s...) }
}

func withConfig(kind, name string) clusterOpt {
	return func(c *meshv1alpha1.Cluster) {
		c.ProviderConfigRef = meshv1alpha1.ProviderConfigReference{Kind: kind, Name: name}
	}
}

// The three standard members of the tests: a, b and c. Their nodes have
// internal addresses in 192.168.0.0/20, 192.168.16.0/20 and 192.168.32.0/20.
func clusterA(opts ...clusterOpt) meshv1alpha1.Cluster {
	return memberCluster("a", "10.1.0.0/16", "10.41.0.0/16", append([]clusterOpt{withNodeCIDRs("192.168.0.0/20")}, opts...)...)
}

func clusterB(opts ...clusterOpt) meshv1alpha1.Cluster {
	return memberCluster("b", "10.2.0.0/16", "10.42.0.0/16", append([]clusterOpt{withNodeCIDRs("192.168.16.0/20")}, opts...)...)
}

func clusterC() meshv1alpha1.Cluster {
	return memberCluster("c", "10.3.0.0/16", "10.43.0.0/16", withNodeCIDRs("192.168.32.0/20"))
}

// A nodeOpt changes the Node of a test: what Kilo and the kubelet leave on
// it, from which the tests build what an inventory publishes of it.
type nodeOpt func(*nodefixture.Node)

// annotation sets one of Kilo's annotations, even to an empty value.
func annotation(k, v string) nodeOpt {
	return func(n *nodefixture.Node) { *n = n.With(k, v) }
}

// observedNode is what an inventory publishes at observedAt of a Ready node
// with a fresh heartbeat, the given options and nothing else.
func observedNode(name string, opts ...nodeOpt) kubev1alpha1.ObservedNode {
	n := nodefixture.New(name).Reported(corev1.ConditionTrue).Seen(observedAt.Time)
	for _, o := range opts {
		o(&n)
	}
	return n.ObservedAt(observedAt.Time)
}

func podCIDRs(p ...string) nodeOpt {
	return func(n *nodefixture.Node) { *n = n.Pods(p...) }
}

func wgIP(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationWireguardIP, s) }

func pubKey(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationKey, s) }

func keyN(k byte) nodeOpt { return pubKey(testKey(k)) }

func externalIPs(ips ...string) nodeOpt {
	return func(n *nodefixture.Node) { *n = n.External(ips...) }
}

// statusInternalIPs sets the Node's InternalIP addresses, which Kilo does not
// route and neither does the mesh.
func statusInternalIPs(ips ...string) nodeOpt {
	return func(n *nodefixture.Node) { *n = n.Internal(ips...) }
}

// internalIP sets kilo.squat.ai/internal-ip, the address Kilo routes, as a
// CIDR like Kilo writes it.
func internalIP(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationInternalIP, s) }

func forceInternalIP(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationForceInternalIP, s) }

// volunteer sets kilo.squat.ai/leader.
func volunteer() nodeOpt { return annotation(kilov1alpha1.AnnotationLeader, "true") }

// stale removes the node's Kilo heartbeat: it is stale, and the inventory
// does not say since when.
func stale() nodeOpt {
	return func(n *nodefixture.Node) { *n = n.Without(kilov1alpha1.AnnotationLastSeen) }
}

func locationIPs(s string) nodeOpt {
	return annotation(kilov1alpha1.AnnotationAllowedLocationIPs, s)
}

// location sets kilo.squat.ai/location, which wins over the region label.
func location(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationLocation, s) }

func clustermeshEndpoint(s string) nodeOpt {
	return annotation(kilov1alpha1.AnnotationClustermeshEndpoint, s)
}

func forceEndpoint(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationForceEndpoint, s) }

func kiloEndpoint(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationEndpoint, s) }

func granularity(s string) nodeOpt { return annotation(kilov1alpha1.AnnotationGranularity, s) }

func nodeKeepalive(s string) nodeOpt {
	return annotation(kilov1alpha1.AnnotationPersistentKeepalive, s)
}

func discovered(s string) nodeOpt {
	return annotation(kilov1alpha1.AnnotationDiscoveredEndpoints, s)
}

// leaderNode is a node that passes every check: one pod CIDR, a WireGuard
// IP, a key, an ExternalIP and the endpoint Kilo detected on it (the same
// address; Kilo needs one to count the node). Later options override these.
func leaderNode(name, pods, wg string, key byte, ext string, opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{podCIDRs(pods), wgIP(wg), keyN(key)}
	if ext != "" {
		base = append(base, externalIPs(ext), kiloEndpoint(ext+":51820"))
	}
	return observedNode(name, append(base, opts...)...)
}

// memberNode is a node Kilo counts that does not lead its segment: a pod
// CIDR, a key, the endpoint Kilo detected and an internal address.
func memberNode(name, pods string, key byte, internal string, opts ...nodeOpt) kubev1alpha1.ObservedNode {
	base := []nodeOpt{podCIDRs(pods), keyN(key), kiloEndpoint(strings.Split(internal, "/")[0] + ":51820"), internalIP(internal)}
	return observedNode(name, append(base, opts...)...)
}

// nodeB1 is the one node of cluster b in most tests: it receives a's Peers.
func nodeB1(opts ...nodeOpt) kubev1alpha1.ObservedNode {
	return leaderNode("b1", "10.2.1.0/24", "10.42.0.1/16", 101, "198.51.100.1", opts...)
}

// observation is a current observation of the given nodes.
func observation(nodes ...kubev1alpha1.ObservedNode) *Observation {
	return &Observation{
		NodeInventoryObservation: kubev1alpha1.NodeInventoryObservation{ObservedAt: &observedAt, Nodes: nodes},
		Reachable:                true,
	}
}

// meshInput is a mesh of the given members in namespace team-a named prod.
func meshInput(clusters []meshv1alpha1.Cluster, obs map[string]*Observation) *Input {
	return &Input{
		Namespace:    testNamespace,
		Name:         testMesh,
		Spec:         meshv1alpha1.ClusterMeshSpec{Clusters: clusters},
		Observations: obs,
	}
}

// twoClusters is a mesh of a (with the given nodes) and b (with b1).
func twoClusters(g meshv1alpha1.Granularity, nodesOfA ...kubev1alpha1.ObservedNode) *Input {
	in := meshInput([]meshv1alpha1.Cluster{clusterA(), clusterB()}, map[string]*Observation{
		"a": observation(nodesOfA...),
		"b": observation(nodeB1()),
	})
	in.Spec.Granularity = g
	return in
}

func labelsOf(source string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "kilomesh",
		"kilomesh.io/mesh-namespace":   testNamespace,
		"kilomesh.io/mesh":             testMesh,
		"kilomesh.io/source-cluster":   source,
	}
}

func ipEndpoint(ip string, port uint32) *kilov1alpha1.PeerEndpoint {
	return &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: ip}, Port: port}
}

func dnsEndpoint(dns string, port uint32) *kilov1alpha1.PeerEndpoint {
	return &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: dns}, Port: port}
}

// wantPeer is the Peer of the segment of source led by leader, as the tests
// expect it.
func wantPeer(source, leader string, key byte, ep *kilov1alpha1.PeerEndpoint, allowed ...string) kilov1alpha1.Peer {
	return kilov1alpha1.Peer{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kilo.squat.ai/v1alpha1", Kind: "Peer"},
		ObjectMeta: metav1.ObjectMeta{Name: PeerName(testNamespace, testMesh, source, leader), Labels: labelsOf(source)},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs: allowed,
			PublicKey:  testKey(key),
			Endpoint:   ep,
		},
	}
}

// statusOf returns the status of one member, or a zero status.
func statusOf(p *Plan, cluster string) meshv1alpha1.ClusterStatus {
	for _, c := range p.Status.Clusters {
		if c.Name == cluster {
			return c
		}
	}
	return meshv1alpha1.ClusterStatus{}
}

// skip is a skipped node without its message, which tests do not pin.
type skip struct {
	Node, Reason string
}

func skipsOf(p *Plan, cluster string) []skip {
	var out []skip
	for _, s := range statusOf(p, cluster).Skipped {
		out = append(out, skip{Node: s.Node, Reason: s.Reason})
	}
	return out
}

// warning is a warning without its message.
type warning struct {
	Cluster, Reason string
}

func warningsOf(p *Plan) []warning {
	var out []warning
	for _, w := range p.Warnings {
		out = append(out, warning{Cluster: w.Cluster, Reason: w.Reason})
	}
	return out
}

// namesIn lists the names of the Peers written into target.
func namesIn(p *Plan, target string) []string {
	var out []string
	for _, peer := range p.Peers[target] {
		out = append(out, peer.Name)
	}
	return out
}

// peerNames are the names of the Peers of the segments of source led by
// leaders, in the order a target lists them.
func peerNames(source string, leaders ...string) []string {
	var out []string
	for _, l := range leaders {
		out = append(out, PeerName(testNamespace, testMesh, source, l))
	}
	sort.Strings(out)
	return out
}

// otherSpelling writes a canonical key another way: base64 of 32 bytes ends
// in two bits that carry no data, and a decoder that is not strict ignores
// them.
func otherSpelling(canonical string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := []byte(canonical)
	i := strings.IndexByte(alphabet, b[42])
	b[42] = alphabet[i|1]
	return string(b)
}

// problemsOf lists the warnings of one cluster that are problems, not
// skips: the reasons that leave nodes in the mesh.
func problemsOf(p *Plan, cluster string) []warning {
	skips := map[string]bool{}
	for _, s := range statusOf(p, cluster).Skipped {
		skips[s.Reason] = true
	}
	var out []warning
	for _, w := range p.Warnings {
		if w.Cluster == cluster && !skips[w.Reason] {
			out = append(out, warning{Cluster: w.Cluster, Reason: w.Reason})
		}
	}
	return out
}
