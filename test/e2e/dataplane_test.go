//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/dataplane"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
	"github.com/kilomesh/kilomesh/test/stack/meshpods"
)

// dp is the data plane of the run: it stands in for Kilo's agent on every
// Node of every member, and writes Kilo's heartbeat on all of them, for the
// whole run.
var dp *dataplane.Harness

// startDataplane builds wireguard-go and starts the harness: a data plane
// for every member with Kilo's Peer, heartbeats for every member. Its log
// goes to the run folder's logs.
func startDataplane(ctx context.Context) (*dataplane.Harness, error) {
	build := exec.CommandContext(ctx, filepath.Join(top, "test", "tools", "build.sh"), "wireguard-go")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("cannot build wireguard-go: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(env.Dir, "logs"), 0o750); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(env.Dir, "logs", "dataplane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	cfg := dataplane.Config{
		Dir:         filepath.Join(env.Dir, "dataplane"),
		WireguardGo: filepath.Join(env.Vars["STACK_BIN"], "wireguard-go"),
		Hosts:       fixture.Hosts(),
		Keys:        fixture.PrivateKey,
		// The large mesh's nodes get heartbeats only: its Peers are
		// counted, its packets are not sent.
		HeartbeatOnly: func(n *corev1.Node) bool { return n.Labels[labelScale] == "true" },
		// node-n and node-m of the NAT step, behind routers of their own.
		NAT: behindNAT,
		// The check-ins write no discovered endpoints (Kilo's do): with
		// them, an endpoint a node's WireGuard learned in one step (a
		// Peer broken by hand, NAT) changed its Peer in a later step, which
		// the faults step counts as a Peer written again. The steps that
		// start nodes as Kilo does write them (kilostart_test.go).
		Discovered: false,
		Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(logf, time.Now().Format(time.TimeOnly)+" "+format+"\n", args...)
		},
	}
	// The private keys of the fixture's nodes, before their Nodes exist.
	_, _ = fixture.Mesh(), fixture.Extra()
	// The real nodes run it in their own namespaces (stack.DataplaneMembers).
	ms, err := stack.DataplaneMembers(env, clusters, true)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if slices.Contains(scaleOnly, m.Name) {
			m.Subnet = ""
		}
		cfg.Members = append(cfg.Members, m)
	}
	t0 := time.Now()
	h, err := dataplane.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "e2e: data plane up in %.1fs (log: %s)\n", time.Since(t0).Seconds(), logf.Name())
	return h, nil
}

// seedRealNodes writes on the real node of every member of
// examples/mesh.yaml what Kilo's agent would write on it
// (fixture.RealNode): with it, each joins the mesh as the first segment of
// its member, its anchor.
func seedRealNodes(ctx context.Context) error {
	for _, c := range meshMembers {
		if ok, err := stack.SeedRealNode(ctx, env, c, kube[c]); err != nil || !ok {
			return fmt.Errorf("kilo's annotations on the real node of %s: %w (has one: %v)", c, err, ok)
		}
	}
	return nil
}

// realPods are the real pods of the mesh's members (test/stack/meshpods):
// in every member a hello pod behind a Service, a client pod, and Kilo's
// mirrors of the other members' Services.
var realPods *meshpods.Pods

