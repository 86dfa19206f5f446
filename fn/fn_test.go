package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

const (
	keyA1 = "9V/xb2b0M2Ama5Xbb4/sAddgMQVDBq5KSzgFmPbP0RQ="
	keyB1 = "fclvd2yEI+V6J4VImj+cQ/tudWh21q2anKxKpOcuwZM="
)

// fromYAML converts a YAML object into its protobuf form.
func fromYAML(t *testing.T, y string) *structpb.Struct {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad YAML in test: %v", err)
	}
	return resource.MustStructJSON(string(j))
}

const xrTwoClusters = `
apiVersion: kilomesh.io/v1alpha1
kind: ClusterMesh
metadata: {name: mesh, namespace: network}
spec:
  delivery: %s
  clusters:
  - name: cluster-a
    providerConfigRef: {kind: ClusterProviderConfig, name: cluster-a}
    podCIDRs: [10.1.0.0/16]
    wireguardCIDR: 10.201.0.0/16
    wireguardPort: 51820
  - name: cluster-b
    providerConfigRef: {kind: ClusterProviderConfig, name: cluster-b}
    podCIDRs: [%s]
    wireguardCIDR: 10.202.0.0/16
    nodeSelector: {matchLabels: {mesh: "yes"}}
`

func xr(t *testing.T, delivery, podsB string) *structpb.Struct {
	t.Helper()
	return fromYAML(t, fmt.Sprintf(xrTwoClusters, delivery, podsB))
}

// inventoryObservedAt is when the inventories of the tests observed their
// members: status.atProvider.observedAt.
var inventoryObservedAt = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// inventoryNode is a node that passes every check, as an inventory
// publishes it: a pod CIDR, an ExternalIP and the endpoint Kilo detected on
// it, a key and a WireGuard IP, fresh and Ready.
func inventoryNode(name, key, pod, wgIP, ext string) nodefixture.Node {
	return nodefixture.New(name).Pods(pod).External(ext).
		With(kilov1alpha1.AnnotationKey, key).
		With(kilov1alpha1.AnnotationWireguardIP, wgIP).
		With(kilov1alpha1.AnnotationEndpoint, ext+":51820").
		Reported(corev1.ConditionTrue).Seen(inventoryObservedAt)
}

// inventory is a NodeInventory as provider-kilomesh reports it, with one
// node (inventoryNode).
func inventory(t *testing.T, cluster, synced, node, key, pod, wgIP, ext string) *fnv1.Resource {
	t.Helper()
	inv := fromYAML(t, fmt.Sprintf(`
apiVersion: kube.kilomesh.io/v1alpha1
kind: NodeInventory
metadata:
  name: mesh-%[1]s
  namespace: network
  annotations: {crossplane.io/composition-resource-name: inventory-%[1]s}
spec:
  providerConfigRef: {kind: ProviderConfig, name: %[1]s}
  forProvider: {}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available, lastTransitionTime: "2026-11-22T01:00:00Z"}
  - {type: Synced, status: "%[2]s", reason: ReconcileError, message: "cannot list nodes: connection refused", lastTransitionTime: "2026-11-22T01:05:00Z"}
  atProvider:
    observedAt: "2026-11-22T01:00:00Z"
`, cluster, synced))
	get(inv, "status", "atProvider").GetStructValue().Fields["nodes"] = nodefixture.Structs(inventoryObservedAt, inventoryNode(node, key, pod, wgIP, ext))
	return &fnv1.Resource{Resource: inv}
}

func observedTwo(t *testing.T, syncedB string) map[string]*fnv1.Resource {
	t.Helper()
	return map[string]*fnv1.Resource{
		"inventory-cluster-a": inventory(t, "cluster-a", "True", "node-a1", keyA1, "10.1.1.0/24", "10.201.0.1/16", "203.0.113.11"),
		"inventory-cluster-b": inventory(t, "cluster-b", syncedB, "node-b1", keyB1, "10.2.1.0/24", "10.202.0.1/16", "198.51.100.21"),
	}
}

func request(xr *structpb.Struct, observed map[string]*fnv1.Resource, required map[string]*fnv1.Resources) *fnv1.RunFunctionRequest {
	return &fnv1.RunFunctionRequest{
		Meta:              &fnv1.RequestMeta{Tag: "t"},
		Observed:          &fnv1.State{Composite: &fnv1.Resource{Resource: xr}, Resources: observed},
		RequiredResources: required,
	}
}

