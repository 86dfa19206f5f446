//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// The large mesh: five members of 50 fixture Nodes each, every node its own
// Peer in the four other members (1,000 Peers), in the default delivery.
// Its nodes carry a label of their own, so that the other meshes of the
// stack do not select them and the data plane leaves them out (heartbeats
// only).
var (
	scaleMembers = []string{"cluster-a", "cluster-b", "cluster-c", "cluster-e", "cluster-f"}
	scaleNodes   = envInt("E2E_SCALE_NODES", 50)
	scaleRef     = meshRef{ns: "scale", name: "scale"}
	// scaleOnly are the members of the large mesh only.
	scaleOnly = []string{"cluster-e", "cluster-f"}
)

// labelScale marks the nodes of the large mesh.
const labelScale = "e2e.kilomesh.io/scale"

func scaleNode(i, j int, key string) fixture.Node {
	name := fmt.Sprintf("scale-%c-%02d", 'a'+rune(i), j)
	n := fixture.Full(name, fmt.Sprintf("10.%d.%d.0/24", 150+i, j), fmt.Sprintf("172.%d.0.%d", 20+i, j+1), fmt.Sprintf("10.%d.0.%d/16", 160+i, j+1))
	ep := fmt.Sprintf("100.%d.0.%d", 64+i, j+1)
	n.ExternalIPs = []string{ep}
	n.Labels[labelScale] = "true"
	n = n.With(kilov1alpha1.AnnotationEndpoint, ep+":51820")
	if key != "" {
		n = n.With(kilov1alpha1.AnnotationKey, key)
	}
	return n
}

func scaleMesh() *unstructured.Unstructured {
	var members []meshv1alpha1.Cluster
	for i, m := range scaleMembers {
		members = append(members, meshv1alpha1.Cluster{
			Name:              m,
			ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Kind: "ProviderConfig", Name: m},
			PodCIDRs:          []meshv1alpha1.CIDR{meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", 150+i))},
			WireguardCIDR:     meshv1alpha1.CIDR(fmt.Sprintf("10.%d.0.0/16", 160+i)),
			NodeCIDRs:         []meshv1alpha1.CIDR{meshv1alpha1.CIDR(fmt.Sprintf("172.%d.0.0/24", 20+i))},
			NodeSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{labelScale: "true"}},
		})
	}
	// No delivery: the default.
	u := newMesh(scaleRef, "", members...)
	_ = unstructured.SetNestedField(u.Object, "Node", "spec", "granularity")
	return u
}

// scalePeers tells whether a member holds, for every node of every other
// member, a Peer of the large mesh whose key pred accepts.
func scalePeers(member string, key func(source, node string) string) func(map[string]*kilov1alpha1.Peer) bool {
	return func(ps map[string]*kilov1alpha1.Peer) bool {
		n := 0
		for _, p := range ps {
			if stack.Owned(p, scaleRef.ns, scaleRef.name) {
				n++
			}
		}
		want := (len(scaleMembers) - 1) * scaleNodes
		if n != want {
			return false
		}
		for i, src := range scaleMembers {
			if src == member {
				continue
			}
			for j := range scaleNodes {
				node := scaleNode(i, j, "").Name
				p := ps[peerName(scaleRef, src, node)]
				if p == nil || p.Spec.PublicKey != key(src, node) {
					return false
				}
			}
		}
		return true
	}
}

// waitAll waits until pred holds in every member of the large mesh but
// those of skip, and returns when the last one got there.
func waitAll(ctx context.Context, t *testing.T, what string, pred func(member string) func(map[string]*kilov1alpha1.Peer) bool, do func() error, skip ...string) time.Duration {
	t.Helper()
	type w struct {
		member string
		w      *waiter
	}
	var ws []w
	for _, m := range scaleMembers {
		if slices.Contains(skip, m) {
			continue
		}
		x, err := rec.expect(m, pred(m))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w{m, x})
	}
	t0 := time.Now()
	if err := do(); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, x := range ws {
		wctx, cancel := context.WithTimeout(ctx, convergeTimeout)
		at, err := x.w.wait(wctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %s did not get there within %s", what, x.member, convergeTimeout)
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(t0)
}

// breakerLog counts the lines of Crossplane's log that say the circuit
// breaker of the large mesh is open.
func breakerLog(ref meshRef) []string {
	b, err := os.ReadFile(filepath.Join(env.Dir, "logs", "crossplane.log"))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "Circuit breaker is open") && strings.Contains(l, ref.name) && strings.Contains(l, ref.ns) {
			out = append(out, l)
		}
	}
	return out
}