// deployRealPods runs them, before any mesh exists.
func deployRealPods(ctx context.Context) (*meshpods.Pods, error) {
	clients := map[string]client.Client{}
	for _, c := range meshMembers {
		clients[c] = kube[c]
	}
	t0 := time.Now()
	p, err := meshpods.Deploy(ctx, clients)
	if err != nil {
		return nil, fmt.Errorf("the real pods: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: real pods in %s ready in %.1fs\n", strings.Join(meshMembers, ", "), time.Since(t0).Seconds())
	return p, nil
}

// realPodsAcross checks that a client pod of every member reaches a pod,
// by its address, and a Service, by Kilo's multi-cluster Services recipe,
// of every other member; the table goes into the report.
func realPodsAcross(ctx context.Context, t *testing.T, label string) {
	t.Helper()
	start := time.Now()
	m := realPods.Run(ctx, realPods.Pairs(), meshpods.DefaultProbing)
	report.notef("%s: real pods, HTTP from a client pod of every member to a pod and a Service of every other member (%.1fs):\n%s", label, time.Since(start).Seconds(), strings.TrimRight(m.String(), "\n"))
	if len(m.Failed()) > 0 {
		t.Errorf("%s: real pods' requests failed:\n%s\n%s", label, m, dp.Dump(ctx))
		return
	}
	t.Logf("%s (%.1fs):\n%s", label, time.Since(start).Seconds(), m)
}

// realNode is the name of a member's real node.
func realNode(c string) string { return c + "-node" }

// reachable are the nodes of the mesh's members whose pods every other
// member must reach, and extra ones.
func reachable(extra map[string][]string) map[string][]string {
	out := map[string][]string{}
	all := fixture.Reachable()
	for _, m := range meshMembers {
		out[m] = append(append([]string(nil), all[m]...), extra[m]...)
	}
	return out
}

// pairName names a probe by its nodes.
func pairName(p dataplane.Pair) string { return p.From.Node + " -> " + p.To.Node }

// between lists the probes, both ways, between the pods of node and every
// pod of the other members among nodes.
func between(nodes map[string][]string, cluster, node string) []string {
	var out []string
	for c, ns := range nodes {
		if c == cluster {
			continue
		}
		for _, n := range ns {
			out = append(out, node+" -> "+n, n+" -> "+node)
		}
	}
	return out
}

// packets probes from every pod of nodes to every pod of the other
// members, and fails unless exactly the pairs of want fail. The matrix
// goes into the report under label.
func packets(ctx context.Context, t *testing.T, mode, label string, nodes map[string][]string, want []string) {
	t.Helper()
	pods := dataplane.Select(dp.Pods(), nodes)
	n := 0
	for _, ns := range nodes {
		n += len(ns)
	}
	if len(pods) != n {
		t.Fatalf("%s: the data plane runs %d of the %d pods to probe: %v\n%s", label, len(pods), n, pods, dp.Dump(ctx))
	}
	start := time.Now()
	m := dataplane.Matrix{Results: dataplane.Run(ctx, dataplane.Between(pods), dataplane.DefaultProbing)}
	took := time.Since(start)
	var got []string
	for _, p := range m.Failed() {
		got = append(got, pairName(p))
	}
	sort.Strings(got)
	want = slices.Clone(want)
	sort.Strings(want)
	report.notef("%s: packets, %s (UDP echo between pod addresses through WireGuard, %.1fs):\n%s", mode, label, took.Seconds(), strings.TrimRight(m.String(), "\n"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: pairs without an echo (-want +got):\n%s\n%s\n%s", label, diff, m, dp.Dump(ctx))
		return
	}
	t.Logf("%s (%.1fs):\n%s", label, took.Seconds(), m)
}

// waitPeerKey waits until the WireGuard interface of every node of nodes
// has a peer with key.
func waitPeerKey(ctx context.Context, t *testing.T, cluster string, nodes []string, key string) {
	t.Helper()
	// One deadline for every node, taken in turn: check moves on to the
	// next node as soon as one has the peer.
	i := 0
	wait.Eventually(ctx, t, fmt.Sprintf("the WireGuard interfaces of %s %v to have a peer with key %s", cluster, nodes, key), convergeTimeout, 200*time.Millisecond, func() (bool, error) {
		for ; i < len(nodes); i++ {
			n := nodes[i]
			d, err := dp.Device(ctx, cluster, n)
			if err == nil && d != nil && slices.ContainsFunc(d.Peers, func(p dataplane.DevicePeer) bool { return p.PublicKey.String() == key }) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("%s/%s: %w; %s", cluster, n, err, dp.Note(cluster, n))
			}
			return false, fmt.Errorf("%s/%s has no such peer; %s", cluster, n, dp.Note(cluster, n))
		}
		return true, nil
	})
}

// waitOwnKey waits until the WireGuard interface of a node runs with key.
func waitOwnKey(ctx context.Context, t *testing.T, cluster, node, key string) {
	t.Helper()
	wait.Eventually(ctx, t, fmt.Sprintf("%s/%s to run WireGuard with key %s", cluster, node, key), convergeTimeout, 200*time.Millisecond, func() (bool, error) {
		d, err := dp.Device(ctx, cluster, node)
		if err == nil && d != nil && d.PublicKey().String() == key {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("%w; %s", err, dp.Note(cluster, node))
		}
		return false, fmt.Errorf("it runs another key, or none; %s", dp.Note(cluster, node))
	})
}

// The leaders of the fixture's members, whose interfaces hold the Peers:
// every member's real node first (its name sorts first: its segment is the
// member's anchor), then the fixture's.
var leaders = map[string][]string{
	"cluster-a": {"cluster-a-node", "node-a1", "node-a2"},
	"cluster-b": {"cluster-b-node", "node-b1", "node-b3"},
	"cluster-c": {"cluster-c-node", "node-c1"},
}

// setPaused marks a resource of the management cluster paused
// (Crossplane's pause annotation), or not, and waits until its reconciler
// says so. An XR whose watch circuit breaker is open drops the event of its
// unpausing and stays paused until another event passes (one per 30 s): it
// is touched until it resumes.
func setPaused(ctx context.Context, t *testing.T, u *unstructured.Unstructured, on bool) {
	t.Helper()
	v := `null`
	if on {
		v = `"true"`
	}
	if err := mgmt.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":`+v+`}}}`))); err != nil {
		t.Fatal(err)
	}
	touched := time.Now()
	wait.Eventually(ctx, t, fmt.Sprintf("%s %s to say it is paused (%v)", u.GetKind(), u.GetName(), on), convergeTimeout, 300*time.Millisecond, func() (bool, error) {
		if err := mgmt.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		_, reason, _ := conditionOf(u, "Synced")
		if (reason == "ReconcilePaused") == on {
			return true, nil
		}
		if !on && time.Since(touched) > 5*time.Second {
			poke := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.kilomesh.io/poke":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
			if err := mgmt.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(poke))); err != nil {
				t.Fatal(err)
			}
			touched = time.Now()
		}
		return false, fmt.Errorf("Synced reason %q", reason)
	})
}

