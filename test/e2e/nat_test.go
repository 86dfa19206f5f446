//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/test/dataplane"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// The nodes of cluster-c that the data plane puts behind a NAT of their
// own (startDataplane): a home router in front of each, which masquerades
// what the node sends, lets in only replies, and forgets a UDP mapping idle
// for natTimeout. Each is its own segment's leader (cluster-c meshes by
// node). node-n carries kilo.squat.ai/persistent-keepalive, node-m does
// not.
const (
	natKept    = "node-n"
	natDropped = "node-m"
	natTimeout = 5 * time.Second
)

// natRouters are the routers' public addresses, by node.
var natRouters = map[string]netip.Addr{
	natKept:    netip.MustParseAddr("192.0.2.151"),
	natDropped: netip.MustParseAddr("192.0.2.152"),
}

// behindNAT is the data plane's Config.NAT.
func behindNAT(n *corev1.Node) *dataplane.NAT {
	if r, ok := natRouters[n.Name]; ok {
		return &dataplane.NAT{Public: r, UDPTimeout: natTimeout}
	}
	return nil
}

// testLeadersBehindNAT adds node-n and node-m to cluster-c behind NATs, with
// endpoints no other member can dial (addresses behind their routers).
// The other members reach them only at the addresses they learn from the
// nodes' handshakes, which Kilo keeps for a Peer with a keepalive (every
// Peer of examples/mesh.yaml: cluster-c's persistentKeepalive is the
// mesh's floor). Then, after longer idle than the routers keep a mapping,
// the others still reach node-n, whose own annotation makes its WireGuard
// send keepalives, and no longer node-m. (The mesh's NATWithoutKeepalive
// warning needs kilo.squat.ai/discovered-endpoints, which the e2e's
// stand-in agent does not publish at its check-ins: the render scenario
// roaming-and-discovered and fn/mesh's tests check it.)
func testLeadersBehindNAT(ctx context.Context, t *testing.T, mode string, ref meshRef) {
	n := fixture.Full(natKept, "10.3.51.0/24", "192.168.3.51", "10.203.0.51/16").
		With(kilov1alpha1.AnnotationEndpoint, "172.31.3.51:51820").
		With(kilov1alpha1.AnnotationPersistentKeepalive, "5")
	m := fixture.Full(natDropped, "10.3.52.0/24", "192.168.3.52", "10.203.0.52/16").
		With(kilov1alpha1.AnnotationEndpoint, "172.31.3.52:51820")
	for _, node := range []fixture.Node{n, m} {
		if err := fixture.Apply(ctx, kube["cluster-c"], node); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{natKept, natDropped} {
			if err := fixture.Delete(ctx, kube["cluster-c"], name); err != nil {
				t.Error(err)
			}
		}
		waitConverged(ctx, t, ref, convergeTimeout)
	})
	waitConverged(ctx, t, ref, convergeTimeout)
	for _, c := range []string{"cluster-a", "cluster-b"} {
		waitPeerKey(ctx, t, c, leaders[c], n.Annotations[kilov1alpha1.AnnotationKey])
		waitPeerKey(ctx, t, c, leaders[c], m.Annotations[kilov1alpha1.AnnotationKey])
	}
	nodes := reachable(map[string][]string{"cluster-c": {natKept, natDropped}})
	// Every pair passes while the mappings are fresh: the probes from the
	// nodes behind NAT start first (DefaultProbing's stagger) and open
	// them.
	packets(ctx, t, mode, "node-n and node-m behind NAT", nodes, nil)

	// Long enough for a mapping to time out after the last packet of the
	// probes and of WireGuard's passive keepalive (10 s after the last
	// data received).
	time.Sleep(10*time.Second + 4*natTimeout)
	var in []dataplane.Pair
	for _, p := range dataplane.Between(dataplane.Select(dp.Pods(), nodes)) {
		if (p.To.Node == natKept || p.To.Node == natDropped) && p.From.Cluster != "cluster-c" {
			in = append(in, p)
		}
	}
	res := dataplane.Matrix{Results: dataplane.Run(ctx, in, dataplane.Probing{Tries: 10, Wait: 500 * time.Millisecond, Parallel: 8})}
	report.notef("%s: packets into the nodes behind NAT after %s idle:\n%s", mode, 10*time.Second+4*natTimeout, strings.TrimRight(res.String(), "\n"))
	kept, dropped := 0, 0
	for _, r := range res.Results {
		switch {
		case r.To.Node == natKept && r.Err != nil:
			t.Errorf("%s no longer reaches %s, whose kilo.squat.ai/persistent-keepalive should keep its router's mapping open: %v", r.From.Node, natKept, r.Err)
		case r.To.Node == natKept:
			kept++
		case r.To.Node == natDropped && r.Err == nil:
			t.Errorf("%s still reaches %s, which sends no keepalives: its router's mapping should have timed out", r.From.Node, natDropped)
		default:
			dropped++
		}
	}
	if kept == 0 || dropped == 0 {
		t.Errorf("want pairs into both nodes behind NAT, got %d into %s and %d into %s:\n%s", kept, natKept, dropped, natDropped, res)
	}
}