// The member identities of cluster-a and cluster-b of the two-cluster mesh.
var (
	memberA = mesh.MemberID("network", meshv1alpha1.Cluster{Name: "cluster-a", ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "cluster-a"}})
	memberB = mesh.MemberID("network", meshv1alpha1.Cluster{Name: "cluster-b", ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "cluster-b"}})
)

// noOtherMeshes are the requirements of the two-cluster mesh, resolved: no
// other mesh shares a member with it.
var noOtherMeshes = map[string]*fnv1.Resources{"member-cluster-a": {}, "member-cluster-b": {}}

// requirements are what the two-cluster mesh asks Crossplane for: the
// NodeInventories of each member, whichever mesh composed them.
func requirements() *fnv1.Requirements {
	ns := "network"
	member := func(id string) *fnv1.ResourceSelector {
		return &fnv1.ResourceSelector{
			ApiVersion: "kube.kilomesh.io/v1alpha1", Kind: "NodeInventory", Namespace: &ns,
			Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{"kilomesh.io/member": id}}},
		}
	}
	return &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		"member-cluster-a": member(memberA),
		"member-cluster-b": member(memberB),
	}}
}

func meta() *fnv1.ResponseMeta {
	return &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(time.Minute)}
}

// settleMeta is the meta of a response while composed resources become
// ready: Crossplane calls again soon.
func settleMeta() *fnv1.ResponseMeta {
	return &fnv1.ResponseMeta{Tag: "t", Ttl: durationpb.New(15 * time.Second)}
}

func fatal(msg string) []*fnv1.Result {
	return []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_FATAL, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}}
}

func wantCondition(typ string, s fnv1.Status, reason string, msg *string) *fnv1.Condition {
	return &fnv1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, Target: fnv1.Target_TARGET_COMPOSITE.Enum()}
}

func ptr[T any](v T) *T { return &v }

// Composed resources of the two-cluster mesh, as the function writes them.
const (
	inventoryA = `
apiVersion: kube.kilomesh.io/v1alpha1
kind: NodeInventory
metadata:
  labels: {kilomesh.io/member: MEMBER-A}
  annotations: {kilomesh.io/mesh-name: mesh}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: cluster-a}
  forProvider:
    ownedPeerLabels: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh: mesh, kilomesh.io/mesh-namespace: network}
`
	inventoryB = `
apiVersion: kube.kilomesh.io/v1alpha1
kind: NodeInventory
metadata:
  labels: {kilomesh.io/member: MEMBER-B}
  annotations: {kilomesh.io/mesh-name: mesh}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: cluster-b}
  forProvider:
    nodeSelector: {matchLabels: {mesh: "yes"}}
    ownedPeerLabels: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh: mesh, kilomesh.io/mesh-namespace: network}
`
	peerOfB = `
name: mesh-cluster-b-node-b1-2709b7b3
labels: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh: mesh, kilomesh.io/mesh-namespace: network, kilomesh.io/source-cluster: cluster-b}
spec:
  allowedIPs: [10.2.1.0/24, 10.202.0.1/32]
  publicKey: ` + keyB1 + `
  endpoint: {dnsOrIP: {ip: 198.51.100.21}, port: 51820}
`
	peerOfA = `
name: mesh-cluster-a-node-a1-713f87bb
labels: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh: mesh, kilomesh.io/mesh-namespace: network, kilomesh.io/source-cluster: cluster-a}
spec:
  allowedIPs: [10.1.1.0/24, 10.201.0.1/32]
  publicKey: ` + keyA1 + `
  endpoint: {dnsOrIP: {ip: 203.0.113.11}, port: 51820}
`
)

// object wraps a Peer (given as name/labels/spec) in a provider-kubernetes
// Object for the target's provider config.
func wantObject(t *testing.T, peer, pcKind, pcName string) *structpb.Struct {
	t.Helper()
	p := fromYAML(t, peer)
	f := p.GetFields()
	manifest := &structpb.Struct{Fields: map[string]*structpb.Value{
		"apiVersion": structpb.NewStringValue("kilo.squat.ai/v1alpha1"),
		"kind":       structpb.NewStringValue("Peer"),
		"metadata": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"name": f["name"], "labels": f["labels"],
		}}),
		"spec": f["spec"],
	}}
	o := fromYAML(t, fmt.Sprintf(`
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata:
  labels: {kilomesh.io/target-cluster: %[2]s}
spec:
  providerConfigRef: {kind: %[1]s, name: %[2]s}
  forProvider: {}
`, pcKind, pcName))
	o.GetFields()["spec"].GetStructValue().GetFields()["forProvider"].GetStructValue().Fields = map[string]*structpb.Value{
		"manifest": structpb.NewStructValue(manifest),
	}
	return o
}