// resumeOnFailure resumes a paused resource when the test fails before it
// resumes it itself, so that the steps after it find the mesh running.
func resumeOnFailure(ctx context.Context, t *testing.T, u *unstructured.Unstructured) {
	t.Cleanup(func() {
		if t.Failed() {
			setPaused(ctx, t, u, false)
		}
	})
}

// meshObject is the ClusterMesh as an object to patch.
func meshObject(ref meshRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(stack.MeshGVK)
	u.SetNamespace(ref.ns)
	u.SetName(ref.name)
	return u
}

// delivering finds the composed resource that delivers a Peer into a
// member: its Object, or the member's PeerSet.
func delivering(ctx context.Context, t *testing.T, ref meshRef, mode, target, peer string) *unstructured.Unstructured {
	t.Helper()
	kind, want := "ObjectList/kubernetes.m.crossplane.io/v1alpha1", "peer-"+target+"-"+peer
	if mode == "PeerSet" {
		kind, want = "PeerSetList/kube.kilomesh.io/v1alpha1", "peerset-"+target
	}
	parts := strings.SplitN(kind, "/", 2)
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(parts[1])
	l.SetKind(parts[0])
	if err := mgmt.List(ctx, l, client.InNamespace(ref.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		u := &l.Items[i]
		if u.GetAnnotations()["crossplane.io/composition-resource-name"] == want && u.GetLabels()["crossplane.io/composite"] == ref.name {
			return u
		}
	}
	t.Fatalf("no composed resource %s of %s", want, ref)
	return nil
}

// testPackets checks the mesh's Peers with packets: every pod reaches every
// pod of every other member; a Peer broken by hand breaks exactly its
// pairs; after a key rotation and after a node is added, connectivity comes
// back with the new Peers, and only then.
func testPackets(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	start := time.Now()
	waitConverged(ctx, t, ref, convergeTimeout)
	nodes := reachable(nil)
	t.Run("every pod reaches every pod of every other member", func(t *testing.T) {
		packets(ctx, t, mode, "converged mesh", nodes, nil)
	})
	t.Run("real pods reach a pod and a Service of every other member", func(t *testing.T) {
		realPodsAcross(ctx, t, mode+": converged mesh")
	})
	if mode == "Objects" && !objectsFull() {
		// Pausing the delivery of Objects waits for Crossplane's watch
		// circuit breaker: the pauses run in the PeerSet pass.
		report.notef("%s: the packet checks took %.0fs", mode, time.Since(start).Seconds())
		return
	}
	t.Run("a Peer broken by hand breaks exactly its pairs", func(t *testing.T) {
		testBrokenPeer(ctx, t, mode, ref, nodes)
	})
	t.Run("after a key rotation, packets pass with the new Peers and only then", func(t *testing.T) {
		testRotation(ctx, t, mode, ref, nodes)
	})
	t.Run("after a node is added, packets pass with its Peers and only then", func(t *testing.T) {
		testNodeAdded(ctx, t, mode, ref)
	})
	t.Run("leaders behind NAT are reached while their own keepalives hold the mappings open", func(t *testing.T) {
		testLeadersBehindNAT(ctx, t, mode, ref)
	})
	report.notef("%s: the packet checks took %.0fs", mode, time.Since(start).Seconds())
}

// testBrokenPeer gives node-a1's Peer in cluster-b a wrong key, by hand,
// while its delivery is paused: exactly the pairs between node-a1 and
// cluster-b's pods fail. Then it puts the Peer back.
func testBrokenPeer(ctx context.Context, t *testing.T, mode string, ref meshRef, nodes map[string][]string) {
	target, name := "cluster-b", peerName(ref, "cluster-a", "node-a1")
	mr := delivering(ctx, t, ref, mode, target, name)
	setPaused(ctx, t, mr, true)
	resumeOnFailure(ctx, t, mr)
	p := &kilov1alpha1.Peer{}
	if err := kube[target].Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	right, wrong := p.Spec.PublicKey, fixture.Key("not node-a1")
	p.Spec.PublicKey = wrong
	if err := kube[target].Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitPeerKey(ctx, t, target, leaders[target], wrong)
	want := []string{}
	for _, n := range nodes[target] {
		want = append(want, "node-a1 -> "+n, n+" -> node-a1")
	}
	packets(ctx, t, mode, "node-a1's Peer in cluster-b given a wrong key by hand", nodes, want)

	if err := kube[target].Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.PublicKey = right
	if err := kube[target].Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	setPaused(ctx, t, mr, false)
	waitConverged(ctx, t, ref, convergeTimeout)
	waitPeerKey(ctx, t, target, leaders[target], right)
	packets(ctx, t, mode, "the Peer put back", nodes, nil)
}

// testRotation rotates node-a1's key while the mesh is paused: its pairs
// fail until the new Peers arrive, then pass.
func testRotation(ctx context.Context, t *testing.T, mode string, ref meshRef, nodes map[string][]string) {
	xr := meshObject(ref)
	setPaused(ctx, t, xr, true)
	resumeOnFailure(ctx, t, xr)
	old := nodeOf(ctx, t, "cluster-a", "node-a1")
	key := fixture.Key("node-a1 rotated")
	if err := fixture.Apply(ctx, kube["cluster-a"], old.With(kilov1alpha1.AnnotationKey, key)); err != nil {
		t.Fatal(err)
	}
	waitOwnKey(ctx, t, "cluster-a", "node-a1", key)
	packets(ctx, t, mode, "node-a1's key rotated, the mesh paused", nodes, between(nodes, "cluster-a", "node-a1"))
	for _, m := range []string{"cluster-b", "cluster-c"} {
		if p := rec.snapshot(m)[peerName(ref, "cluster-a", "node-a1")]; p.Spec.PublicKey != old.Annotations[kilov1alpha1.AnnotationKey] {
			t.Errorf("%s holds node-a1's Peer with key %s while the mesh is paused, want the old key", m, p.Spec.PublicKey)
		}
	}

	setPaused(ctx, t, xr, false)
	waitConverged(ctx, t, ref, convergeTimeout)
	for _, m := range []string{"cluster-b", "cluster-c"} {
		waitPeerKey(ctx, t, m, leaders[m], key)
	}
	packets(ctx, t, mode, "node-a1's new Peers delivered", nodes, nil)
}

// testNodeAdded adds node-z to cluster-c while the mesh is paused: its pod
// reaches no other member until its Peers arrive, then every one. It is
// deleted again at the end.
func testNodeAdded(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	xr := meshObject(ref)
	setPaused(ctx, t, xr, true)
	z := fixture.Full("node-z", "10.3.50.0/24", "192.168.3.50", "10.203.0.50/16").With(kilov1alpha1.AnnotationEndpoint, "192.0.2.50:51820")
	if err := fixture.Apply(ctx, kube["cluster-c"], z); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fixture.Delete(ctx, kube["cluster-c"], "node-z"); err != nil {
			t.Error(err)
		}
		waitConverged(ctx, t, ref, convergeTimeout)
	})
	// Cleanups run last first: the mesh resumes before node-z goes.
	resumeOnFailure(ctx, t, xr)
	nodes := reachable(map[string][]string{"cluster-c": {"node-z"}})
	// node-z runs once it peers with cluster-c's Peers.
	waitPeerKey(ctx, t, "cluster-c", []string{"node-z"}, nodeOf(ctx, t, "cluster-b", "node-b1").Annotations[kilov1alpha1.AnnotationKey])
	packets(ctx, t, mode, "node-z added to cluster-c, the mesh paused", nodes, between(nodes, "cluster-c", "node-z"))

	setPaused(ctx, t, xr, false)
	waitConverged(ctx, t, ref, convergeTimeout)
	for _, m := range []string{"cluster-a", "cluster-b"} {
		waitPeerKey(ctx, t, m, leaders[m], z.Annotations[kilov1alpha1.AnnotationKey])
	}
	packets(ctx, t, mode, "node-z's Peers delivered", nodes, nil)
}

