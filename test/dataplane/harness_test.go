package dataplane

import (
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// keyring makes key pairs from seeds and holds their private keys, as the
// fixture does for the stack.
type keyring map[string][32]byte

func (k keyring) key(seed string) string {
	priv := sha256.Sum256([]byte("harness test " + seed))
	priv[0] &= 248
	priv[31] = (priv[31] & 127) | 64
	p, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		panic(err)
	}
	pub := base64.StdEncoding.EncodeToString(p.PublicKey().Bytes())
	k[pub] = priv
	return pub
}

func (k keyring) lookup(pub string) ([32]byte, bool) {
	v, ok := k[pub]
	return v, ok
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// top is the top folder of the repository.
func top(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// apiServer starts a kube-apiserver with Kilo's Peer CRD.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	e := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(top(t), "test", "crds")}, ErrorIfCRDPathMissing: true}
	cfg, err := e.Start()
	if err != nil {
		t.Fatalf("cannot start an API server: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return cfg
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func create(ctx context.Context, t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func kiloNode(name, pod, internal, endpoint, granularity string, keys keyring) *corev1.Node {
	return nodefixture.New(name).Pods(pod).
		With(kilov1alpha1.AnnotationKey, keys.key(name)).
		With(kilov1alpha1.AnnotationInternalIP, internal).
		With(kilov1alpha1.AnnotationEndpoint, endpoint).
		With(kilov1alpha1.AnnotationGranularity, granularity).
		With(kilov1alpha1.AnnotationLocation, "dc1").
		Seen(time.Now()).Object()
}

func peer(name, key, endpointIP, endpointDNS string, port uint32, allowed ...string) *kilov1alpha1.Peer {
	return &kilov1alpha1.Peer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kilov1alpha1.PeerSpec{
			AllowedIPs: allowed,
			PublicKey:  key,
			Endpoint:   &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: endpointIP, DNS: endpointDNS}, Port: port},
		},
	}
}

// TestHarness runs two member clusters on real API servers: cluster-a with
// two nodes in full granularity, cluster-b with a leader and a non-leader
// in one location, and Peers written by hand for each other. Every pod
// reaches every pod of the other cluster; a Peer given a wrong key breaks
// exactly the pairs of its node; the heartbeat is written; Close leaves
// nothing behind.
func TestHarness(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: build the API servers with `test/tools/build.sh etcd kube` and run with KUBEBUILDER_ASSETS=$PWD/.cache/bin (make unit does both)")
	}
	if err := Requirements(); err != nil {
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
	// node-a9 and node-b9 run no Kilo (their keys are no keys): no Peer
	// routes their pods.
	a9 := kiloNode("node-a9", "10.1.9.0/24", "192.168.1.19/24", "203.0.113.19:51820", "full", keys)
	a9.Annotations[kilov1alpha1.AnnotationKey] = "not-a-key"
	b9 := kiloNode("node-b9", "10.2.9.0/24", "192.168.2.19/24", "198.51.100.29:51820", "location", keys)
	b9.Annotations[kilov1alpha1.AnnotationKey] = "not-a-key"
	// node-a8 stands for a control-plane test only: heartbeats, no agent.
	a8 := kiloNode("node-a8", "10.1.8.0/24", "192.168.1.18/24", "203.0.113.18:51820", "full", keys)
	a8.Labels = map[string]string{"test/heartbeat-only": "true"}
	a1 := peer("a-node-a1", keys.key("node-a1"), "203.0.113.11", "", 51820, "10.1.1.0/24")
	// The Peers a mesh would write: the location of cluster-b (led by
	// node-b1, the one with a public endpoint, reached by a name) into
	// cluster-a; each node of cluster-a into cluster-b.
	create(ctx, t, ca,
		kiloNode("node-a1", "10.1.1.0/24", "192.168.1.11/24", "203.0.113.11:51820", "full", keys),
		kiloNode("node-a2", "10.1.2.0/24", "192.168.1.12/24", "203.0.113.12:51820", "full", keys),
		a9,
		a8,
		peer("b-dc1", keys.key("node-b1"), "", "vpn-b.example.net", 51820, "10.2.1.0/24", "10.2.2.0/24"),
	)
	create(ctx, t, cb,
		kiloNode("node-b1", "10.2.1.0/24", "192.168.2.11/24", "198.51.100.21:51820", "location", keys),
		kiloNode("node-b2", "10.2.2.0/24", "192.168.2.12/24", "192.168.2.12:51820", "location", keys),
		b9,
		a1,
		peer("a-node-a2", keys.key("node-a2"), "203.0.113.12", "", 51820, "10.1.2.0/24"),
	)

	started := time.Now().Unix()
	var logs strings.Builder
	h, err := Start(ctx, Config{
		Dir:           t.TempDir(),
		WireguardGo:   wg,
		Members:       []Member{{Name: "cluster-a", Config: a, Subnet: "10.201.0.0/16"}, {Name: "cluster-b", Config: b, Subnet: "10.202.0.0/16"}},
		Hosts:         map[string]string{"vpn-b.example.net": "198.51.100.21"},
		Keys:          keys.lookup,
		Log:           func(f string, args ...any) { fmt.Fprintf(&logs, f+"\n", args...) },
		HeartbeatOnly: func(n *corev1.Node) bool { return n.Labels["test/heartbeat-only"] == "true" },
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
		t.Logf("harness log:\n%s", logs.String())
	}()

	t.Run("heartbeat", func(t *testing.T) {
		for _, c := range []client.Client{ca, cb} {
			waitFor(ctx, t, "a fresh kilo.squat.ai/last-seen on every node", func() (bool, string) {
				l := &corev1.NodeList{}
				if err := c.List(ctx, l); err != nil {
					return false, err.Error()
				}
				for _, n := range l.Items {
					s, _ := strconv.ParseInt(n.Annotations[kilov1alpha1.AnnotationLastSeen], 10, 64)
					if s < started {
						return false, fmt.Sprintf("%s: last-seen %d, before the harness started (%d)", n.Name, s, started)
					}
				}
				return true, ""
			})
		}
	})

	pairs := Between(Select(h.Pods(), map[string][]string{"cluster-a": {"node-a1", "node-a2"}, "cluster-b": {"node-b1", "node-b2"}}))
	if len(pairs) != 8 {
		t.Fatalf("want 8 pairs between the two clusters' 4 pods, got %d: %v", len(pairs), pairs)
	}
	t.Run("the nodes Kilo does not run are reached by no one, and reach no one", func(t *testing.T) {
		// Nothing routes to node-a9's and node-b9's pods: with every pod
		// probing them and them probing every pod, no packet may find its
		// way over the network between clusters either (no ARP for a pod
		// address there).
		var lone []Pair
		for _, p := range Between(h.Pods()) {
			if p.From.Node == "node-a9" || p.To.Node == "node-a9" || p.From.Node == "node-b9" || p.To.Node == "node-b9" {
				lone = append(lone, p)
			}
		}
		m := Matrix{Results: Run(ctx, lone, Probing{Tries: 24, Wait: 500 * time.Millisecond, Parallel: 32})}
		if len(m.Results) != 10 || m.Passed() != 0 {
			t.Errorf("a pod of a node without Kilo reached or was reached:\n%s", m)
		}
	})
	t.Run("every pod reaches every pod of the other cluster", func(t *testing.T) {
		m := Matrix{Results: Run(ctx, pairs, DefaultProbing)}
		if len(m.Failed()) > 0 {
			t.Errorf("pairs failed:\n%s\n%s", m, h.Dump(ctx))
		}
		t.Logf("\n%s", m)
	})

	t.Run("a Peer with a wrong key breaks exactly its pairs", func(t *testing.T) {
		wrong := keys.key("not node-a1")
		if err := cb.Get(ctx, client.ObjectKeyFromObject(a1), a1); err != nil {
			t.Fatal(err)
		}
		right := a1.Spec.PublicKey
		a1.Spec.PublicKey = wrong
		if err := cb.Update(ctx, a1); err != nil {
			t.Fatal(err)
		}
		waitForPeerKey(ctx, t, h, "cluster-b", "node-b1", wrong)
		m := Matrix{Results: Run(ctx, pairs, DefaultProbing)}
		var got []string
		for _, p := range m.Failed() {
			got = append(got, p.From.Node+" -> "+p.To.Node)
		}
		want := []string{"node-a1 -> node-b1", "node-a1 -> node-b2", "node-b1 -> node-a1", "node-b2 -> node-a1"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("failed pairs (-want +got):\n%s\n%s", diff, m)
		}

		a1.Spec.PublicKey = right
		if err := cb.Update(ctx, a1); err != nil {
			t.Fatal(err)
		}
		waitForPeerKey(ctx, t, h, "cluster-b", "node-b1", right)
		if m := (Matrix{Results: Run(ctx, pairs, DefaultProbing)}); len(m.Failed()) > 0 {
			t.Errorf("pairs failed once the key was right again:\n%s", m)
		}
	})

	t.Run("routes stay when the WireGuard IPs move", func(t *testing.T) {
		// A node whose location sorts first takes the first WireGuard IP
		// of cluster-a: node-a1's and node-a2's move, and the kernel drops
		// the routes of an interface that loses its last address.
		a0 := kiloNode("node-a0", "10.1.10.0/24", "192.168.1.10/24", "203.0.113.10:51820", "full", keys)
		if err := ca.Create(ctx, a0); err != nil {
			t.Fatal(err)
		}
		waitForPeerKey(ctx, t, h, "cluster-a", "node-a1", keys.key("node-a0"))
		waitForPeerKey(ctx, t, h, "cluster-a", "node-a2", keys.key("node-a0"))
		if m := (Matrix{Results: Run(ctx, pairs, DefaultProbing)}); len(m.Failed()) > 0 {
			t.Errorf("pairs failed once the WireGuard IPs moved:\n%s\n%s", m, h.Dump(ctx))
		}
	})

	t.Run("a heartbeat-only node has no machine and no agent sees it", func(t *testing.T) {
		for _, p := range h.Pods() {
			if p.Node == "node-a8" {
				t.Errorf("node-a8 is heartbeat-only, yet has a machine: %+v", p)
			}
		}
		d, err := h.Device(ctx, "cluster-a", "node-a1")
		if err != nil || d == nil {
			t.Fatalf("node-a1 has no interface: %v", err)
		}
		for _, p := range d.Peers {
			if p.PublicKey.String() == a8.Annotations[kilov1alpha1.AnnotationKey] {
				t.Errorf("node-a8 is heartbeat-only, yet node-a1 has it as a peer: %+v", p)
			}
		}
	})

	t.Run("the non-leader runs no WireGuard", func(t *testing.T) {
		d, err := h.Device(ctx, "cluster-b", "node-b2")
		if err != nil || d != nil {
			t.Errorf("node-b2 does not lead its location, yet has an interface: %v, %v", d, err)
		}
	})

	t.Run("Close removes everything", func(t *testing.T) {
		pods := h.Pods()
		h.Close()
		closed = true
		for _, p := range pods {
			if netnsExists(p.Netns) {
				t.Errorf("namespace %s is left", p.Netns)
			}
		}
		if netnsExists(h.hub) {
			t.Errorf("namespace %s is left", h.hub)
		}
		socks, _ := filepath.Glob(filepath.Join(socketDir, h.run+"*"))
		if len(socks) > 0 {
			t.Errorf("wireguard-go sockets are left: %v", socks)
		}
	})
}

// waitForPeerKey waits until a node's WireGuard interface has a peer with
// the key.
func waitForPeerKey(ctx context.Context, t *testing.T, h *Harness, cluster, node, key string) {
	t.Helper()
	waitFor(ctx, t, node+" has a peer with key "+key, func() (bool, string) {
		d, err := h.Device(ctx, cluster, node)
		if err != nil || d == nil {
			return false, fmt.Sprintf("no interface: %v", err)
		}
		for _, p := range d.Peers {
			if p.PublicKey.String() == key {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d peers, none with the key", len(d.Peers))
	})
}

// waitFor polls until ok, for at most a minute; ok says why not.
func waitFor(ctx context.Context, t *testing.T, what string, ok func() (bool, string)) {
	t.Helper()
	wait.Eventually(ctx, t, what, time.Minute, 100*time.Millisecond, func() (bool, error) {
		done, why := ok()
		return done, errors.New(why)
	})
}

// TestHeartbeatOnly runs a member without a data plane: its Nodes get
// Kilo's heartbeat, except a node whose agent is paused, and nothing is
// made on the machine.
func TestHeartbeatOnly(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: build the API servers with `test/tools/build.sh etcd kube` and run with KUBEBUILDER_ASSETS=$PWD/.cache/bin (make unit does both)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := apiServer(t)
	c := newClient(t, cfg)
	keys := keyring{}
	n1 := kiloNode("node-1", "10.4.1.0/24", "192.168.4.11/24", "203.0.113.41:51820", "full", keys)
	n2 := kiloNode("node-2", "10.4.2.0/24", "192.168.4.12/24", "203.0.113.42:51820", "full", keys)
	n1.Annotations[kilov1alpha1.AnnotationLastSeen], n2.Annotations[kilov1alpha1.AnnotationLastSeen] = "1", "1"
	create(ctx, t, c, n1, n2)

	h, err := Start(ctx, Config{Dir: t.TempDir(), Members: []Member{{Name: "cluster-d", Config: cfg}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// Start returned after the first heartbeat; node-2's agent stops, and
	// its heartbeat is made old again.
	h.Pause("cluster-d", "node-2")
	if err := c.Patch(ctx, n2, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kilo.squat.ai/last-seen":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := h.members[0].heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	l := &corev1.NodeList{}
	if err := c.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Items {
		seen[n.Name] = n.Annotations[kilov1alpha1.AnnotationLastSeen]
	}
	if s, _ := strconv.ParseInt(seen["node-1"], 10, 64); time.Now().Unix()-s > 60 {
		t.Errorf("node-1 got no fresh heartbeat: last-seen %q", seen["node-1"])
	}
	if len(h.Pods()) != 0 || h.hub != "" && netnsExists(h.hub) {
		t.Errorf("a member without a data plane got machines: %v", h.Pods())
	}
	h.Resume("cluster-d", "node-2")
	if err := h.members[0].heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Items {
		if n.Name == "node-2" && n.Annotations[kilov1alpha1.AnnotationLastSeen] == "1" {
			t.Errorf("node-2 got no heartbeat once its agent was resumed")
		}
	}
	if seen["node-2"] != "1" {
		t.Errorf("node-2's agent is paused, yet its heartbeat was written: last-seen %q", seen["node-2"])
	}

	// On an event, an agent writes its heartbeat at once when it is stale,
	// and leaves a fresh one alone.
	recent := strconv.FormatInt(time.Now().Unix()-10, 10)
	for name, v := range map[string]string{"node-1": "1", "node-2": recent} {
		n := &corev1.Node{}
		n.Name = name
		if err := c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kilo.squat.ai/last-seen":"`+v+`"}}}`))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := h.members[0].checkIn(ctx, l.Items, true); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Items {
		switch v := n.Annotations[kilov1alpha1.AnnotationLastSeen]; {
		case n.Name == "node-1" && v == "1":
			t.Errorf("node-1's stale heartbeat was not written again")
		case n.Name == "node-2" && v != recent:
			t.Errorf("node-2's fresh heartbeat (%s) was written again: %s", recent, v)
		}
	}
}