// emptyPeerSet holds no Peer: no list at all, since provider-kilomesh
// would drop an empty one when it writes the set back.
func emptyPeerSet(t *testing.T, pcKind, pcName string) *structpb.Struct {
	t.Helper()
	ps := peerSet(t, peerOfB, pcKind, pcName)
	delete(ps.GetFields()["spec"].GetStructValue().GetFields()["forProvider"].GetStructValue().Fields, "peers")
	return ps
}

// peerSet holds one Peer (given as name/labels/spec) for the target's
// provider config. In a PeerSet a Peer carries only its source label: the
// set adds its selector.
func peerSet(t *testing.T, peer, pcKind, pcName string) *structpb.Struct {
	t.Helper()
	p := fromYAML(t, peer)
	src := p.GetFields()["labels"].GetStructValue().GetFields()["kilomesh.io/source-cluster"]
	p.Fields["labels"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"kilomesh.io/source-cluster": src}})
	ps := fromYAML(t, fmt.Sprintf(`
apiVersion: kube.kilomesh.io/v1alpha1
kind: PeerSet
spec:
  providerConfigRef: {kind: %s, name: %s}
  forProvider:
    selector: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh: mesh, kilomesh.io/mesh-namespace: network}
`, pcKind, pcName))
	ps.GetFields()["spec"].GetStructValue().GetFields()["forProvider"].GetStructValue().Fields["peers"] =
		structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStructValue(p)}})
	return ps
}

func status(t *testing.T, reachableB bool) *structpb.Struct {
	t.Helper()
	unreachable := ""
	if !reachableB {
		unreachable = `unreachableSince: "2026-11-22T01:05:00Z", message: "cannot list nodes: connection refused",`
	}
	return fromYAML(t, fmt.Sprintf(`
status:
  clusterCount: 2
  peerCount: 2
  clusters:
  - {name: cluster-a, reachable: true, lastObserved: "2026-11-22T01:00:00Z", nodes: 1, segments: 1, peers: 1, skippedNodes: 0}
  - {name: cluster-b, reachable: %t, lastObserved: "2026-11-22T01:00:00Z", %s nodes: 1, segments: 1, peers: 1, skippedNodes: 0}
`, reachableB, unreachable))
}

// unobservedStatus is the status of the two-cluster mesh while cluster-b has
// no observation and its one Peer in cluster-a is kept.
func unobservedStatus(t *testing.T) *structpb.Struct {
	t.Helper()
	return fromYAML(t, `
status:
  clusterCount: 2
  peerCount: 2
  clusters:
  - {name: cluster-a, reachable: true, lastObserved: "2026-11-22T01:00:00Z", nodes: 1, segments: 1, peers: 1, skippedNodes: 0}
  - {name: cluster-b, reachable: false, nodes: 0, segments: 0, peers: 1, skippedNodes: 0}
`)
}

func unobservedConditions() []*fnv1.Condition {
	return []*fnv1.Condition{
		wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
		wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_UNKNOWN, "Observing", ptr("waiting for the first observation of cluster-b")),
		wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_TRUE, "Delivered", nil),
		wantCondition("Converged", fnv1.Status_STATUS_CONDITION_FALSE, "NodesPending", ptr("cluster cluster-b has not been observed yet")),
	}
}