// packetsDuringOutage probes while a member's API server is down: the other
// members reach each other, and reach the unreachable member's leaders
// through their last known Peers. Its non-leaders are reported, not
// checked: Kilo's agents there, unable to write their heartbeats, drop
// each other from their topology once the heartbeats are 60 s old (the
// non-leaders then lose the routes through their leaders).
func packetsDuringOutage(ctx context.Context, t *testing.T, mode, down string) {
	t.Helper()
	nodes := reachable(nil)
	pods := dataplane.Select(dp.Pods(), nodes)
	m := dataplane.Matrix{Results: dataplane.Run(ctx, dataplane.Between(pods), dataplane.DefaultProbing)}
	report.notef("%s: packets, %s unreachable (its non-leaders are not checked):\n%s", mode, down, strings.TrimRight(m.String(), "\n"))
	var bad []string
	for _, p := range m.Failed() {
		ends := []dataplane.Pod{p.From, p.To}
		if !slices.ContainsFunc(ends, func(e dataplane.Pod) bool { return e.Cluster == down && !slices.Contains(leaders[down], e.Node) }) {
			bad = append(bad, pairName(p))
		}
	}
	if len(bad) > 0 {
		t.Errorf("with %s unreachable, pairs got no echo: %s\n%s\n%s", down, strings.Join(bad, ", "), m, dp.Dump(ctx))
	}
}