// TestScale runs the large mesh in the default delivery: it is created, 50
// nodes of one member rotate their keys at once, a member leaves and comes
// back, and Crossplane's watch circuit breaker of the mesh must never open.
// Durations are reported, not asserted.
func TestScale(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	defer func() { report.notef("scale: the large-mesh step took %.0fs", time.Since(start).Seconds()) }()
	keys := map[string]string{}
	keyOf := func(_, node string) string {
		if k, ok := keys[node]; ok {
			return k
		}
		return fixture.Key(node)
	}

	// 250 Nodes, heartbeats by the stand-in agent.
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, m := range scaleMembers {
		for j := range scaleNodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fixture.Apply(ctx, kube[m], scaleNode(i, j, "")); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("cannot create the nodes of the large mesh: %v", errs[0])
	}
	defer func() {
		for _, m := range scaleMembers {
			_ = kube[m].DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{labelScale: "true"})
		}
	}()
	if err := script(ctx, "providerconfigs.sh", append([]string{scaleRef.ns}, scaleMembers...)...); err != nil {
		t.Fatal(err)
	}
	opens0, _ := metric(crossplaneMetrics(), "circuit_breaker_opens_total")
	steps := []string{}
	events0, _ := metric(crossplaneMetrics(), "circuit_breaker_events_total")
	// step reports a step once every member got there, then waits for as
	// many seconds as the step cost the mesh's circuit breaker events (it
	// refills one per second): each step is measured against the breaker
	// on its own, the way steps a person makes come apart.
	step := func(what string, d time.Duration) {
		_, opens := xpBreaker.last()
		s, reason, _, _ := condition(ctx, scaleRef, "Responsive")
		steps = append(steps, fmt.Sprintf("%s %.1fs", what, d.Seconds()))
		time.Sleep(3 * time.Second) // the step's last events
		events, _ := metric(crossplaneMetrics(), "circuit_breaker_events_total")
		n := events - events0
		report.notef("scale (%d x %d, default delivery): %s in %.1fs; %.0f watch events counted by Crossplane's circuit breakers; Responsive=%s %s; breaker opens so far: %.0f",
			len(scaleMembers), scaleNodes, what, d.Seconds(), n, s, reason, opens-opens0)
		report.xrEvents("scale: "+what, scaleRef)
		time.Sleep(time.Duration(min(n, 100)) * time.Second)
		events0, _ = metric(crossplaneMetrics(), "circuit_breaker_events_total")
	}

	t.Run("created", func(t *testing.T) {
		xrTrace.take(scaleRef.String())
		d := waitAll(ctx, t, "mesh created", func(m string) func(map[string]*kilov1alpha1.Peer) bool { return scalePeers(m, keyOf) },
			func() error { return mgmt.Create(ctx, scaleMesh()) })
		step(fmt.Sprintf("mesh created, %d Peers delivered", len(scaleMembers)*(len(scaleMembers)-1)*scaleNodes), d)
		waitCondition(ctx, t, scaleRef, "Ready", "True", convergeTimeout)
		// The gate a script puts before what follows: kubectl kilomesh
		// status --wait returns 0 once every member holds every Peer.
		if out, code := kilomesh(ctx, "status", scaleRef.name, "-n", scaleRef.ns, "--wait", "--timeout", convergeTimeout.String()); code != 0 {
			t.Fatalf("kubectl kilomesh status --wait on the large mesh exited %d, want 0 (converged):\n%s", code, out)
		}
	})

	t.Run("50 nodes change at once", func(t *testing.T) {
		xrTrace.take(scaleRef.String())
		for j := range scaleNodes {
			n := scaleNode(0, j, "")
			keys[n.Name] = fixture.Key(n.Name + " rotated")
		}
		d := waitAll(ctx, t, "keys rotated", func(m string) func(map[string]*kilov1alpha1.Peer) bool { return scalePeers(m, keyOf) },
			func() error {
				var wg sync.WaitGroup
				var first error
				var mu sync.Mutex
				for j := range scaleNodes {
					n := scaleNode(0, j, "")
					n = scaleNode(0, j, keys[n.Name])
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := fixture.Apply(ctx, kube[scaleMembers[0]], n); err != nil {
							mu.Lock()
							first = err
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				return first
			}, scaleMembers[0]) // its own Peers do not change
		step(fmt.Sprintf("%d nodes of %s rotated their keys at once, every other member updated", scaleNodes, scaleMembers[0]), d)
	})

	var removed *meshv1alpha1.Cluster
	t.Run("member removed", func(t *testing.T) {
		xrTrace.take(scaleRef.String())
		_, spec, err := stack.GetMesh(ctx, mgmt, scaleRef.ns, scaleRef.name)
		if err != nil {
			t.Fatal(err)
		}
		last := len(spec.Clusters) - 1
		removed = spec.Clusters[last].DeepCopy()
		gone := removed.Name
		d := waitAll(ctx, t, "member removed", func(m string) func(map[string]*kilov1alpha1.Peer) bool {
			return func(ps map[string]*kilov1alpha1.Peer) bool {
				for _, p := range ps {
					if stack.Owned(p, scaleRef.ns, scaleRef.name) && (m == gone || p.Labels[meshv1alpha1.LabelSourceCluster] == gone) {
						return false
					}
				}
				return true
			}
		}, func() error {
			return patchMesh(ctx, scaleRef, fmt.Sprintf(`[{"op":"test","path":"/spec/clusters/%d/name","value":%q},{"op":"remove","path":"/spec/clusters/%d"}]`, last, gone, last))
		})
		step("a member removed, every member converged", d)
	})

	t.Run("member added", func(t *testing.T) {
		if removed == nil {
			t.Skip("no member was removed")
		}
		xrTrace.take(scaleRef.String())
		b, err := json.Marshal(removed)
		if err != nil {
			t.Fatal(err)
		}
		d := waitAll(ctx, t, "member added", func(m string) func(map[string]*kilov1alpha1.Peer) bool { return scalePeers(m, keyOf) },
			func() error {
				return patchMesh(ctx, scaleRef, fmt.Sprintf(`[{"op":"add","path":"/spec/clusters/-","value":%s}]`, b))
			})
		step("a member added, every member converged", d)
	})

	t.Run("circuit breaker", func(t *testing.T) {
		s, reason, msg, err := condition(ctx, scaleRef, "Responsive")
		if err != nil {
			t.Fatal(err)
		}
		lines := breakerLog(scaleRef)
		report.notef("scale: the mesh's Responsive condition at the end: %s %s %s; Crossplane's log has %d lines of its circuit breaker open", s, reason, msg, len(lines))
		for _, l := range lines {
			report.notef("  %s", l)
		}
		if s != "True" || len(lines) > 0 {
			t.Errorf("the watch circuit breaker of the large mesh opened (Responsive=%s %s %s; %d log lines): steps %s", s, reason, msg, len(lines), strings.Join(steps, ", "))
		}
	})

	t.Run("deleted", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(stack.MeshGVK)
		u.SetNamespace(scaleRef.ns)
		u.SetName(scaleRef.name)
		d := waitAll(ctx, t, "mesh deleted", func(string) func(map[string]*kilov1alpha1.Peer) bool {
			return func(ps map[string]*kilov1alpha1.Peer) bool {
				for _, p := range ps {
					if stack.Owned(p, scaleRef.ns, scaleRef.name) {
						return false
					}
				}
				return true
			}
		}, func() error { return mgmt.Delete(ctx, u) })
		report.notef("scale: the mesh deleted, every Peer gone from every member in %.1fs", d.Seconds())
	})
}
