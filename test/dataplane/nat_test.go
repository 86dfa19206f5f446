package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// natTimeout is how long the routers of TestNAT keep a UDP mapping without
// a packet; keepalive is the keepalive, in seconds, of the node that sends
// keepalives and of every Peer. The mapping outlives several keepalives.
const (
	natTimeout = 5 * time.Second
	keepalive  = 1
)

// TestNAT puts the nodes of cluster-a behind NAT, each behind a router of
// its own: node-a1 carries kilo.squat.ai/persistent-keepalive, node-a2 does
// not. Their Node endpoints are their private addresses, which cluster-b
// cannot dial; cluster-b's node-b1 has a public endpoint. Every Peer has a
// keepalive, in both clusters, as a mesh with a NAT'd member gets it.
//
// As in Kilo, the keepalive that WireGuard sends is the local node's
// annotation, never a Peer's: once the routers' mappings have timed out,
// node-b1 still reaches node-a1, whose WireGuard kept its mapping open, and
// no longer reaches node-a2. A Peer's keepalive only makes Kilo keep the
// endpoint WireGuard learned from a handshake: node-b1 keeps node-a1's
// address behind its router across a resync, and forgets it for the Peer's
// own endpoint once the Peer's keepalive is 0.
func TestNAT(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: build the API servers with `test/tools/build.sh etcd kube` and run with KUBEBUILDER_ASSETS=$PWD/.cache/bin (make unit does both)")
	}
	if err := Requirements(); err != nil {
		t.Fatal(err)
	}
	if err := natRequirements(); err != nil {
		t.Fatal(err)
	}
	wg := filepath.Join(top(t), ".cache", "bin", "wireguard-go")
	if _, err := os.Stat(wg); err != nil {
		t.Fatalf("build wireguard-go first (test/tools/build.sh wireguard-go, which make unit runs): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := apiServer(t), apiServer(t)
	ca, cb := newClient(t, a), newClient(t, b)
	keys := keyring{}

	// The routers' public addresses, by node.
	routers := map[string]netip.Addr{"node-a1": netip.MustParseAddr("203.0.113.101"), "node-a2": netip.MustParseAddr("203.0.113.102")}
	a1 := kiloNode("node-a1", "10.1.1.0/24", "192.168.1.11/24", "192.168.77.2:51820", "full", keys)
	a1.Annotations[kilov1alpha1.AnnotationPersistentKeepalive] = strconv.Itoa(keepalive)
	a2 := kiloNode("node-a2", "10.1.2.0/24", "192.168.1.12/24", "192.168.78.2:51821", "full", keys)
	withKeepalive := func(p *kilov1alpha1.Peer) *kilov1alpha1.Peer {
		p.Spec.PersistentKeepalive = keepalive
		return p
	}
	// The Peers of node-a1 and node-a2 carry the endpoints their Nodes
	// name, as kilomesh writes them: addresses behind the routers.
	peerA1 := withKeepalive(peer("a-node-a1", keys.key("node-a1"), "192.168.77.2", "", 51820, "10.1.1.0/24"))
	create(ctx, t, ca, a1, a2, withKeepalive(peer("b-node-b1", keys.key("node-b1"), "198.51.100.21", "", 51820, "10.2.1.0/24")))
	create(ctx, t, cb,
		kiloNode("node-b1", "10.2.1.0/24", "192.168.2.11/24", "198.51.100.21:51820", "full", keys),
		peerA1,
		withKeepalive(peer("a-node-a2", keys.key("node-a2"), "192.168.78.2", "", 51821, "10.1.2.0/24")),
	)

	var logs strings.Builder
	h, err := Start(ctx, Config{
		Dir:         t.TempDir(),
		WireguardGo: wg,
		Members:     []Member{{Name: "cluster-a", Config: a, Subnet: "10.201.0.0/16"}, {Name: "cluster-b", Config: b, Subnet: "10.202.0.0/16"}},
		Keys:        keys.lookup,
		Log:         func(f string, args ...any) { fmt.Fprintf(&logs, f+"\n", args...) },
		NAT: func(n *corev1.Node) *NAT {
			if r, ok := routers[n.Name]; ok {
				return &NAT{Public: r, UDPTimeout: natTimeout}
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		h.Close()
		t.Logf("harness log:\n%s", logs.String())
	}()

	pods := Select(h.Pods(), map[string][]string{"cluster-a": {"node-a1", "node-a2"}, "cluster-b": {"node-b1"}})
	var out, in []Pair
	for _, p := range Between(pods) {
		if p.From.Cluster == "cluster-a" {
			out = append(out, p)
		} else {
			in = append(in, p)
		}
	}
	if len(out) != 2 || len(in) != 2 {
		t.Fatalf("want 2 pairs each way between node-a1, node-a2 and node-b1, got %v and %v", out, in)
	}

	t.Run("the nodes behind NAT reach node-b1, which learns their routers' addresses", func(t *testing.T) {
		// Probes from node-b1 start a second later (DefaultProbing's
		// stagger), once the nodes behind NAT made their handshakes.
		m := Matrix{Results: Run(ctx, append(out, in...), DefaultProbing)}
		if len(m.Failed()) > 0 {
			t.Fatalf("pairs failed:\n%s\n%s", m, h.Dump(ctx))
		}
		for node, r := range routers {
			e := endpointOf(ctx, t, h, "cluster-b", "node-b1", keys.key(node))
			if e.Addr() != r {
				t.Errorf("node-b1 has endpoint %s for %s, want the address of its router, %s", e, node, r)
			}
			// No NAT on node-b1's side: what the nodes behind NAT learned
			// for it is its own endpoint.
			want := netip.MustParseAddrPort("198.51.100.21:51820")
			if e := endpointOf(ctx, t, h, "cluster-a", node, keys.key("node-b1")); e != want {
				t.Errorf("%s has endpoint %s for node-b1, want %s", node, e, want)
			}
		}
	})

	t.Run("after the mappings time out, node-b1 reaches only the node whose own annotation sends keepalives", func(t *testing.T) {
		// Long enough for a mapping to time out after the last packet of
		// the probes and of WireGuard's passive keepalive, which node-b1
		// sends 10 s after the last data it received.
		time.Sleep(10*time.Second + 4*natTimeout)
		m := Matrix{Results: Run(ctx, in, Probing{Tries: 10, Wait: 500 * time.Millisecond, Parallel: 2})}
		got := map[string]bool{}
		for _, r := range m.Results {
			got[r.To.Node] = r.Err == nil
		}
		if !got["node-a1"] {
			t.Errorf("node-b1 no longer reaches node-a1, whose kilo.squat.ai/persistent-keepalive should keep its mapping open:\n%s\n%s", m, h.Dump(ctx))
		}
		if got["node-a2"] {
			t.Errorf("node-b1 still reaches node-a2, which has no kilo.squat.ai/persistent-keepalive: a Peer's keepalive sent keepalives, which Kilo never does:\n%s\n%s", m, h.Dump(ctx))
		}
	})

	t.Run("a Peer's keepalive keeps the learned endpoint across Kilo's resync; without it the Peer's endpoint is back", func(t *testing.T) {
		learned := endpointOf(ctx, t, h, "cluster-b", "node-b1", keys.key("node-a1"))
		if learned.Addr() != routers["node-a1"] {
			t.Fatalf("node-b1 has endpoint %s for node-a1, want one it learned behind %s", learned, routers["node-a1"])
		}
		if err := h.resync(ctx, "cluster-b"); err != nil {
			t.Fatal(err)
		}
		if e := endpointOf(ctx, t, h, "cluster-b", "node-b1", keys.key("node-a1")); e != learned {
			t.Errorf("with the Peer's keepalive, node-b1's endpoint for node-a1 after a resync is %s, want the learned %s", e, learned)
		}

		if err := cb.Get(ctx, client.ObjectKeyFromObject(peerA1), peerA1); err != nil {
			t.Fatal(err)
		}
		peerA1.Spec.PersistentKeepalive = 0
		if err := cb.Update(ctx, peerA1); err != nil {
			t.Fatal(err)
		}
		// The resync must see the changed Peer.
		waitFor(ctx, t, "the harness's view of Peer a-node-a1 without a keepalive", func() (bool, string) {
			p := &kilov1alpha1.Peer{}
			if err := h.members[1].cache.Get(ctx, client.ObjectKeyFromObject(peerA1), p); err != nil {
				return false, err.Error()
			}
			return p.Spec.PersistentKeepalive == 0, fmt.Sprintf("keepalive %d", p.Spec.PersistentKeepalive)
		})
		if err := h.resync(ctx, "cluster-b"); err != nil {
			t.Fatal(err)
		}
		want := netip.MustParseAddrPort("192.168.77.2:51820")
		if e := endpointOf(ctx, t, h, "cluster-b", "node-b1", keys.key("node-a1")); e != want {
			t.Errorf("without the Peer's keepalive, node-b1's endpoint for node-a1 after a resync is %s, want the Peer's own %s", e, want)
		}
	})
}

// endpointOf is the endpoint a node's WireGuard interface has for the peer
// with a key.
func endpointOf(ctx context.Context, t *testing.T, h *Harness, cluster, node, key string) netip.AddrPort {
	t.Helper()
	d, err := h.Device(ctx, cluster, node)
	if err != nil || d == nil {
		t.Fatalf("%s has no interface: %v", node, err)
	}
	for _, p := range d.Peers {
		if p.PublicKey.String() == key {
			return p.Endpoint
		}
	}
	t.Fatalf("%s has no peer with key %s", node, key)
	return netip.AddrPort{}
}
