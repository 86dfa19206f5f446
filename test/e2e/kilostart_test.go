//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// kiloCheckIn is Kilo's check-in period (checkInPeriod of its pkg/mesh).
const kiloCheckIn = 30 * time.Second

// The annotations Kilo's agent writes on its own Node (Set of Kilo's
// pkg/k8s backend writes all of them every time).
var kiloWritten = []string{
	kilov1alpha1.AnnotationKey, kilov1alpha1.AnnotationEndpoint, kilov1alpha1.AnnotationInternalIP,
	kilov1alpha1.AnnotationWireguardIP, kilov1alpha1.AnnotationDiscoveredEndpoints,
	kilov1alpha1.AnnotationGranularity, kilov1alpha1.AnnotationLastSeen,
}

// A kiloStarts writes Nodes as Kilo's agent does when it starts on them,
// and waits for the writes it left running.
type kiloStarts struct {
	wg sync.WaitGroup
}

// start makes n start as Kilo starts a node, in member c of the mesh ref:
//
//   - the kubelet's Node, without what Kilo's agent writes;
//   - the agent's first write (Mesh.handleLocal): its key, endpoint,
//     internal IP, heartbeat and granularity, with an empty WireGuard IP and
//     discovered endpoints;
//   - at once, on the event of that write, its WireGuard IP (applyTopology
//     made it the leader of its segment);
//
// and, in the background (wait waits for them), at its first check-in 30 s
// later kilo.squat.ai/discovered-endpoints as "{}", and at its second the
// endpoints it learned from a handshake with every Peer of the mesh in its
// member, each the endpoint its Peer has (a mesh without NAT). It returns
// once the first two writes are made; the check-ins after that are the
// stand-in agent's.
//
// With checkIns false the check-ins are left to the stand-in agent, which
// runs the node's WireGuard and writes what it really learned.
func (k *kiloStarts) start(ctx context.Context, c string, ref meshRef, n fixture.Node, checkIns bool) error {
	cl := kube[c]
	kubelet := n
	for _, a := range kiloWritten {
		kubelet = kubelet.Without(a)
	}
	// No heartbeat yet: "0" keeps fixture.Apply from writing one.
	kubelet = kubelet.With(kilov1alpha1.AnnotationLastSeen, "0")
	if err := fixture.Apply(ctx, cl, kubelet); err != nil {
		return err
	}
	first := map[string]string{}
	for _, a := range kiloWritten {
		first[a] = n.Annotations[a]
	}
	first[kilov1alpha1.AnnotationWireguardIP] = ""
	first[kilov1alpha1.AnnotationDiscoveredEndpoints] = ""
	first[kilov1alpha1.AnnotationLastSeen] = strconv.FormatInt(time.Now().Unix(), 10)
	if err := annotateNode(ctx, cl, n.Name, first); err != nil {
		return err
	}
	if err := annotateNode(ctx, cl, n.Name, map[string]string{kilov1alpha1.AnnotationWireguardIP: n.Annotations[kilov1alpha1.AnnotationWireguardIP]}); err != nil {
		return err
	}
	if !checkIns {
		return nil
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for i := 1; i <= 2; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(kiloCheckIn):
			}
			d := "{}"
			if i == 2 {
				var err error
				if d, err = handshakes(ctx, cl, ref); err != nil {
					return
				}
			}
			// A Node replaced in between is gone: nothing to write.
			_ = annotateNode(ctx, cl, n.Name, map[string]string{
				kilov1alpha1.AnnotationDiscoveredEndpoints: d,
				kilov1alpha1.AnnotationLastSeen:            strconv.FormatInt(time.Now().Unix(), 10),
			})
		}
	}()
	return nil
}

// wait waits for the check-ins start left running.
func (k *kiloStarts) wait() { k.wg.Wait() }

// annotateNode merges annotations into a Node, as Kilo's strategic merge
// patch does; a Node that is gone is no error.
func annotateNode(ctx context.Context, cl client.Client, name string, a map[string]string) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": a}})
	if err != nil {
		return err
	}
	n := fixture.Node{Name: name}.Object()
	if err := cl.Patch(ctx, n, client.RawPatch(types.MergePatchType, b)); err != nil && !kerrors.IsNotFound(err) {
		return fmt.Errorf("node %s: %w", name, err)
	}
	return nil
}

