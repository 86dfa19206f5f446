//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// A fault is one row of the fault table: something that goes wrong with
// the real pods of Crossplane's packages while a node of cluster-a is
// added. Whatever it is, once it is over the mesh converges with exactly
// the new node's Peers added: no Peer of any member lost (deleted, or
// deleted and made again) and none written again.
type fault struct {
	name string
	// objects: the row runs in the Objects pass too (provider-kubernetes
	// writes the Peers there).
	objects bool
	// inject makes the fault right after the node was added, and returns
	// what ends it (nil: it ends by itself) and a note for the report.
	inject func(ctx context.Context, t *testing.T, ref meshRef, node string) (end func(), note string)
}

var faults = []fault{
	{name: "provider-kilomesh's pod deleted", inject: deletePackagePod(pkgs[2])},
	{name: "provider-kubernetes's pod deleted", objects: true, inject: deletePackagePod(pkgs[1])},
	{name: "function-kilomesh's pod killed mid-reconcile", objects: true, inject: killFunction},
	{name: "the management node's containerd stopped", inject: stopContainerd},
}

// testFaults runs the fault table on the live mesh. The new nodes go again
// at the end, once their Peers are past crossplane-runtime's creation
// grace period.
func testFaults(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	waitConverged(ctx, t, ref, convergeTimeout)
	var added []string
	var last time.Time
	for i, f := range faults {
		if mode == "Objects" && !f.objects && !objectsFull() {
			continue
		}
		node := fmt.Sprintf("node-f%d", i)
		added = append(added, node)
		t.Run(f.name, func(t *testing.T) { faultRow(ctx, t, mode, ref, f, i, node) })
		last = time.Now()
	}
	if d := 35*time.Second - time.Since(last); d > 0 {
		time.Sleep(d)
	}
	for _, n := range added {
		if err := fixture.Delete(ctx, kube["cluster-a"], n); err != nil {
			t.Error(err)
		}
	}
	waitConverged(ctx, t, ref, convergeTimeout)
}

// faultRow adds node to cluster-a, injects the fault, ends it, and counts
// what happened to the mesh's Peers in every member meanwhile; the mesh's
// convergence is timed from the node's addition, the fault's end included.
func faultRow(ctx context.Context, t *testing.T, mode string, ref meshRef, f fault, i int, node string) {
	before := map[string]map[string]kilov1alpha1.Peer{}
	for _, m := range rec.memberNames() {
		before[m] = map[string]kilov1alpha1.Peer{}
		for _, p := range meshPeers(m, ref) {
			before[m][p.Name] = p
		}
	}
	pods := packagePods(ctx, t)
	xrTrace.take(ref.String())
	t0 := time.Now()
	n := fixture.Full(node, fmt.Sprintf("10.1.%d.0/24", 210+i), fmt.Sprintf("192.168.1.%d", 210+i), fmt.Sprintf("10.201.0.%d/16", 210+i)).
		With(kilov1alpha1.AnnotationEndpoint, fmt.Sprintf("192.0.2.%d:51820", 210+i))
	if err := fixture.Apply(ctx, kube["cluster-a"], n); err != nil {
		t.Fatal(err)
	}
	end, note := f.inject(ctx, t, ref, node)
	if end != nil {
		end()
	}
	waitConverged(ctx, t, ref, convergeTimeout)
	took := time.Since(t0)
	report.xrEvents(ref.ns+": "+f.name, ref)

	// What the members' watches saw since the node was added: the new
	// node's Peer in cluster-b and cluster-c, and nothing else.
	newPeer := peerName(ref, "cluster-a", node)
	var lost, rewritten, created []string
	for _, m := range rec.memberNames() {
		rv := map[string]string{}
		for name, p := range before[m] {
			rv[name] = p.ResourceVersion
		}
		for _, e := range rec.since(m, t0, ownedBy(ref)) {
			what := m + "/" + e.Peer.Name
			switch {
			case e.Type == "Deleted":
				lost = append(lost, what)
			case e.Type == "Added" && e.Peer.Name == newPeer && rv[e.Peer.Name] == "":
				created = append(created, what)
			case e.Type == "Added":
				lost = append(lost, what+" (made again)")
			case rv[e.Peer.Name] != e.Peer.ResourceVersion:
				// A relist repeats what the watch already had: only a
				// new resourceVersion is a write.
				rewritten = append(rewritten, what)
			}
			rv[e.Peer.Name] = e.Peer.ResourceVersion
		}
	}
	sameUIDs(t, ref, uidsOf(before), f.name)
	restarted := restartedPods(ctx, t, pods)
	report.fault(mode, f.name, len(lost), len(rewritten), took, note+restarted)
	if len(lost) > 0 || len(rewritten) > 0 {
		t.Errorf("%s: Peers lost: %v; written again: %v", f.name, lost, rewritten)
	}
	sort.Strings(created)
	if want := []string{"cluster-b/" + newPeer, "cluster-c/" + newPeer}; strings.Join(created, " ") != strings.Join(want, " ") {
		t.Errorf("%s: Peers made: %v, want %v", f.name, created, want)
	}
	t.Logf("%s: converged %.1fs after the node was added; %s%s", f.name, took.Seconds(), note, restarted)
}