func TestRunFunction(t *testing.T) {
	type want struct {
		rsp *fnv1.RunFunctionResponse
	}
	cases := map[string]struct {
		reason string
		req    func(t *testing.T) *fnv1.RunFunctionRequest
		want   func(t *testing.T) want
	}{
		"AsksForOtherMeshesFirst": {
			reason: "Until Crossplane resolves the other ClusterMeshes of the namespace, the function only asks for them and changes nothing.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "Objects", "10.2.0.0/16"), observedTwo(t, "True"), nil)
			},
			want: func(*testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{Meta: meta(), Requirements: requirements()}}
			},
		},
		"ComposesObjects": {
			reason: "A valid mesh composes one NodeInventory per member and one provider-kubernetes Object per Peer and target, marks them ready from their observed conditions, and reports status and conditions.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := observedTwo(t, "True")
				obs["peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3"] = &fnv1.Resource{Resource: fromYAML(t, `
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
status:
  conditions:
  - {type: Ready, status: "True", reason: Available}
  - {type: Synced, status: "True", reason: ReconcileSuccess}
`)}
				return request(xr(t, "Objects", "10.2.0.0/16"), obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         settleMeta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: status(t, true)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a":                            {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b":                            {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_TRUE},
							"peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3": {Resource: wantObject(t, peerOfB, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_TRUE},
							"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": {Resource: wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: []*fnv1.Condition{
						wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
						wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_TRUE, "AllClustersReachable", nil),
						wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_TRUE, "Delivered", nil),
						wantCondition("Converged", fnv1.Status_STATUS_CONDITION_TRUE, "Converged", nil),
					},
				}}
			},
		},
		"ComposesPeerSets": {
			reason: "With delivery PeerSet the Peers of each target are one PeerSet, selecting the mesh's own Peers.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.2.0.0/16"), observedTwo(t, "True"), noOtherMeshes)
			},
			want: func(t *testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         settleMeta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: status(t, true)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a": {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b": {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_TRUE},
							"peerset-cluster-a":   {Resource: peerSet(t, peerOfB, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-b":   {Resource: peerSet(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: []*fnv1.Condition{
						wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
						wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_TRUE, "AllClustersReachable", nil),
						wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_TRUE, "Delivered", nil),
						wantCondition("Converged", fnv1.Status_STATUS_CONDITION_TRUE, "Converged", nil),
					},
				}}
			},
		},
		"UnreachableClusterKeepsItsPeers": {
			reason: "A member whose inventory cannot sync still contributes its last known nodes; the mesh reports it unreachable and its inventory not ready.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "PeerSet", "10.2.0.0/16"), observedTwo(t, "False"), noOtherMeshes)
			},
			want: func(t *testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: status(t, false)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a": {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b": {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-a":   {Resource: peerSet(t, peerOfB, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-b":   {Resource: peerSet(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: []*fnv1.Condition{
						wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
						wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_FALSE, "ClustersUnreachable",
							ptr("cannot observe cluster-b (since 2026-11-22T01:05:00Z): cannot list nodes: connection refused; Peers already written are kept")),
						wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_TRUE, "Delivered", nil),
						wantCondition("Converged", fnv1.Status_STATUS_CONDITION_TRUE, "Converged", nil),
					},
				}}
			},
		},
		"OverlapFreezes": {
			reason: "Overlapping CIDRs freeze the mesh: every observed composed resource is desired as it is (identity and spec only), the observed status is kept, and NetworksOverlap names both fields.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := map[string]*fnv1.Resource{"peer-x": {Resource: fromYAML(t, `
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata: {name: mesh-1, namespace: network, uid: abc, resourceVersion: "7", labels: {crossplane.io/composite: mesh}}
spec: {forProvider: {manifest: {kind: Peer}}}
status:
  conditions: [{type: Ready, status: "True", reason: Available}]
`)}}
				x := xr(t, "Objects", "10.1.128.0/17")
				x.Fields["status"] = structpb.NewStructValue(fromYAML(t, `{peerCount: 9, conditions: [{type: Ready, status: "True"}]}`))
				return request(x, obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				msg := "spec.clusters[1].podCIDRs[0] 10.1.128.0/17 overlaps spec.clusters[0].podCIDRs[0] 10.1.0.0/16"
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: fromYAML(t, `{status: {peerCount: 9}}`)},
						Resources: map[string]*fnv1.Resource{"peer-x": {Ready: fnv1.Ready_READY_TRUE, Resource: fromYAML(t, `
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata: {name: mesh-1, namespace: network, labels: {crossplane.io/composite: mesh}}
spec: {forProvider: {manifest: {kind: Peer}}}
`)}},
					},
					Conditions: []*fnv1.Condition{wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_TRUE, "CIDROverlap", &msg)},
					Results: []*fnv1.Result{{
						Severity: fnv1.Severity_SEVERITY_WARNING, Reason: ptr("MeshFrozen"), Target: fnv1.Target_TARGET_COMPOSITE.Enum(),
						Message: "the mesh is frozen, no Peer is changed until this is fixed: " + msg,
					}},
				}}
			},
		},
		"KeepsComposedPeersOfUnobservedMember": {
			reason: "A member whose inventory has no observation (say it was composed anew) keeps its already composed Peers everywhere instead of losing them until it is observed again.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := observedTwo(t, "True")
				delete(obs, "inventory-cluster-b")
				obs["peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3"] = &fnv1.Resource{Resource: wantObject(t, peerOfB, "ClusterProviderConfig", "cluster-a")}
				obs["peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3"].Resource.GetFields()["metadata"].GetStructValue().Fields["name"] = structpb.NewStringValue("mesh-3f9a")
				obs["peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3"].Resource.Fields["status"] = structpb.NewStructValue(fromYAML(t, `{conditions: [{type: Ready, status: "True"}]}`))
				return request(xr(t, "Objects", "10.2.0.0/16"), obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				// Crossplane keeps the observed name of a composed resource.
				kept := wantObject(t, peerOfB, "ClusterProviderConfig", "cluster-a")
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         settleMeta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: unobservedStatus(t)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a":                            {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b":                            {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_FALSE},
							"peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3": {Resource: kept, Ready: fnv1.Ready_READY_TRUE},
							"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": {Resource: wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: unobservedConditions(),
				}}
			},
		},
		"KeepsPeerSetPeersOfUnobservedMember": {
			reason: "With delivery PeerSet the kept Peers of an unobserved member stay in the PeerSet of every other member.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := observedTwo(t, "True")
				delete(obs, "inventory-cluster-b")
				obs["peerset-cluster-a"] = &fnv1.Resource{Resource: peerSet(t, peerOfB, "ClusterProviderConfig", "cluster-a")}
				return request(xr(t, "PeerSet", "10.2.0.0/16"), obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         settleMeta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: unobservedStatus(t)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a": {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b": {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-a":   {Resource: peerSet(t, peerOfB, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-b":   {Resource: peerSet(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: unobservedConditions(),
				}}
			},
		},
		"FailingInventorySaysWhy": {
			reason: "A member whose inventory has never observed it, because it cannot (a wrong ProviderConfig, no permission), is reported unreachable with the inventory's reason, not as merely waiting.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := observedTwo(t, "True")
				obs["inventory-cluster-b"] = &fnv1.Resource{Resource: fromYAML(t, `
apiVersion: kube.kilomesh.io/v1alpha1
kind: NodeInventory
status:
  conditions:
  - {type: Synced, status: "False", reason: ReconcileError, lastTransitionTime: "2026-11-22T01:05:00Z",
     message: 'connect failed: cannot get ProviderConfig "network/cluster-b": not found'}
`)}
				return request(xr(t, "PeerSet", "10.2.0.0/16"), obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: fromYAML(t, `
status:
  clusterCount: 2
  peerCount: 1
  clusters:
  - {name: cluster-a, reachable: true, lastObserved: "2026-11-22T01:00:00Z", nodes: 1, segments: 1, peers: 1, skippedNodes: 0}
  - {name: cluster-b, reachable: false, unreachableSince: "2026-11-22T01:05:00Z", message: 'connect failed: cannot get ProviderConfig "network/cluster-b": not found', nodes: 0, segments: 0, peers: 0, skippedNodes: 0}
`)},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a": {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b": {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-a":   {Resource: emptyPeerSet(t, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_FALSE},
							"peerset-cluster-b":   {Resource: peerSet(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: []*fnv1.Condition{
						wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
						wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_FALSE, "ClustersUnreachable",
							ptr(`cannot observe cluster-b (since 2026-11-22T01:05:00Z): connect failed: cannot get ProviderConfig "network/cluster-b": not found; Peers already written are kept`)),
						wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_TRUE, "Delivered", nil),
						wantCondition("Converged", fnv1.Status_STATUS_CONDITION_FALSE, "NodesPending", ptr("cluster cluster-b has not been observed yet")),
					},
				}}
			},
		},
		"DeliveryFailureIsReported": {
			reason: "Peers that cannot be written into a member (here: no Peer CRD there) make PeersDelivered False, naming the member and the provider's reason, in the condition and the member's status.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				obs := observedTwo(t, "True")
				failing := wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b")
				failing.Fields["status"] = structpb.NewStructValue(fromYAML(t, `
conditions:
- {type: Synced, status: "False", reason: ReconcileError, message: "observe failed: no matches for kilo.squat.ai/v1alpha1, Kind=Peer"}
`))
				obs["peer-cluster-b-mesh-cluster-a-node-a1-713f87bb"] = &fnv1.Resource{Resource: failing}
				return request(xr(t, "Objects", "10.2.0.0/16"), obs, noOtherMeshes)
			},
			want: func(t *testing.T) want {
				st := status(t, true)
				st.GetFields()["status"].GetStructValue().GetFields()["clusters"].GetListValue().GetValues()[1].GetStructValue().Fields["message"] =
					structpb.NewStringValue("1 of 1 Peers cannot be written: observe failed: no matches for kilo.squat.ai/v1alpha1, Kind=Peer")
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requirements: requirements(),
					Desired: &fnv1.State{
						Composite: &fnv1.Resource{Resource: st},
						Resources: map[string]*fnv1.Resource{
							"inventory-cluster-a":                            {Resource: fromYAML(t, strings.Replace(inventoryA, "MEMBER-A", memberA, 1)), Ready: fnv1.Ready_READY_TRUE},
							"inventory-cluster-b":                            {Resource: fromYAML(t, strings.Replace(inventoryB, "MEMBER-B", memberB, 1)), Ready: fnv1.Ready_READY_TRUE},
							"peer-cluster-a-mesh-cluster-b-node-b1-2709b7b3": {Resource: wantObject(t, peerOfB, "ClusterProviderConfig", "cluster-a"), Ready: fnv1.Ready_READY_FALSE},
							"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": {Resource: wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b"), Ready: fnv1.Ready_READY_FALSE},
						},
					},
					Conditions: []*fnv1.Condition{
						wantCondition("NetworksOverlap", fnv1.Status_STATUS_CONDITION_FALSE, "NoOverlap", nil),
						wantCondition("ClustersReachable", fnv1.Status_STATUS_CONDITION_TRUE, "AllClustersReachable", nil),
						wantCondition("PeersDelivered", fnv1.Status_STATUS_CONDITION_FALSE, "DeliveryFailed",
							ptr("cluster-b: 1 of 1 Peers cannot be written: observe failed: no matches for kilo.squat.ai/v1alpha1, Kind=Peer")),
						wantCondition("Converged", fnv1.Status_STATUS_CONDITION_TRUE, "Converged", nil),
					},
				}}
			},
		},
		"MalformedFieldIsFatal": {
			reason: "A field of the wrong type is a fatal result that names the cluster entry it is in.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				x := xr(t, "Objects", "10.2.0.0/16")
				c := x.GetFields()["spec"].GetStructValue().GetFields()["clusters"].GetListValue().GetValues()[1].GetStructValue()
				c.Fields["wireguardPort"] = structpb.NewStringValue("51820")
				return request(x, nil, noOtherMeshes)
			},
			want: func(*testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:    meta(),
					Results: fatal(`cannot decode the ClusterMesh: spec.clusters[1]: Invalid value: "": json: cannot unmarshal string into Go struct field Cluster.wireguardPort of type int32`),
				}}
			},
		},
		"InvalidCIDRIsFatal": {
			reason: "A CIDR with host bits set is a fatal result naming its field path; nothing is composed or deleted.",
			req: func(t *testing.T) *fnv1.RunFunctionRequest {
				return request(xr(t, "Objects", "10.2.0.1/16"), observedTwo(t, "True"), noOtherMeshes)
			},
			want: func(*testing.T) want {
				return want{rsp: &fnv1.RunFunctionResponse{
					Meta:         meta(),
					Requirements: requirements(),
					Results:      fatal(`invalid ClusterMesh spec: spec.clusters[1].podCIDRs[0]: Invalid value: "10.2.0.1/16": must be a network in CIDR form with no host bits set: host bits are set`),
				}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			got, err := f.RunFunction(context.Background(), tc.req(t))
			if err != nil {
				t.Fatalf("%s\nRunFunction(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want(t).rsp, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// largeMesh is a request for a mesh of clusters x nodes, every node its own
// Peer in every other cluster.
func largeMesh(tb testing.TB, delivery string, clusters, nodes int) *fnv1.RunFunctionRequest {
	tb.Helper()
	var spec strings.Builder
	fmt.Fprintf(&spec, "apiVersion: kilomesh.io/v1alpha1\nkind: ClusterMesh\nmetadata: {name: mesh, namespace: network}\nspec:\n  delivery: %s\n  granularity: Node\n  clusters:\n", delivery)
	observed := map[string]*fnv1.Resource{}
	for c := range clusters {
		name := fmt.Sprintf("cluster-%02d", c)
		fmt.Fprintf(&spec, "  - {name: %s, providerConfigRef: {kind: ClusterProviderConfig, name: %s}, podCIDRs: [10.%d.0.0/16], wireguardCIDR: 10.%d.0.0/16, serviceCIDR: 10.%d.0.0/16, nodeCIDRs: [172.%d.0.0/16]}\n",
			name, name, c+1, 100+c, 200+c, 16+c)
		inv := mustYAML(tb, fmt.Sprintf("apiVersion: kube.kilomesh.io/v1alpha1\nkind: NodeInventory\nmetadata: {name: %s}\nstatus:\n  conditions: [{type: Ready, status: \"True\"}, {type: Synced, status: \"True\"}]\n  atProvider:\n    observedAt: \"2026-11-22T01:00:00Z\"\n", name))
		all := make([]nodefixture.Node, 0, nodes)
		for n := range nodes {
			var k [32]byte
			k[0], k[1], k[2], k[3] = byte(c), byte(n>>8), byte(n), 1
			host := fmt.Sprintf("%d.%d", n/250, n%250+1)
			all = append(all, inventoryNode(fmt.Sprintf("node-%04d", n), kilov1alpha1.EncodeKey(k),
				fmt.Sprintf("10.%d.%d.%d/28", c+1, n/16, (n%16)*16), fmt.Sprintf("10.%d.%s/16", 100+c, host), fmt.Sprintf("100.%d.%s", 64+c, host)).
				With(kilov1alpha1.AnnotationInternalIP, fmt.Sprintf("172.%d.%s/16", 16+c, host)))
		}
		get(inv, "status", "atProvider").GetStructValue().Fields["nodes"] = nodefixture.Structs(inventoryObservedAt, all...)
		observed[prefixInventory+name] = &fnv1.Resource{Resource: inv}
	}
	required := map[string]*fnv1.Resources{}
	for c := range clusters {
		required[fmt.Sprintf("member-cluster-%02d", c)] = &fnv1.Resources{}
	}
	return request(mustYAML(tb, spec.String()), observed, required)
}

func mustYAML(tb testing.TB, y string) *structpb.Struct {
	tb.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		tb.Fatalf("bad YAML: %v", err)
	}
	return resource.MustStructJSON(string(j))
}

func TestResponseLimit(t *testing.T) {
	cases := map[string]struct {
		reason          string
		delivery        string
		clusters, nodes int
		hints           []string
	}{
		"ObjectsPointToPeerSet": {
			reason:   "A mesh whose Objects would exceed the response limit fails with a fatal result that names delivery: PeerSet, and composes nothing.",
			delivery: "Objects",
			clusters: 5, nodes: 700,
			hints: []string{"set spec.delivery: PeerSet", "4 MiB"},
		},
		"PeerSetPointsToSplitting": {
			reason:   "A PeerSet mesh beyond the response limit, even with every segment written once (SegmentSets), is told to split or shrink.",
			delivery: "PeerSet",
			clusters: 10, nodes: 1000,
			hints: []string{"split the mesh", "4 MiB"},
		},
		"PeerSetOverEtcdLimit": {
			reason:   "A PeerSet that etcd could not store (1.5 MiB) fails before any write, naming the member and what to do: with two members no segment is shared, every Peer is the PeerSet's own.",
			delivery: "PeerSet",
			clusters: 2, nodes: 2500,
			hints: []string{"PeerSet of cluster cluster-00", "1.5 MiB", "Location granularity"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			got, err := f.RunFunction(context.Background(), largeMesh(t, tc.delivery, tc.clusters, tc.nodes))
			if err != nil {
				t.Fatalf("%s\nRunFunction(...): %v", tc.reason, err)
			}
			if len(got.GetResults()) != 1 || got.GetResults()[0].GetSeverity() != fnv1.Severity_SEVERITY_FATAL {
				t.Fatalf("%s\nRunFunction(...): want one fatal result, got %v", tc.reason, got.GetResults())
			}
			msg := got.GetResults()[0].GetMessage()
			for _, hint := range tc.hints {
				if !strings.Contains(msg, hint) {
					t.Errorf("%s\nRunFunction(...): fatal result %q does not say %q", tc.reason, msg, hint)
				}
			}
			if n := len(got.GetDesired().GetResources()); n != 0 {
				t.Errorf("%s\nRunFunction(...): want no desired resources, got %d", tc.reason, n)
			}
		})
	}
}

// TestSiblings pins which other meshes the function reads: only those that
// compose a NodeInventory of one of its members (they write Peers into the
// same cluster), by name, and never the mesh itself, so that the writes of
// unrelated meshes and its own status cause it no watch events.
func TestSiblings(t *testing.T) {
	inv := func(t *testing.T, meshName string) *fnv1.Resource {
		t.Helper()
		return &fnv1.Resource{Resource: fromYAML(t, `{apiVersion: kube.kilomesh.io/v1alpha1, kind: NodeInventory, metadata: {name: x, annotations: {kilomesh.io/mesh-name: `+meshName+`}}}`)}
	}
	dev := func(t *testing.T, podsOfC string, created ...string) *fnv1.Resource {
		t.Helper()
		ts := "2026-01-01T00:00:00Z"
		if len(created) > 0 {
			ts = created[0]
		}
		return &fnv1.Resource{Resource: fromYAML(t, `
apiVersion: kilomesh.io/v1alpha1
kind: ClusterMesh
metadata: {name: dev, namespace: network, creationTimestamp: "`+ts+`"}
spec:
  clusters:
  - {name: cluster-b, providerConfigRef: {kind: ClusterProviderConfig, name: cluster-b}, podCIDRs: [10.2.0.0/16], wireguardCIDR: 10.202.0.0/16}
  - {name: cluster-c, providerConfigRef: {name: cluster-c}, podCIDRs: [`+podsOfC+`], wireguardCIDR: 10.203.0.0/16}
`)}
	}
	type want struct {
		meshes  []string // mesh requirements
		desired bool     // whether the function went on to compose
		overlap bool
	}
	cases := map[string]struct {
		reason   string
		required func(t *testing.T) map[string]*fnv1.Resources
		want     want
	}{
		"NeverItself": {
			reason: "The mesh's own inventories name the mesh itself: it is not required.",
			required: func(t *testing.T) map[string]*fnv1.Resources {
				return map[string]*fnv1.Resources{
					"member-cluster-a": {Items: []*fnv1.Resource{inv(t, "mesh")}},
					"member-cluster-b": {Items: []*fnv1.Resource{inv(t, "mesh")}},
				}
			},
			want: want{desired: true},
		},
		"AsksForASiblingByName": {
			reason: "Another mesh's inventory of a shared member makes the function ask for that mesh by name before it composes anything.",
			required: func(t *testing.T) map[string]*fnv1.Resources {
				return map[string]*fnv1.Resources{
					"member-cluster-a": {Items: []*fnv1.Resource{inv(t, "mesh")}},
					"member-cluster-b": {Items: []*fnv1.Resource{inv(t, "mesh"), inv(t, "dev")}},
				}
			},
			want: want{meshes: []string{"dev"}},
		},
		"SharedHubIsNoOverlap": {
			reason: "A sibling that shares cluster-b as is, with disjoint other networks, lets the mesh compose.",
			required: func(t *testing.T) map[string]*fnv1.Resources {
				return map[string]*fnv1.Resources{
					"member-cluster-a": {},
					"member-cluster-b": {Items: []*fnv1.Resource{inv(t, "dev")}},
					"mesh-dev":         {Items: []*fnv1.Resource{dev(t, "10.3.0.0/16")}},
				}
			},
			want: want{meshes: []string{"dev"}, desired: true},
		},
		"SiblingOverlapFreezes": {
			reason: "A sibling whose other member overlaps cluster-a's pods (both are routed into cluster-b) freezes the mesh.",
			required: func(t *testing.T) map[string]*fnv1.Resources {
				return map[string]*fnv1.Resources{
					"member-cluster-a": {},
					"member-cluster-b": {Items: []*fnv1.Resource{inv(t, "dev")}},
					"mesh-dev":         {Items: []*fnv1.Resource{dev(t, "10.1.0.0/16")}},
				}
			},
			want: want{meshes: []string{"dev"}, desired: true, overlap: true},
		},
		"YoungerSiblingDoesNotFreezeThisMesh": {
			reason: "Of two overlapping meshes the younger freezes: a mesh created after this one cannot stop it.",
			required: func(t *testing.T) map[string]*fnv1.Resources {
				return map[string]*fnv1.Resources{
					"member-cluster-a": {},
					"member-cluster-b": {Items: []*fnv1.Resource{inv(t, "dev")}},
					"mesh-dev":         {Items: []*fnv1.Resource{dev(t, "10.1.0.0/16", "2026-12-01T00:00:00Z")}},
				}
			},
			want: want{meshes: []string{"dev"}, desired: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			x := xr(t, "PeerSet", "10.2.0.0/16")
			x.GetFields()["metadata"].GetStructValue().GetFields()["creationTimestamp"] = structpb.NewStringValue("2026-06-01T00:00:00Z")
			rsp, err := f.RunFunction(context.Background(), request(x, observedTwo(t, "True"), tc.required(t)))
			if err != nil {
				t.Fatal(err)
			}
			var got want
			for key, sel := range rsp.GetRequirements().GetResources() {
				if n, ok := strings.CutPrefix(key, "mesh-"); ok {
					got.meshes = append(got.meshes, n)
					if sel.GetMatchName() != n {
						t.Errorf("%s\nrequirement %s: want a match by name %q, got %v", tc.reason, key, n, sel)
					}
				}
			}
			got.desired = len(rsp.GetDesired().GetResources()) > 0
			for _, c := range rsp.GetConditions() {
				if c.GetType() == "NetworksOverlap" && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE {
					got.overlap = true
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
