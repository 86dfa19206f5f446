package main

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// A new mesh delivers its first Peers once every member has reported, or
// holdFirst after its creation, whichever comes first; a mesh that has
// delivered before, or a dry run, never waits.
func TestHoldFirstDelivery(t *testing.T) {
	created := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	// unreported is cluster-b's NodeInventory before its first report.
	unreported := func(t *testing.T) *fnv1.Resource {
		t.Helper()
		return &fnv1.Resource{Resource: fromYAML(t, `
apiVersion: kube.kilomesh.io/v1alpha1
kind: NodeInventory
metadata: {name: mesh-cluster-b, namespace: network}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: cluster-b}
  forProvider: {}
`)}
	}
	cases := map[string]struct {
		age      time.Duration
		dryRun   bool
		observed func(t *testing.T) map[string]*fnv1.Resource
		want     []string
		wantTTL  time.Duration
	}{
		"NewMeshWaitsForAnUnreportedMember": {
			age: 3 * time.Second,
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				o := observedTwo(t, "True")
				o["inventory-cluster-b"] = unreported(t)
				return o
			},
			want:    []string{"inventory-cluster-a", "inventory-cluster-b"},
			wantTTL: 7 * time.Second,
		},
		"AClockBehindTheAPIServerWaitsNoLongerThanTheHold": {
			age: -time.Minute,
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				o := observedTwo(t, "True")
				o["inventory-cluster-b"] = unreported(t)
				return o
			},
			want:    []string{"inventory-cluster-a", "inventory-cluster-b"},
			wantTTL: holdFirst,
		},
		"NewMeshDeliversOnceEveryMemberReported": {
			age:      3 * time.Second,
			observed: func(t *testing.T) map[string]*fnv1.Resource { return observedTwo(t, "True") },
			want:     []string{"inventory-cluster-a", "inventory-cluster-b", "peerset-cluster-a", "peerset-cluster-b"},
		},
		"AFailedMemberHasReported": {
			age:      3 * time.Second,
			observed: func(t *testing.T) map[string]*fnv1.Resource { return observedTwo(t, "False") },
			want:     []string{"inventory-cluster-a", "inventory-cluster-b", "peerset-cluster-a", "peerset-cluster-b"},
		},
		"AHungMemberDelaysTheFirstDeliveryNoLongerThanTheHold": {
			age: holdFirst,
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				o := observedTwo(t, "True")
				o["inventory-cluster-b"] = unreported(t)
				return o
			},
			want: []string{"inventory-cluster-a", "inventory-cluster-b", "peerset-cluster-a", "peerset-cluster-b"},
		},
		"AMeshThatDeliveredNeverWaits": {
			age: time.Second,
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				o := observedTwo(t, "True")
				o["inventory-cluster-b"] = unreported(t)
				o["peerset-cluster-a"] = &fnv1.Resource{Resource: emptyPeerSet(t, "ClusterProviderConfig", "cluster-a")}
				return o
			},
			want: []string{"inventory-cluster-a", "inventory-cluster-b", "peerset-cluster-a", "peerset-cluster-b"},
		},
		"ADryRunNeverWaits": {
			age:    time.Second,
			dryRun: true,
			observed: func(t *testing.T) map[string]*fnv1.Resource {
				o := observedTwo(t, "True")
				o["inventory-cluster-b"] = unreported(t)
				return o
			},
			want: []string{"inventory-cluster-a", "inventory-cluster-b", "peerset-cluster-a", "peerset-cluster-b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := xr(t, "PeerSet", "10.2.0.0/16")
			if !tc.dryRun {
				x.GetFields()["metadata"].GetStructValue().GetFields()["creationTimestamp"] = structpb.NewStringValue(created.Format(time.RFC3339))
			}
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, now: func() time.Time { return created.Add(tc.age) }}
			rsp, err := f.RunFunction(context.Background(), request(x, tc.observed(t), noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rsp.GetResults() {
				if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
					t.Fatalf("fatal result: %s", r.GetMessage())
				}
			}
			var got []string
			for name := range rsp.GetDesired().GetResources() {
				got = append(got, name)
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desired resources: -want +got:\n%s", diff)
			}
			if tc.wantTTL > 0 {
				if got := rsp.GetMeta().GetTtl().AsDuration(); got != tc.wantTTL {
					t.Errorf("TTL %s, want %s", got, tc.wantTTL)
				}
			}
			if tc.wantTTL > 0 {
				found := false
				for _, c := range rsp.GetConditions() {
					if c.GetType() == "ClustersReachable" && c.GetStatus() == fnv1.Status_STATUS_CONDITION_UNKNOWN {
						found = true
					}
				}
				if !found {
					t.Error("a mesh waiting for a member should say so in ClustersReachable=Unknown")
				}
			}
		})
	}
}
