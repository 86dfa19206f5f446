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
		"Older": {
			reason:   "An observation older than the one reported (the inventory composed anew) is reported as it is.",
			reported: "2026-11-22T01:00:00Z",
			observed: "2026-11-22T00:59:50Z",
			want:     "2026-11-22T00:59:50Z",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xr := &structpb.Struct{Fields: map[string]*structpb.Value{}}
			if tc.reported != "" {
				xr.Fields["status"] = object(map[string]*structpb.Value{"clusters": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
					object(map[string]*structpb.Value{"name": str("cluster-a"), "lastObserved": str(tc.reported)}),
				}})})
			}
			plan := &mesh.Plan{Status: meshv1alpha1.ClusterMeshStatus{Clusters: []meshv1alpha1.ClusterStatus{{Name: "cluster-a", LastObserved: at(tc.observed)}}}}
			steadyLastObserved(xr, plan)
			if diff := cmp.Diff(at(tc.want).UTC(), plan.Status.Clusters[0].LastObserved.UTC()); diff != "" {
				t.Errorf("%s\nlastObserved: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
