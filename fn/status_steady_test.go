package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

func TestSteadyLastObserved(t *testing.T) {
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: tm}
	}
	cases := map[string]struct {
		reason   string
		reported string // the observed mesh's lastObserved, "" for none
		observed string
		want     string
		// other is another member: reported and observed at the same
		// times as each other unless set, and its lastObserved wanted.
		otherReported, otherObserved, otherWant string
	}{
		"FirstReport": {
			reason:   "A member the mesh's status does not know yet is reported as observed.",
			observed: "2026-11-22T01:00:00Z",
			want:     "2026-11-22T01:00:00Z",
		},
		"WithinAMinute": {
			reason:   "An observation less than a minute newer than the one reported leaves the status as it is: churn does not rewrite it at every change.",
			reported: "2026-11-22T01:00:00Z",
			observed: "2026-11-22T01:00:45Z",
			want:     "2026-11-22T01:00:00Z",
		},
		"AMinuteLater": {
			reason:   "An observation a minute or more newer is reported.",
			reported: "2026-11-22T01:00:00Z",
			observed: "2026-11-22T01:01:00Z",
			want:     "2026-11-22T01:01:00Z",
		},
		"TogetherOnceAMinute": {
			reason:        "When one member's observation is a minute newer, every member's is reported: the status moves once a minute, not once per member.",
			reported:      "2026-11-22T01:00:30Z",
			observed:      "2026-11-22T01:00:45Z",
			want:          "2026-11-22T01:00:45Z",
			otherReported: "2026-11-22T01:00:00Z",
			otherObserved: "2026-11-22T01:01:10Z",
			otherWant:     "2026-11-22T01:01:10Z",
		},
		"Older": {
			reason:   "An observation older than the one reported (the inventory composed anew) is reported as it is.",
			reported: "2026-11-22T01:00:00Z",
			observed: "2026-11-22T00:59:50Z",
			want:     "2026-11-22T00:59:50Z",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.otherReported == "" {
				tc.otherReported, tc.otherObserved, tc.otherWant = "2026-11-22T01:00:00Z", "2026-11-22T01:00:00Z", "2026-11-22T01:00:00Z"
			}
			xr := &structpb.Struct{Fields: map[string]*structpb.Value{}}
			clusters := []*structpb.Value{object(map[string]*structpb.Value{"name": str("cluster-b"), "lastObserved": str(tc.otherReported)})}
			if tc.reported != "" {
				clusters = append(clusters, object(map[string]*structpb.Value{"name": str("cluster-a"), "lastObserved": str(tc.reported)}))
			}
			xr.Fields["status"] = object(map[string]*structpb.Value{"clusters": structpb.NewListValue(&structpb.ListValue{Values: clusters})})
			plan := &mesh.Plan{Status: meshv1alpha1.ClusterMeshStatus{Clusters: []meshv1alpha1.ClusterStatus{
				{Name: "cluster-a", LastObserved: at(tc.observed)},
				{Name: "cluster-b", LastObserved: at(tc.otherObserved)},
			}}}
			steadyLastObserved(xr, plan)
			want := []time.Time{at(tc.want).UTC(), at(tc.otherWant).UTC()}
			got := []time.Time{plan.Status.Clusters[0].LastObserved.UTC(), plan.Status.Clusters[1].LastObserved.UTC()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nlastObserved of cluster-a and cluster-b: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
