//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
)

// How long a mesh may take to converge. With Crossplane's defaults an XR
// whose watch circuit breaker is open is reconciled by half-open probes
// (every 30 s) and by the function's response TTL (60 s).
var convergeTimeout = envDuration("E2E_CONVERGE", 180*time.Second)

// A meshRef names one ClusterMesh of a test.
type meshRef struct {
	ns, name string
}

func (m meshRef) String() string { return m.ns + "/" + m.name }

// exampleMesh reads examples/mesh.yaml, in namespace ns with delivery mode.
func exampleMesh(t *testing.T, ns, mode string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(top, "examples", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	if err := unstructured.SetNestedField(u.Object, mode, "spec", "delivery"); err != nil {
		t.Fatal(err)
	}
	clusterConfigs(u, mode)
	return u
}

// clusterConfigs names, in a mesh with delivery: Objects, the
// ClusterProviderConfig that providerConfigs makes for each member in place
// of its namespaced ProviderConfig (<namespace>-<name>): Objects delivery
// takes no other, since provider-kubernetes does not check what a tenant's
// ProviderConfig asks of it.
func clusterConfigs(u *unstructured.Unstructured, mode string) {
	if mode != string(meshv1alpha1.DeliveryObjects) {
		return
	}
	clusters, _, _ := unstructured.NestedSlice(u.Object, "spec", "clusters")
	for _, c := range clusters {
		ref, _ := c.(map[string]any)["providerConfigRef"].(map[string]any)
		if kind, _ := ref["kind"].(string); ref != nil && (kind == "" || kind == "ProviderConfig") {
			ref["kind"] = meshv1alpha1.KindClusterProviderConfig
			ref["name"] = u.GetNamespace() + "-" + fmt.Sprint(ref["name"])
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, clusters, "spec", "clusters")
}

// providerConfigs gives namespace ns a ProviderConfig per member, and for
// delivery: Objects a ClusterProviderConfig per member too, as
// docs/install.md shows.
func providerConfigs(ctx context.Context, mode, ns string, members ...string) error {
	var extra []string
	if mode == string(meshv1alpha1.DeliveryObjects) {
		extra = []string{"STACK_CLUSTER_CONFIGS=1"}
	}
	return scriptEnv(ctx, extra, "providerconfigs.sh", append([]string{ns}, members...)...)
}

// newMesh builds a ClusterMesh of the given members.
func newMesh(ref meshRef, mode string, members ...meshv1alpha1.Cluster) *unstructured.Unstructured {
	spec := meshv1alpha1.ClusterMeshSpec{Clusters: members, Delivery: meshv1alpha1.Delivery(mode)}
	b, _ := json.Marshal(spec) //nolint:errchkjson // plain types
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m}}
	u.SetGroupVersionKind(stack.MeshGVK)
	u.SetNamespace(ref.ns)
	u.SetName(ref.name)
	clusterConfigs(u, mode)
	return u
}

// member is a spec.clusters[] entry of the stack's CIDR plan: cluster-a has
// 10.1.0.0/16 and 10.201.0.0/16, cluster-b 10.2 and 10.202, and so on.
func member(name, providerConfig string) meshv1alpha1.Cluster {
	i := int(name[len(name)-1]-'a') + 1
	return meshv1alpha1.Cluster{
		Name:              name,
		ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ProviderConfig", Name: providerConfig},
		PodCIDRs:          []meshv1alpha1.CIDR{meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", i))},
		WireguardCIDR:     meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", 200+i)),
	}
}

// condition reads one condition of a ClusterMesh.
func condition(ctx context.Context, ref meshRef, typ string) (status, reason, message string, err error) {
	u, _, err := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
	if err != nil {
		return "", "", "", err
	}
	status, reason, message = conditionOf(u, typ)
	return status, reason, message, nil
}

func conditionOf(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

// conditions lists every condition of a ClusterMesh as "type=status reason: message".
func conditions(u *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
	}
	return out
}

// waitCondition waits until a condition of the mesh has the status and its
// message holds every one of contains.
func waitCondition(ctx context.Context, t *testing.T, ref meshRef, typ, status string, timeout time.Duration, contains ...string) {
	t.Helper()
	wait.Eventually(ctx, t, fmt.Sprintf("%s: %s=%s with %q", ref, typ, status, contains), timeout, 300*time.Millisecond, func() (bool, error) {
		s, r, m, err := condition(ctx, ref, typ)
		if err == nil && s == status && containsAll(m, contains) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("%s=%s %s: %s", typ, s, r, m)
	})
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(strings.ToLower(s), strings.ToLower(sub)) {
			return false
		}
	}
	return true
}

