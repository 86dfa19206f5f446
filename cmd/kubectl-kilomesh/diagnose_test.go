package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
	"github.com/kilomesh/kilomesh/internal/plugin/view"
	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// Messages as provider-kilomesh writes them in a Synced condition: its
// errors wrapped by crossplane-runtime's managed reconciler.
const (
	// msgGrantMissing: provider-kilomesh may not read provider-kubernetes'
	// ProviderConfigs (the control-plane grant of docs/install.md is not
	// applied).
	msgGrantMissing = `connect failed: cannot get ProviderConfig "network/cluster-b": providerconfigs.kubernetes.m.crossplane.io "cluster-b" is forbidden: ` +
		`User "system:serviceaccount:crossplane-system:provider-kilomesh" cannot get resource "providerconfigs" in API group "kubernetes.m.crossplane.io" in the namespace "network"`
	// msgMemberForbidden: the member's ServiceAccount lacks
	// examples/member-rbac.yaml.
	msgMemberForbidden = `observe failed: cannot observe the Nodes of the cluster: nodes is forbidden: ` +
		`User "system:serviceaccount:kube-system:kilomesh" cannot list resource "nodes" in API group "" at the cluster scope`
	// msgNoPeerCRD: the member has no Kilo.
	msgNoPeerCRD = "observe failed: cannot observe the Peers of the cluster: kilo.squat.ai Peer CRD not installed in this cluster"
	// msgPeersForbidden: the member's ServiceAccount may read but not write
	// Peers.
	msgPeersForbidden = `create failed: cannot apply 1 of 1 Peers: cannot apply Peer "mesh-cluster-a-node-a1-713f87bb": peers.kilo.squat.ai "mesh-cluster-a-node-a1-713f87bb" is forbidden: ` +
		`User "system:serviceaccount:kube-system:kilomesh" cannot patch resource "peers" in API group "kilo.squat.ai" at the cluster scope`
	// msgRevoked: the member refuses the token.
	msgRevoked = `observe failed: cannot observe the Nodes of the cluster: the cluster does not accept the credentials of ProviderConfig "network/cluster-b" (revoked or expired?): Unauthorized`
)

