package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nodeNamespace is a network namespace made the way test/stack/node.sh
// makes a real node's: eth0 with the node's address (its other end stays
// in the namespace, where nothing answers), a route of the cluster's
// service CIDR on it, a CNI-like bridge kmcni0 with the gateway of the pod
// CIDR, and one pod in a namespace of its own behind the bridge, which
// echoes on EchoPort.
type nodeNamespace struct {
	ns, podNS string
	pod       Pod
}

func makeNodeNamespace(ctx context.Context, t *testing.T, cluster string) *nodeNamespace {
	t.Helper()
	id := make([]byte, 2)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	n := &nodeNamespace{ns: "kmt" + hex.EncodeToString(id) + "-node", podNS: "kmt" + hex.EncodeToString(id) + "-pod"}
	t.Cleanup(func() {
		for _, ns := range []string{n.podNS, n.ns} {
			if netnsExists(ns) {
				_ = ipCmd(context.WithoutCancel(ctx), "netns", "delete", ns)
			}
		}
	})
	for _, ns := range []string{n.ns, n.podNS} {
		if err := ipCmd(ctx, "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := sysctls(n.ns, [][2]string{{"ipv4/ip_forward", "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := ipBatch(ctx, n.ns, []string{
		"link set lo up",
		"link add eth0 type veth peer name eth0-far",
		"address add 10.224.255.2/30 dev eth0",
		"link set eth0 up",
		"link set eth0-far up",
		"route add 10.101.0.0/16 dev eth0",
		"link add kmcni0 type bridge",
		"address add 10.1.224.1/24 dev kmcni0",
		"link set kmcni0 up",
		"link add vethpod0 type veth peer name eth0 netns " + n.podNS,
		"link set vethpod0 master kmcni0 up",
	}); err != nil {
		t.Fatal(err)
	}
	if err := ipBatch(ctx, n.podNS, []string{
		"link set lo up",
		"address add 10.1.224.2/24 dev eth0",
		"link set eth0 up",
		"route add default via 10.1.224.1",
	}); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.1.224.2")
	err := inNetns(n.podNS, func() error {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: addr.AsSlice(), Port: EchoPort})
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = c.Close() })
		go echo(c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.pod = Pod{Cluster: cluster, Node: "real-a", Netns: n.podNS, Addr: addr}
	return n
}

// snapshot describes a namespace: its links, IPv4 addresses and routes (the
// harness's family; IPv6 link-local addresses come and go on their own), and
// the settings the harness sets on its own machines.
func snapshot(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"-o", "link"}, {"-4", "-br", "address"}, {"-4", "route", "show", "table", "all"}} {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			switch {
			case args[0] == "-o" && len(f) > 1:
				// A link by its name (no index, peer or carrier state).
				name, _, _ := strings.Cut(f[1], "@")
				f = []string{name}
			case args[1] == "-br" && len(f) > 1:
				// An address by its link, without the link's state.
				f = append(f[:1], f[2:]...)
			}
			b.WriteString(strings.Join(f, " ") + "\n")
		}
	}
	for _, k := range []string{"ipv4/ip_forward", "ipv4/conf/all/arp_ignore", "ipv4/conf/default/arp_ignore", "ipv4/conf/all/rp_filter", "ipv4/conf/default/rp_filter"} {
		v, err := readSysctl(ns, k)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.String()
}

