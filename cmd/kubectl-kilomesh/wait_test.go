package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/plugin/view"
	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// TestStatusWait pins the exit codes of status --wait that scripts rely
// on: 0 once every mesh converged, 2 when the timeout comes first, 1 when
// waiting cannot help.
func TestStatusWait(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	converge := func(t *testing.T) {
		t.Helper()
		if err := meshfixture.Converge(ctx, apiClient, namespace, "mesh"); err != nil {
			t.Fatal(err)
		}
	}
	type want struct {
		code int
		// stderr holds these texts.
		stderr []string
	}
	cases := map[string]struct {
		reason string
		// prepare changes the loaded two-clusters scenario.
		prepare func(t *testing.T)
		// during runs between two reads of --wait; the first call
		// returns false to stop being called.
		during func(t *testing.T) bool
		args   []string
		want   want
	}{
		"Converged": {
			reason:  "A mesh whose providers applied every Peer and that Crossplane made Ready converged: exit 0 at the first read.",
			prepare: converge,
			args:    []string{"status", "mesh", "--wait", "--timeout=1m"},
			want:    want{code: exitOK},
		},
		"ConvergedWithoutName": {
			reason:  "Without a name, --wait waits for every mesh of the namespace.",
			prepare: converge,
			args:    []string{"status", "--wait", "--timeout=1m"},
			want:    want{code: exitOK},
		},
		"TimesOut": {
			reason: "A mesh whose PeerSets have not reported yet is not converged: exit 2 at the timeout, naming what is missing.",
			args:   []string{"status", "mesh", "--wait", "--timeout=0s"},
			want:   want{code: exitNotConverged, stderr: []string{"timed out", "its PeerSet has not been applied yet", "Ready is False"}},
		},
		"ConvergesWhileWaiting": {
			reason: "--wait reads again until the providers report every Peer applied, then exits 0.",
			during: func(t *testing.T) bool {
				converge(t)
				return false
			},
			args: []string{"status", "mesh", "--wait", "--timeout=1h", "--interval=1ms"},
			want: want{code: exitOK, stderr: []string{"waiting: mesh: Ready is False"}},
		},
		"PeerSetBehind": {
			reason: "A member whose PeerSet applied fewer Peers than it holds has not converged, whatever the conditions say.",
			prepare: func(t *testing.T) {
				converge(t)
				ps := composed(ctx, t, meshfixture.PeerSetGVK, "peerset-cluster-b")
				if err := unstructured.SetNestedField(ps.Object, int64(0), "status", "atProvider", "applied"); err != nil {
					t.Fatal(err)
				}
				if err := apiClient.Status().Update(ctx, ps); err != nil {
					t.Fatal(err)
				}
			},
			args: []string{"status", "mesh", "--wait", "--timeout=0s"},
			want: want{code: exitNotConverged, stderr: []string{"member cluster-b: 0 of 1 Peers applied"}},
		},
		"ConditionsOfAnOlderSpec": {
			reason: "Conditions set for an older generation of the spec do not count: a script that just applied a change waits for Crossplane to see it.",
			prepare: func(t *testing.T) {
				converge(t)
				xr := &unstructured.Unstructured{}
				xr.SetGroupVersionKind(meshfixture.ClusterMeshGVK)
				if err := apiClient.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "mesh"}, xr); err != nil {
					t.Fatal(err)
				}
				conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
				for _, c := range conds {
					c.(map[string]any)["observedGeneration"] = xr.GetGeneration()
				}
				if err := unstructured.SetNestedSlice(xr.Object, conds, "status", "conditions"); err != nil {
					t.Fatal(err)
				}
				if err := apiClient.Status().Update(ctx, xr); err != nil {
					t.Fatal(err)
				}
				patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"granularity":"Node"}}`))
				if err := apiClient.Patch(ctx, xr, patch); err != nil {
					t.Fatal(err)
				}
			},
			args: []string{"status", "mesh", "--wait", "--timeout=0s"},
			want: want{code: exitNotConverged, stderr: []string{"was set for generation 1 of the spec, which is at 2"}},
		},
		"MeshNotFound": {
			reason: "Waiting for a mesh that does not exist cannot help: exit 1 at once.",
			args:   []string{"status", "nope", "--wait", "--timeout=1h"},
			want:   want{code: exitError, stderr: []string{"ClusterMesh network/nope not found"}},
		},
		"NoMeshAtAll": {
			reason: "Waiting on a namespace without a mesh cannot help: exit 1 at once.",
			args:   []string{"status", "-n", "empty", "--wait", "--timeout=1h"},
			want:   want{code: exitError, stderr: []string{"namespace empty holds no ClusterMesh"}},
		},
		"UnknownFlag": {
			reason: "A mistyped flag is an error: exit 1.",
			args:   []string{"status", "mesh", "--wiat"},
			want:   want{code: exitError, stderr: []string{"unknown flag --wiat"}},
		},
		"NoWait": {
			reason: "Without --wait, status exits 0 whether or not the mesh converged.",
			args:   []string{"status", "mesh"},
			want:   want{code: exitOK},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			loadScenario(t, "two-clusters")
			if tc.prepare != nil {
				tc.prepare(t)
			}
			e := &env{}
			if tc.during != nil {
				more := true
				e.sleep = func(context.Context, time.Duration) error {
					if more {
						more = tc.during(t)
					}
					return nil
				}
			}
			got := plugin(t, e, tc.args...)
			if got.code != tc.want.code {
				t.Errorf("%s\nkubectl kilomesh %s: exit code %d, want %d; stderr:\n%s", tc.reason, strings.Join(tc.args, " "), got.code, tc.want.code, got.stderr)
			}
			for _, s := range tc.want.stderr {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("%s\nkubectl kilomesh %s: stderr does not say %q:\n%s", tc.reason, strings.Join(tc.args, " "), s, got.stderr)
				}
			}
		})
	}
}

// TestStatusJSON pins the fields of status -o json that scripts read, on a
// converged mesh.
func TestStatusJSON(t *testing.T) {
	needAPIServer(t)
	loadScenario(t, "two-clusters")
	if err := meshfixture.Converge(context.Background(), apiClient, namespace, "mesh"); err != nil {
		t.Fatal(err)
	}
	got := plugin(t, nil, "status", "mesh", "-o", "json")
	if got.code != exitOK {
		t.Fatalf("kubectl kilomesh status -o json: exit code %d: %s", got.code, got.stderr)
	}
	var out struct {
		Meshes []view.Status `json:"meshes"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatal(err)
	}
	type member struct {
		Name              string
		Reachable         bool
		Leaders           []string
		Desired, Applied  int
		PeersOut, Skipped int
	}
	var members []member
	for _, m := range out.Meshes[0].Members {
		members = append(members, member{Name: m.Name, Reachable: m.Reachable, Leaders: m.Leaders, Desired: *m.Desired, Applied: *m.Applied, PeersOut: m.PeersOut, Skipped: m.SkippedNodes})
	}
	want := []member{
		{Name: "cluster-a", Reachable: true, Leaders: []string{"node-a1"}, Desired: 1, Applied: 1, PeersOut: 1},
		{Name: "cluster-b", Reachable: true, Leaders: []string{"node-b1"}, Desired: 1, Applied: 1, PeersOut: 1},
	}
	if diff := cmp.Diff(want, members); diff != "" {
		t.Errorf("status -o json: members -want +got:\n%s", diff)
	}
	if !out.Meshes[0].Converged || len(out.Meshes[0].Waiting) > 0 {
		t.Errorf("status -o json: want a converged mesh, got converged=%t waiting=%v", out.Meshes[0].Converged, out.Meshes[0].Waiting)
	}
}