// handshakes is kilo.squat.ai/discovered-endpoints, in Kilo's form, of a
// leader that shook hands with every Peer of the mesh in its member, at
// the Peer's endpoint.
func handshakes(ctx context.Context, cl client.Client, ref meshRef) (string, error) {
	ps := &kilov1alpha1.PeerList{}
	if err := cl.List(ctx, ps); err != nil {
		return "", err
	}
	out := map[string]netip.AddrPort{}
	for i := range ps.Items {
		p := &ps.Items[i]
		if !stack.Owned(p, ref.ns, ref.name) || p.Spec.Endpoint == nil {
			continue
		}
		if a, err := netip.ParseAddr(p.Spec.Endpoint.DNSOrIP.IP); err == nil {
			out[p.Spec.PublicKey] = netip.AddrPortFrom(a, uint16(p.Spec.Endpoint.Port))
		}
	}
	return mesh.FormatDiscoveredEndpoints(out), nil
}

// testKiloStart starts nodes in members of the mesh as Kilo's agent starts
// them (kiloStarts; the stand-in agent runs their WireGuard and writes
// their check-ins with what they learned from handshakes), one at a time,
// and times each until its Peer is in every other member. Then it waits
// for two check-ins, the handshakes' writes. It reports the figures and
// the XR's watch events, and checks what must hold: every Peer arrives, and
// Crossplane's watch circuit breaker of the mesh stays closed throughout
// (Responsive=True at the end).
func testKiloStart(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	opens0, _ := metric(crossplaneMetrics(), "circuit_breaker_opens_total")
	xrTrace.take(ref.String())
	var (
		kilo   kiloStarts
		delays []time.Duration
		names  = map[string]string{}
	)
	for i := range 4 {
		src, octet := "cluster-a", 1
		if i%2 == 1 {
			src, octet = "cluster-c", 3
		}
		name := fmt.Sprintf("node-k%d", i)
		n := fixture.Full(name, fmt.Sprintf("10.%d.%d.0/24", octet, 160+i), fmt.Sprintf("192.168.%d.%d", octet, 160+i), fmt.Sprintf("10.%d.0.%d/16", 200+octet, 160+i)).
			With(kilov1alpha1.AnnotationEndpoint, fmt.Sprintf("192.0.2.%d:51820", 160+i))
		names[name] = src
		key, peer := n.Annotations[kilov1alpha1.AnnotationKey], peerName(ref, src, name)
		var ws []*waiter
		for _, m := range meshMembers {
			if m == src {
				continue
			}
			w, err := rec.expect(m, func(ps map[string]*kilov1alpha1.Peer) bool { p := ps[peer]; return p != nil && p.Spec.PublicKey == key })
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		t0 := time.Now()
		if err := kilo.start(ctx, src, ref, n, false); err != nil {
			t.Fatal(err)
		}
		var last time.Time
		for _, w := range ws {
			wctx, cancel := context.WithTimeout(ctx, convergeTimeout)
			at, err := w.wait(wctx)
			cancel()
			if err != nil {
				t.Fatalf("the Peer of %s, started as Kilo starts a node, did not reach every other member within %s", name, convergeTimeout)
			}
			if at.After(last) {
				last = at
			}
		}
		delays = append(delays, last.Sub(t0))
		report.sample(mode, "node started (Kilo's writes)", last.Sub(t0))
	}
	started, startEvents := tally(xrTrace.take(ref.String()))
	// Two check-ins: the stand-in agents write "{}" and then the endpoints
	// they learned from their handshakes with the new nodes.
	time.Sleep(2*kiloCheckIn + 5*time.Second)
	kilo.wait()
	after, afterEvents := tally(xrTrace.take(ref.String()))
	opens, _ := metric(crossplaneMetrics(), "circuit_breaker_opens_total")
	status, reason, msg, err := condition(ctx, ref, "Responsive")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(delays, func(a, b int) bool { return delays[a] < delays[b] })
	report.notef("%s: %d nodes started as Kilo starts them, one at a time: Peer in every other member p50 %.2fs, p95 %.2fs, max %.2fs; the XR's watch events: %d while they started (%.1f per node start: %s), %d in the %s of check-ins after (%s); breaker opens: %.0f; Responsive=%s %s",
		mode, len(delays), percentile(delays, 0.5).Seconds(), percentile(delays, 0.95).Seconds(), percentile(delays, 1).Seconds(),
		startEvents, float64(startEvents)/float64(len(delays)), started, afterEvents, 2*kiloCheckIn+5*time.Second, after, opens-opens0, status, reason)
	if opens > opens0 || status != "True" {
		t.Errorf("Crossplane's watch circuit breaker of the mesh opened while nodes started as Kilo starts them: %.0f opens; Responsive=%s %s: %s", opens-opens0, status, reason, msg)
	}
	for name, src := range names {
		if err := fixture.Delete(ctx, kube[src], name); err != nil {
			t.Error(err)
		}
	}
	waitConverged(ctx, t, ref, convergeTimeout)
}