// TestAdopted runs a node whose network namespace the harness did not make
// (as a real node of the stack): its pod, behind its own bridge, reaches a
// pod of another cluster through the WireGuard interface the harness runs
// in the node's namespace, and is reached from it; a Peer that claims a
// range the node routes on its own leaves that route as it is; and Close
// leaves the namespace exactly as it was.
func TestAdopted(t *testing.T) {
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
	node := makeNodeNamespace(ctx, t, "cluster-a")
	before := snapshot(ctx, t, node.ns)

	a, b := apiServer(t), apiServer(t)
	ca, cb := newClient(t, a), newClient(t, b)
	keys := keyring{}
	// The node's own link, 10.224.255.0/30, is claimed by a Peer as well:
	// the node keeps its route.
	create(ctx, t, ca,
		kiloNode("node-a1", "10.1.1.0/24", "192.168.1.11/24", "203.0.113.11:51820", "full", keys),
		kiloNode("real-a", "10.1.224.0/24", "10.224.255.2/30", "203.0.113.224:51820", "full", keys),
		peer("b-node-b1", keys.key("node-b1"), "198.51.100.21", "", 51820, "10.2.1.0/24", "10.224.255.0/30"),
	)
	create(ctx, t, cb,
		kiloNode("node-b1", "10.2.1.0/24", "192.168.2.11/24", "198.51.100.21:51820", "full", keys),
		peer("a-node-a1", keys.key("node-a1"), "203.0.113.11", "", 51820, "10.1.1.0/24"),
		peer("a-real-a", keys.key("real-a"), "203.0.113.224", "", 51820, "10.1.224.0/24", "10.101.0.0/16"),
	)
	var logs strings.Builder
	h, err := Start(ctx, Config{
		Dir:         t.TempDir(),
		WireguardGo: wg,
		Members: []Member{
			{Name: "cluster-a", Config: a, Subnet: "10.201.0.0/16", Netns: map[string]string{"real-a": node.ns}},
			{Name: "cluster-b", Config: b, Subnet: "10.202.0.0/16"},
		},
		Keys: keys.lookup,
		Log:  func(f string, args ...any) { fmt.Fprintf(&logs, f+"\n", args...) },
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

	t.Run("the node gets no machine of the harness's own", func(t *testing.T) {
		for _, p := range h.Pods() {
			if p.Node == "real-a" {
				t.Errorf("the harness gave real-a a pod address: %+v", p)
			}
		}
		if d, err := h.Device(ctx, "cluster-a", "real-a"); err != nil || d == nil {
			t.Fatalf("real-a leads its segment, yet runs no WireGuard: %v", err)
		}
	})

	t.Run("the node's pod reaches the other cluster and is reached from it", func(t *testing.T) {
		pods := append(Select(h.Pods(), map[string][]string{"cluster-a": {"node-a1"}, "cluster-b": {"node-b1"}}), node.pod)
		pairs := Between(pods)
		if len(pairs) != 4 {
			t.Fatalf("want 4 pairs, got %v", pairs)
		}
		m := Matrix{Results: Run(ctx, pairs, DefaultProbing)}
		if len(m.Failed()) > 0 {
			t.Errorf("pairs failed:\n%s\n%s", m, h.Dump(ctx))
		}
		t.Logf("\n%s", m)
	})

	t.Run("the routes the node has stay its own", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "ip", "-n", node.ns, "route", "show", "exact", "10.224.255.0/30").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dev eth0 proto kernel") {
			t.Errorf("the node's route of its own link changed: %v %q", err, out)
		}
		out, err = exec.CommandContext(ctx, "ip", "-n", node.ns, "route", "show", "exact", "10.2.1.0/24").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "proto static") {
			t.Errorf("no route of the harness to the other cluster's pods: %v %q", err, out)
		}
		if !strings.Contains(logs.String(), "left to it: [10.224.255.0/30]") {
			t.Errorf("the harness did not say which route it left to the node:\n%s", logs.String())
		}
	})

	t.Run("a Peer removed takes its routes along", func(t *testing.T) {
		p := peer("b-node-b1", "", "", "", 0)
		if err := ca.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the route to 10.2.1.0/24 in the node's namespace gone", func() (bool, string) {
			out, err := exec.CommandContext(ctx, "ip", "-n", node.ns, "route", "show", "exact", "10.2.1.0/24").CombinedOutput()
			return err == nil && len(strings.TrimSpace(string(out))) == 0, string(out)
		})
	})

	t.Run("Close leaves the namespace as it was", func(t *testing.T) {
		h.shutdown(ctx)
		closed = true
		if !netnsExists(node.ns) {
			t.Fatalf("Close deleted the node's namespace %s", node.ns)
		}
		if diff := cmp.Diff(before, snapshot(ctx, t, node.ns)); diff != "" {
			t.Errorf("the node's namespace after Close (-before +after):\n%s", diff)
		}
	})
}