// TestDiagnose pins what diagnose finds in a mesh whose providers report
// the failures operators meet, and the fix it gives for each.
func TestDiagnose(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	type finding struct {
		Severity, Check, Member string
		// Fix holds this text.
		Fix string
	}
	converge := func(t *testing.T) {
		t.Helper()
		if err := meshfixture.Converge(ctx, apiClient, namespace, "mesh"); err != nil {
			t.Fatal(err)
		}
	}
	synced := func(resource, status, msg string) func(t *testing.T) {
		return func(t *testing.T) {
			t.Helper()
			setCondition(t, resource, "Synced", status, "ReconcileError", msg)
		}
	}
	cases := map[string]struct {
		reason  string
		prepare func(t *testing.T)
		want    []finding
		code    int
	}{
		"Converged": {
			reason:  "A converged mesh has nothing to report.",
			prepare: func(t *testing.T) { converge(t) },
			code:    exitOK,
		},
		"ControlPlaneGrantMissing": {
			reason:  "An inventory that may not read provider-kubernetes' ProviderConfigs points to the administrator's grant, not to the member.",
			prepare: synced("inventory-cluster-b", "False", msgGrantMissing),
			want:    []finding{{"error", "members", "cluster-b", "examples/provider/control-plane-rbac.yaml"}},
			code:    exitNotConverged,
		},
		"MemberRBACMissing": {
			reason:  "An inventory whose member forbids listing Nodes points to the member's RBAC.",
			prepare: synced("inventory-cluster-b", "False", msgMemberForbidden),
			want:    []finding{{"error", "members", "cluster-b", "in cluster-b, apply examples/member-rbac.yaml again"}},
			code:    exitNotConverged,
		},
		"CredentialsRevoked": {
			reason:  "A member that refuses the token asks for a fresh one.",
			prepare: synced("inventory-cluster-b", "False", msgRevoked),
			want:    []finding{{"error", "members", "cluster-b", "rebuild the kubeconfig Secret"}},
			code:    exitNotConverged,
		},
		"NoPeerCRD": {
			reason:  "A PeerSet whose member has no Kilo asks for Kilo's CRD.",
			prepare: synced("peerset-cluster-a", "False", msgNoPeerCRD),
			want:    []finding{{"error", "delivery", "cluster-a", "install Kilo in cluster-a"}},
			code:    exitNotConverged,
		},
		"PeersForbidden": {
			reason:  "A PeerSet whose member forbids writing Peers points to the member's RBAC for peers.",
			prepare: synced("peerset-cluster-a", "False", msgPeersForbidden),
			want:    []finding{{"error", "delivery", "cluster-a", "peers.kilo.squat.ai get/list/watch/create/update/patch/delete"}},
			code:    exitNotConverged,
		},
		"ProviderClockAhead": {
			reason: "An observation stamped two minutes after the management cluster's clock is a skew that makes fresh heartbeats look stale.",
			prepare: func(t *testing.T) {
				converge(t)
				inv := composed(ctx, t, meshfixture.NodeInventoryGVK, "inventory-cluster-a")
				ahead := now.Add(2 * time.Minute).Format(time.RFC3339)
				if err := unstructured.SetNestedField(inv.Object, ahead, "status", "atProvider", "observedAt"); err != nil {
					t.Fatal(err)
				}
				if err := apiClient.Status().Update(ctx, inv); err != nil {
					t.Fatal(err)
				}
			},
			want: []finding{{"error", "clocks", "", "synchronise the clocks"}},
			code: exitNotConverged,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			loadScenario(t, "two-clusters")
			tc.prepare(t)
			got := plugin(t, nil, "diagnose", "mesh", "-o", "json")
			if got.code != tc.code {
				t.Errorf("%s\nkubectl kilomesh diagnose: exit code %d, want %d; stderr: %s", tc.reason, got.code, tc.code, got.stderr)
			}
			var out struct {
				Meshes []view.Diagnosis `json:"meshes"`
			}
			if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
				t.Fatalf("%s\nkubectl kilomesh diagnose -o json: %v\n%s", tc.reason, err, got.stdout)
			}
			var findings []finding
			for _, f := range out.Meshes[0].Findings {
				if f.Severity == view.SeverityInfo {
					continue
				}
				fix := ""
				for _, w := range tc.want {
					if strings.Contains(f.Fix, w.Fix) {
						fix = w.Fix
					}
				}
				findings = append(findings, finding{f.Severity, f.Check, f.Member, fix})
			}
			if diff := cmp.Diff(tc.want, findings); diff != "" {
				t.Errorf("%s\nkubectl kilomesh diagnose: findings -want +got:\n%s\n%s", tc.reason, diff, got.stdout)
			}
		})
	}
}

// composed reads a resource the mesh composed, by its kind and
// composition resource name.
func composed(ctx context.Context, t *testing.T, gvk schema.GroupVersionKind, resource string) *unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := apiClient.List(ctx, l, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if l.Items[i].GetAnnotations()[snapshot.AnnotationCompositionResourceName] == resource {
			return &l.Items[i]
		}
	}
	t.Fatalf("no %s %s", gvk.Kind, resource)
	return nil
}

// setCondition sets a condition of a composed resource, as its provider
// would.
func setCondition(t *testing.T, resource, typ, status, reason, msg string) {
	t.Helper()
	gvk := meshfixture.NodeInventoryGVK
	if strings.HasPrefix(resource, snapshot.PrefixPeerSet) {
		gvk = meshfixture.PeerSetGVK
	}
	o := composed(context.Background(), t, gvk, resource)
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	out := []any{meshfixture.Condition(typ, status, reason, msg)}
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] != typ {
			out = append(out, x)
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, out, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := apiClient.Status().Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}