func uidsOf(peers map[string]map[string]kilov1alpha1.Peer) map[string]map[string]types.UID {
	out := map[string]map[string]types.UID{}
	for m, ps := range peers {
		out[m] = map[string]types.UID{}
		for n, p := range ps {
			out[m][n] = p.UID
		}
	}
	return out
}

// packagePods are the pods of Crossplane's namespace by name, with their
// UIDs and restart counts.
func packagePods(ctx context.Context, t *testing.T) map[string]corev1.Pod {
	t.Helper()
	l := &corev1.PodList{}
	if err := mgmt.List(ctx, l, client.InNamespace(crossplaneNamespace())); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range l.Items {
		out[p.Name] = p
	}
	return out
}

// restartedPods says which of Crossplane's pods were replaced or had a
// container restarted since before.
func restartedPods(ctx context.Context, t *testing.T, before map[string]corev1.Pod) string {
	t.Helper()
	now := packagePods(ctx, t)
	var out []string
	for name, p := range before {
		q, ok := now[name]
		switch {
		case !ok:
			out = append(out, name+" gone")
		case total(q) > total(p):
			out = append(out, fmt.Sprintf("%s restarted %d times", name, total(q)-total(p)))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "no pod of Crossplane's namespace replaced or restarted"
	}
	return strings.Join(out, ", ")
}

func total(p corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// deletePackagePod deletes the pod of a package's active revision, as
// `kubectl delete pod` does (gracefully); its Deployment makes another.
func deletePackagePod(p pkg) func(context.Context, *testing.T, meshRef, string) (func(), string) {
	return func(ctx context.Context, t *testing.T, _ meshRef, _ string) (func(), string) {
		t.Helper()
		pod, err := packagePod(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		return func() {
			waitFor(ctx, t, "a new pod of "+p.name, func() error {
				q, err := packagePod(ctx, p)
				if err == nil && q.UID == pod.UID {
					err = fmt.Errorf("%s still runs", pod.Name)
				}
				if err == nil && !ready(q) {
					err = fmt.Errorf("%s is not ready", q.Name)
				}
				return err
			})
		}, fmt.Sprintf("pod %s deleted; ", pod.Name)
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// killFunction kills function-kilomesh's container with SIGKILL while
// Crossplane is calling it for the new node: it stops (SIGSTOP) the
// function's process, waits until cluster-a's NodeInventory publishes the
// node and Crossplane has a call of the function in flight (its counter of
// requests ahead of its counter of responses), then kills it. That call
// fails; the kubelet starts the container again in the same pod, and
// Crossplane calls it again.
func killFunction(ctx context.Context, t *testing.T, _ meshRef, node string) (func(), string) {
	t.Helper()
	pod, err := packagePod(ctx, pkgs[0])
	if err != nil {
		t.Fatal(err)
	}
	pids, err := containerPIDs(pod, "package-runtime")
	if err != nil {
		t.Fatal(err)
	}
	_, _, failed0, _ := functionCalls()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	err = wait.Poll(ctx, "", convergeTimeout, 20*time.Millisecond, func() (bool, error) {
		req, resp, _, err := functionCalls()
		if err != nil {
			return false, err
		}
		if req <= resp {
			return false, fmt.Errorf("requests %.0f, responses %.0f", req, resp)
		}
		return published(ctx, node), fmt.Errorf("a call in flight, but %s is not published yet", node)
	})
	if err != nil {
		_ = killContainer(pod, "package-runtime")
		t.Fatalf("no call of the function in flight for %s: %v", node, err)
	}
	inFlight := time.Since(t0)
	if err := killContainer(pod, "package-runtime"); err != nil {
		t.Fatal(err)
	}
	return func() {
		waitFor(ctx, t, "function-kilomesh's container to run again", func() error {
			q, err := packagePod(ctx, pkgs[0])
			switch {
			case err != nil:
				return err
			case q.UID != pod.UID:
				return fmt.Errorf("pod %s was replaced by %s", pod.Name, q.Name)
			case restarts(q, "package-runtime") <= restarts(pod, "package-runtime") || !ready(q):
				return fmt.Errorf("%s: its container has not run again yet", q.Name)
			}
			return nil
		})
		_, _, failed, err := functionCalls()
		if err != nil || failed <= failed0 {
			t.Errorf("Crossplane saw no call of the function fail (%.0f failed before, %.0f after: %v): it was not killed mid-call", failed0, failed, err)
		}
	}, fmt.Sprintf("stopped, then killed with a call of Crossplane's in flight %dms after the node was added; ", inFlight.Milliseconds())
}

// published tells whether cluster-a's NodeInventory of a mesh of the run
// publishes node.
func published(ctx context.Context, node string) bool {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kube.kilomesh.io/v1alpha1")
	l.SetKind("NodeInventoryList")
	if err := mgmt.List(ctx, l); err != nil {
		return false
	}
	for _, inv := range l.Items {
		if inv.GetAnnotations()["crossplane.io/composition-resource-name"] != "inventory-cluster-a" {
			continue
		}
		nodes, _, _ := unstructured.NestedSlice(inv.Object, "status", "atProvider", "nodes")
		for _, n := range nodes {
			if m, _ := n.(map[string]any); m["name"] == node {
				return true
			}
		}
	}
	return false
}

// functionCalls reads Crossplane's counters of its calls of
// function-kilomesh: requests sent, responses received (an error is one),
// and those that did not end with gRPC's OK.
func functionCalls() (requests, responses, failed float64, err error) {
	resp, err := http.Get("http://" + crossplaneMetrics() + "/metrics") //nolint:noctx // a pod of the stack, answers at once
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		l := s.Text()
		if !strings.Contains(l, `function_name="kilomesh-function-kilomesh"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(l, "function_run_function_request_total{"):
			requests += v
		case strings.HasPrefix(l, "function_run_function_response_total{"):
			responses += v
			if !strings.Contains(l, `grpc_code="OK"`) {
				failed += v
			}
		}
	}
	return requests, responses, failed, s.Err()
}

// stopContainerd stops the containerd of the management cluster's node,
// where Crossplane and the packages run, for 20 s at least: their
// containers go on running under their shims, so the mesh converges
// meanwhile (checked before containerd starts again), the kubelet cannot
// see them, and once containerd is back it finds them as they were.
func stopContainerd(ctx context.Context, t *testing.T, ref meshRef, _ string) (func(), string) {
	t.Helper()
	name := env.Management() + "-containerd"
	if err := script(ctx, "down.sh", name); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	return func() {
		waitConverged(ctx, t, ref, convergeTimeout)
		t.Logf("the mesh converged while containerd of %s was stopped, %.1fs after it stopped", env.Management(), time.Since(stopped).Seconds())
		time.Sleep(20*time.Second - time.Since(stopped))
		if err := script(ctx, "start.sh", name); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the management node to be Ready again", func() error {
			n := &corev1.Node{}
			if err := mgmt.Get(ctx, client.ObjectKey{Name: realNode(env.Management())}, n); err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("%s is not Ready", n.Name)
		})
	}, "containerd stopped for 20s; "
}
