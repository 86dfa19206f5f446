package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

func TestDeliveryProblems(t *testing.T) {
	object := func(t *testing.T, target, synced string) *fnv1.Resource {
		t.Helper()
		o := wantObject(t, peerOfA, "ProviderConfig", target)
		o.Fields["status"] = structpb.NewStructValue(fromYAML(t, `{conditions: [{type: Synced, status: "`+synced+`", message: "cannot apply: forbidden"}]}`))
		return &fnv1.Resource{Resource: o}
	}
	set := func(t *testing.T, conditions string) *fnv1.Resource {
		t.Helper()
		return &fnv1.Resource{Resource: fromYAML(t, `{apiVersion: kube.kilomesh.io/v1alpha1, kind: PeerSet, status: {conditions: `+conditions+`}}`)}
	}
	cases := map[string]struct {
		reason    string
		delivery  string
		resources func(t *testing.T) map[string]*fnv1.Resource
		want      map[string]string
	}{
		"ObjectsCountedPerMember": {
			reason:   "Failing Objects are counted per member they write into, quoting the first failure by name.",
			delivery: "Objects",
			resources: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{
					"peer-cluster-b-x": object(t, "cluster-b", "False"),
					"peer-cluster-b-y": object(t, "cluster-b", "True"),
					"peer-cluster-a-x": object(t, "cluster-a", "True"),
				}
			},
			want: map[string]string{"cluster-b": "1 of 2 Peers cannot be written: cannot apply: forbidden"},
		},
		"RemovedMemberIgnored": {
			reason:   "Objects of a member no longer in the spec are being deleted: their errors are not the mesh's.",
			delivery: "Objects",
			resources: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-gone-x": object(t, "gone", "False")}
			},
			want: map[string]string{},
		},
		"PeerSetNotSynced": {
			reason:   "A PeerSet that cannot sync quotes its reason.",
			delivery: "PeerSet",
			resources: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-a": set(t, `[{type: Synced, status: "False", message: "kilo.squat.ai Peer CRD not installed in this cluster"}]`)}
			},
			want: map[string]string{"cluster-a": "kilo.squat.ai Peer CRD not installed in this cluster"},
		},
		"PeerSetNotReady": {
			reason:   "A PeerSet that syncs but could not apply some Peers (a foreign Peer in the way) quotes its Ready message.",
			delivery: "PeerSet",
			resources: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-a": set(t, `[{type: Synced, status: "True"}, {type: Ready, status: "False", reason: PeerProblems, message: "1 Peer not applied"}]`)}
			},
			want: map[string]string{"cluster-a": "1 Peer not applied"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x, err := decodeMesh(xr(t, tc.delivery, "10.2.0.0/16"))
			if err != nil {
				t.Fatal(err)
			}
			got := deliveryProblems(x, &observed{resources: tc.resources(t)})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ndeliveryProblems(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWriteStatusUnreachableAndUndelivered checks that a member that can be
// neither observed nor written into keeps the two apart: ClustersReachable
// quotes only why it cannot be observed, PeersDelivered only why its Peers
// cannot be written, and its status message says both.
func TestWriteStatusUnreachableAndUndelivered(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 22, 1, 5, 0, 0, time.UTC))
	plan := &mesh.Plan{Status: meshv1alpha1.ClusterMeshStatus{Clusters: []meshv1alpha1.ClusterStatus{
		{Name: "cluster-a", Reachable: true, LastObserved: &since},
		{Name: "cluster-b", LastObserved: &since, UnreachableSince: &since, Message: "cannot list nodes: connection refused"},
	}}}
	rsp := &fnv1.RunFunctionResponse{Desired: &fnv1.State{Composite: &fnv1.Resource{Resource: &structpb.Struct{Fields: map[string]*structpb.Value{}}}}}
	if err := writeStatus(rsp, plan, map[string]string{"cluster-b": "1 of 1 Peers cannot be written: forbidden"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rsp.GetConditions() {
		got[c.GetType()] = c.GetMessage()
	}
	want := map[string]string{
		"NetworksOverlap":   "",
		"ClustersReachable": "cannot observe cluster-b (since 2026-11-22T01:05:00Z): cannot list nodes: connection refused; Peers already written are kept",
		"PeersDelivered":    "cluster-b: 1 of 1 Peers cannot be written: forbidden",
		"Converged":         "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("condition messages: -want +got:\n%s", diff)
	}
	msg := rsp.GetDesired().GetComposite().GetResource().GetFields()["status"].GetStructValue().GetFields()["clusters"].GetListValue().GetValues()[1].GetStructValue().GetFields()["message"].GetStringValue()
	if want := "cannot list nodes: connection refused; 1 of 1 Peers cannot be written: forbidden"; msg != want {
		t.Errorf("status.clusters[1].message: want %q, got %q", want, msg)
	}
}

// TestKeyIncumbentFromComposedResources runs the function on a mesh where
// node-b1 copies the key of node-a1, whose Peer is already composed into
// cluster-b: whichever delivery composed it, a1 keeps its Peer and b1 is
// skipped, so the copy displaces nobody.
func TestKeyIncumbentFromComposedResources(t *testing.T) {
	cases := map[string]struct {
		reason   string
		delivery string
		composed func(t *testing.T) map[string]*fnv1.Resource
	}{
		"Objects": {
			reason:   "The Object of a1's Peer in cluster-b makes a1 the incumbent of its key.",
			delivery: "Objects",
			composed: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": {Resource: wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b")}}
			},
		},
		"PeerSet": {
			reason:   "The PeerSet item of a1's Peer in cluster-b makes a1 the incumbent of its key.",
			delivery: "PeerSet",
			composed: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-b": {Resource: peerSet(t, peerOfA, "ClusterProviderConfig", "cluster-b")}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed := tc.composed(t)
			observed["inventory-cluster-a"] = inventory(t, "cluster-a", "True", "node-a1", keyA1, "10.1.1.0/24", "10.201.0.1/16", "203.0.113.11")
			observed["inventory-cluster-b"] = inventory(t, "cluster-b", "True", "node-b1", keyA1, "10.2.1.0/24", "10.202.0.1/16", "198.51.100.21")
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			rsp, err := f.RunFunction(context.Background(), request(xr(t, tc.delivery, "10.2.0.0/16"), observed, noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			x, _ := decodeMesh(xr(t, tc.delivery, "10.2.0.0/16"))
			o, err := readObserved(&fnv1.RunFunctionRequest{Observed: &fnv1.State{Resources: rsp.GetDesired().GetResources()}}, x)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range o.composed {
				got = append(got, p.target+"/"+p.name)
			}
			if diff := cmp.Diff([]string{"cluster-b/mesh-cluster-a-node-a1-713f87bb"}, got); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want composed Peers, +got:\n%s", tc.reason, diff)
			}
			var reasons []string
			for _, r := range rsp.GetResults() {
				reasons = append(reasons, r.GetReason())
			}
			if diff := cmp.Diff([]string{"NodeKeyDuplicate"}, reasons); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want result reasons, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHandOver pins how a mesh changes delivery without deleting a Peer:
// the resources of the delivery it no longer uses are kept observe-only
// until observed so, then dropped, so that Crossplane deletes them and
// leaves their Peers to the new delivery.
func TestHandOver(t *testing.T) {
	object := func(t *testing.T, target string, policies ...string) *fnv1.Resource {
		t.Helper()
		o := wantObject(t, peerOfA, "ProviderConfig", target)
		if len(policies) > 0 {
			o.GetFields()["spec"].GetStructValue().Fields["managementPolicies"] = stringList(policies)
		}
		return &fnv1.Resource{Resource: o}
	}
	set := func(t *testing.T, policies ...string) *fnv1.Resource {
		t.Helper()
		s := peerSet(t, peerOfB, "ClusterProviderConfig", "cluster-a")
		if len(policies) > 0 {
			s.GetFields()["spec"].GetStructValue().Fields["managementPolicies"] = stringList(policies)
		}
		return &fnv1.Resource{Resource: s}
	}
	type want struct {
		kept    map[string][]string // resource name: its desired managementPolicies
		dropped []string
	}
	cases := map[string]struct {
		reason   string
		delivery string
		old      func(t *testing.T) map[string]*fnv1.Resource
		want     want
	}{
		"ObjectsToPeerSet": {
			reason:   "A mesh moved to PeerSet keeps its Objects, observe-only, so that deleting them later leaves their Peers.",
			delivery: "PeerSet",
			old: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-cluster-b-x": object(t, "cluster-b")}
			},
			want: want{kept: map[string][]string{"peer-cluster-b-x": {"Observe"}}},
		},
		"ObserveOnlyObjectsDropped": {
			reason:   "Once observed observe-only, the Objects are dropped: Crossplane deletes them and their Peers stay with the PeerSet.",
			delivery: "PeerSet",
			old: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-cluster-b-x": object(t, "cluster-b", "Observe")}
			},
			want: want{dropped: []string{"peer-cluster-b-x"}},
		},
		"PeerSetToObjects": {
			reason:   "A mesh moved to Objects keeps its PeerSets observe-only first: a PeerSet being deleted deletes every Peer it owns otherwise.",
			delivery: "Objects",
			old: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-a": set(t)}
			},
			want: want{kept: map[string][]string{"peerset-cluster-a": {"Observe"}}},
		},
		"ObserveOnlyPeerSetDropped": {
			reason:   "An observe-only PeerSet of the old delivery is dropped.",
			delivery: "Objects",
			old: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-a": set(t, "Observe")}
			},
			want: want{dropped: []string{"peerset-cluster-a"}},
		},
		"RemovedMemberNotKept": {
			reason:   "Resources of a member that left the mesh are not kept: its Peers go with it.",
			delivery: "PeerSet",
			old: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-gone-x": object(t, "gone")}
			},
			want: want{dropped: []string{"peer-gone-x"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed := observedTwo(t, "True")
			for k, v := range tc.old(t) {
				observed[k] = v
			}
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			rsp, err := f.RunFunction(context.Background(), request(xr(t, tc.delivery, "10.2.0.0/16"), observed, noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			desired := rsp.GetDesired().GetResources()
			got := want{kept: map[string][]string{}}
			for k := range tc.old(t) {
				r, ok := desired[k]
				if !ok {
					got.dropped = append(got.dropped, k)
					continue
				}
				var policies []string
				for _, v := range get(r.GetResource(), "spec", "managementPolicies").GetListValue().GetValues() {
					policies = append(policies, v.GetStringValue())
				}
				got.kept[k] = policies
			}
			if len(tc.want.kept) == 0 {
				tc.want.kept = map[string][]string{}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestObjectOfConflictingPeerOrphaned pins that an Object whose Peer is now
// held, by name, by a Peer the mesh does not own is made observe-only
// before it is dropped: provider-kubernetes deletes the Peer of a deleted
// Object, and that Peer is no longer the mesh's.
func TestObjectOfConflictingPeerOrphaned(t *testing.T) {
	const name = "peer-cluster-b-mesh-cluster-a-node-a1-713f87bb"
	foreign := func(t *testing.T, observed map[string]*fnv1.Resource) {
		t.Helper()
		inv := observed["inventory-cluster-b"].GetResource()
		get(inv, "status", "atProvider").GetStructValue().Fields["foreignPeers"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
			structpb.NewStructValue(fromYAML(t, `{name: mesh-cluster-a-node-a1-713f87bb, publicKey: `+keyA1+`}`)),
		}})
	}
	cases := map[string]struct {
		reason string
		policy []string
		want   []string // desired managementPolicies; nil: dropped
	}{
		"KeptObserveOnly": {
			reason: "The Object is kept, observe-only, while its Peer belongs to someone else.",
			want:   []string{"Observe"},
		},
		"DroppedOnceObserveOnly": {
			reason: "Once observed observe-only, the Object is dropped: its deletion leaves the Peer alone.",
			policy: []string{"Observe"},
		},
	}
	for name2, tc := range cases {
		t.Run(name2, func(t *testing.T) {
			observed := observedTwo(t, "True")
			foreign(t, observed)
			o := wantObject(t, peerOfA, "ClusterProviderConfig", "cluster-b")
			if tc.policy != nil {
				o.GetFields()["spec"].GetStructValue().Fields["managementPolicies"] = stringList(tc.policy)
			}
			observed[name] = &fnv1.Resource{Resource: o}
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			rsp, err := f.RunFunction(context.Background(), request(xr(t, "Objects", "10.2.0.0/16"), observed, noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if r, ok := rsp.GetDesired().GetResources()[name]; ok {
				got = []string{}
				for _, v := range get(r.GetResource(), "spec", "managementPolicies").GetListValue().GetValues() {
					got = append(got, v.GetStringValue())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want managementPolicies of the Object, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRefusedCredentialsReceiveNothing pins that a member whose credentials
// provider-kilomesh refused is handed to no provider: its delivery resources
// stay exactly as observed (none created, changed or deleted), whichever
// delivery, and the mesh says why.
func TestRefusedCredentialsReceiveNothing(t *testing.T) {
	refused := func(t *testing.T) *fnv1.Resource {
		t.Helper()
		r := inventory(t, "cluster-b", "False", "node-b1", keyB1, "10.2.1.0/24", "10.202.0.1/16", "198.51.100.21")
		conds := r.GetResource().GetFields()["status"].GetStructValue().GetFields()["conditions"].GetListValue()
		c, err := structpb.NewStruct(map[string]any{"type": "CredentialsAccepted", "status": "False", "reason": "CredentialsRefused",
			"message": `ClusterProviderConfig "cluster-b": user "u" refers to the file /var/run/secrets/token; only inline data is accepted`})
		if err != nil {
			t.Fatal(err)
		}
		conds.Values = append(conds.Values, structpb.NewStructValue(c))
		return r
	}
	stalePeerOfA := strings.Replace(peerOfA, "10.201.0.1/32]", "10.201.0.1/32, 10.1.2.0/24]", 1)
	cases := map[string]struct {
		reason   string
		delivery string
		observed func(t *testing.T) map[string]*fnv1.Resource
		// want is what the desired state holds for cluster-b: nothing, or
		// the observed resource unchanged.
		want map[string]*structpb.Struct
	}{
		"ObjectsNoneCreated": {
			reason:   "No Object is composed for a refused member: provider-kubernetes would use the credentials provider-kilomesh refused.",
			delivery: "Objects",
			observed: func(*testing.T) map[string]*fnv1.Resource { return map[string]*fnv1.Resource{} },
			want:     map[string]*structpb.Struct{},
		},
		"ObjectsKeptAsObserved": {
			reason:   "An Object composed before the refusal is kept exactly as observed: neither changed nor deleted through those credentials.",
			delivery: "Objects",
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": {Resource: wantObject(t, stalePeerOfA, "ClusterProviderConfig", "cluster-b")}}
			},
			want: map[string]*structpb.Struct{"peer-cluster-b-mesh-cluster-a-node-a1-713f87bb": intent(wantObject(t, stalePeerOfA, "ClusterProviderConfig", "cluster-b"))},
		},
		"PeerSetKeptAsObserved": {
			reason:   "The member's PeerSet is kept exactly as observed.",
			delivery: "PeerSet",
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				return map[string]*fnv1.Resource{"peerset-cluster-b": {Resource: peerSet(t, stalePeerOfA, "ClusterProviderConfig", "cluster-b")}}
			},
			want: map[string]*structpb.Struct{"peerset-cluster-b": intent(peerSet(t, stalePeerOfA, "ClusterProviderConfig", "cluster-b"))},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			observed := tc.observed(t)
			observed["inventory-cluster-a"] = inventory(t, "cluster-a", "True", "node-a1", keyA1, "10.1.1.0/24", "10.201.0.1/16", "203.0.113.11")
			observed["inventory-cluster-b"] = refused(t)
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			rsp, err := f.RunFunction(context.Background(), request(xr(t, tc.delivery, "10.2.0.0/16"), observed, noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*structpb.Struct{}
			for name, r := range rsp.GetDesired().GetResources() {
				for _, d := range deliverers {
					if target, ok := d.target(name, r.GetResource()); ok && target == "cluster-b" {
						got[name] = r.GetResource()
					}
				}
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nRunFunction(...): -want desired resources of cluster-b, +got:\n%s", tc.reason, diff)
			}
			var delivered *fnv1.Condition
			for _, c := range rsp.GetConditions() {
				if c.GetType() == "PeersDelivered" {
					delivered = c
				}
			}
			if delivered == nil || delivered.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE ||
				!strings.Contains(delivered.GetMessage(), "cluster-b: nothing is written into it while provider-kilomesh refuses its credentials") {
				t.Errorf("%s\nRunFunction(...): want PeersDelivered=False naming cluster-b's refused credentials, got %v", tc.reason, delivered)
			}
		})
	}
}