// ownedBy keeps the Peers of a mesh.
func ownedBy(ref meshRef) func(*kilov1alpha1.Peer) bool {
	return func(p *kilov1alpha1.Peer) bool { return stack.Owned(p, ref.ns, ref.name) }
}

// meshPeers are the Peers of a mesh that a member holds now, by the recorder.
func meshPeers(member string, ref meshRef) []kilov1alpha1.Peer {
	var out []kilov1alpha1.Peer
	for _, p := range rec.snapshot(member) {
		if stack.Owned(&p, ref.ns, ref.name) {
			out = append(out, p)
		}
	}
	return out
}

// notConvergedWith says how the members differ from what the planner
// computes from their Nodes for the mesh's current spec as edit changes it
// (nil: as it is), or nothing. Members that are not in the spec must hold
// none of the mesh's Peers.
func notConvergedWith(ctx context.Context, ref meshRef, edit func(*meshv1alpha1.ClusterMeshSpec)) string {
	_, spec, err := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
	if err != nil {
		return err.Error()
	}
	if edit != nil {
		edit(spec)
	}
	plan, err := stack.Want(ctx, kube, ref.ns, ref.name, spec)
	if err != nil {
		return "cannot plan: " + err.Error()
	}
	return stack.Mismatch(plan, rec.memberNames(), func(m string) ([]kilov1alpha1.Peer, error) { return meshPeers(m, ref), nil })
}

// waitConverged waits until every member holds exactly the Peers the planner
// computes, and returns how long that took.
func waitConverged(ctx context.Context, t *testing.T, ref meshRef, timeout time.Duration) time.Duration {
	t.Helper()
	return waitConvergedWith(ctx, t, ref, timeout, nil)
}

// waitConvergedWith is waitConverged against the plan of the mesh's spec as
// edit changes it.
func waitConvergedWith(ctx context.Context, t *testing.T, ref meshRef, timeout time.Duration, edit func(*meshv1alpha1.ClusterMeshSpec)) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.Poll(ctx, "", timeout, 250*time.Millisecond, func() (bool, error) {
		why := notConvergedWith(ctx, ref, edit)
		return why == "", errors.New(why)
	})
	if err == nil {
		return time.Since(start)
	}
	u, _, _ := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
	conds := []string{}
	if u != nil {
		conds = conditions(u)
	}
	t.Fatalf("%s did not converge: %v\nconditions: %s", ref, err, strings.Join(conds, "; "))
	return 0
}

// noChanges fails when a member's Peers changed since t0 (events that keep
// say which Peers count).
func noChanges(t *testing.T, t0 time.Time, keep func(*kilov1alpha1.Peer) bool, what string) {
	t.Helper()
	for _, m := range rec.memberNames() {
		if es := rec.since(m, t0, keep); len(es) > 0 {
			t.Errorf("%s, yet Peers changed in %s:%s", what, m, describe(es))
		}
	}
}

// noDeletes fails when a member lost a Peer since t0.
func noDeletes(t *testing.T, t0 time.Time, keep func(*kilov1alpha1.Peer) bool, what string) {
	t.Helper()
	for _, m := range rec.memberNames() {
		var del []event
		for _, e := range rec.since(m, t0, keep) {
			if e.Type == "Deleted" {
				del = append(del, e)
			}
		}
		if len(del) > 0 {
			t.Errorf("%s: Peers were deleted in %s:%s", what, m, describe(del))
		}
	}
}

// peerName is the name kilomesh gives the Peer of a segment.
func peerName(ref meshRef, source, leader string) string {
	return mesh.PeerName(ref.ns, ref.name, source, leader)
}

// patchMesh applies a JSON patch to a ClusterMesh.
func patchMesh(ctx context.Context, ref meshRef, patch string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(stack.MeshGVK)
	u.SetNamespace(ref.ns)
	u.SetName(ref.name)
	return mgmt.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(patch)))
}

// metric sums the samples of a Prometheus metric of a local process, by name
// and label subset.
func metric(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback address of the stack, answers at once
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, s.Err()
}

// metricLines returns the samples of a metric, one line each.
func metricLines(addr, name string) ([]string, error) {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback address of the stack, answers at once
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []string
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if line := s.Text(); strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			out = append(out, line)
		}
	}
	return out, s.Err()
}
