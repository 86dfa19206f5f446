//go:build realnodes

package realnodes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/test/dataplane"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
	"github.com/kilomesh/kilomesh/test/stack/meshpods"
)

// TestPodsAcrossTheMesh joins the real node of three members to
// examples/mesh.yaml, with the fixture's Nodes beside them, and runs the
// data-plane harness in place of Kilo's agents (in the real nodes' own
// namespaces): from a client pod of every member, an HTTP request reaches
// a pod of every other member by its pod IP, and a Service of every other
// member by Kilo's multi-cluster Services recipe, through the WireGuard
// tunnels of the real nodes. Before the mesh exists, none does.
func TestPodsAcrossTheMesh(t *testing.T) {
	members := []string{"cluster-a", "cluster-b", "cluster-c"}
	run(t, members, func(top, dir string) {
		ctx := t.Context()
		if err := script(t, top, dir, "crossplane-up.sh"); err != nil {
			t.Fatalf("crossplane-up.sh: %v", err)
		}
		if err := script(t, top, dir, "providerconfigs.sh", append([]string{"network"}, members...)...); err != nil {
			t.Fatalf("providerconfigs.sh: %v", err)
		}
		env, err := stack.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		clients := map[string]client.Client{}
		for _, c := range members {
			cl, err := env.Client(c)
			if err != nil {
				t.Fatal(err)
			}
			clients[c] = cl
			for _, n := range fixture.Mesh()[c] {
				if err := fixture.Apply(ctx, cl, n); err != nil {
					t.Fatalf("%s: %v", c, err)
				}
			}
			if ok, err := stack.SeedRealNode(ctx, env, c, cl); err != nil || !ok {
				t.Fatalf("%s: Kilo's annotations on the real node: %v (has one: %v)", c, err, ok)
			}
		}
		h := startDataplane(t, top, env, members)
		defer h.Close()

		pods, err := meshpods.Deploy(ctx, clients)
		if err != nil {
			t.Fatalf("the real pods: %v", err)
		}
		t.Run("nothing crosses before the mesh", func(t *testing.T) {
			m := pods.Run(ctx, pods.Pairs(), meshpods.Probing{Tries: 1})
			if len(m.Failed()) != len(m.Results) {
				t.Errorf("pods of different members reach each other without a mesh:\n%s", m)
			}
		})

		// The mesh, as docs/install.md applies it (it waits until the
		// mesh is Ready); meanwhile a pod of cluster-a asks a pod of
		// cluster-b until it answers.
		applied := time.Now()
		var wg sync.WaitGroup
		var applyErr error
		wg.Go(func() { applyErr = script(t, top, dir, "doc.sh", "docs/install.md", "mesh") })
		first := pods.Run(ctx, []meshpods.Pair{{From: "cluster-a", To: "cluster-b", Kind: meshpods.ToPod}}, meshpods.Probing{Tries: 1500, Wait: 200 * time.Millisecond})
		took := time.Since(applied)
		wg.Wait()
		if applyErr != nil {
			t.Fatalf("docs/install.md mesh: %v", applyErr)
		}
		if len(first.Failed()) > 0 {
			t.Fatalf("a pod of cluster-a never reached one of cluster-b:\n%s\n%s", first, h.Dump(ctx))
		}
		t.Logf("the first request of a pod of cluster-a to a pod of cluster-b passed %.1fs after the mesh was applied (%d tries)", took.Seconds(), first.Results[0].Tries)
		if err := meshtool(t, top, dir, "wait", "--namespace", "network", "--name", "mesh", "--timeout", "5m"); err != nil {
			t.Fatalf("the ClusterMesh did not converge: %v", err)
		}

		t.Run("every member reaches a pod and a Service of every other member", func(t *testing.T) {
			start := time.Now()
			m := pods.Run(ctx, pods.Pairs(), meshpods.DefaultProbing)
			t.Logf("%d requests in %.1fs:\n%s", len(m.Results), time.Since(start).Seconds(), m)
			if len(m.Failed()) > 0 {
				t.Errorf("requests failed:\n%s", h.Dump(ctx))
			}
		})
		t.Run("through the real nodes' tunnels", func(t *testing.T) {
			// Every real node shook hands with every other one: the
			// requests took their WireGuard interfaces.
			for _, c := range members {
				d, err := h.Device(ctx, c, c+"-node")
				if err != nil || d == nil {
					t.Fatalf("%s-node runs no WireGuard: %v", c, err)
				}
				for _, o := range members {
					if o == c {
						continue
					}
					key := fixture.Key(o + "-node")
					shook := false
					for _, p := range d.Peers {
						shook = shook || p.PublicKey.String() == key && !p.LastHandshake.IsZero()
					}
					if !shook {
						t.Errorf("%s-node has no handshake with %s-node (%s)", c, o, key)
					}
				}
			}
		})
		h.Close()
	})
}

// startDataplane runs the data-plane harness for the members as the
// end-to-end tests run it, the real nodes in their own namespaces; its log
// goes to the run folder.
func startDataplane(t *testing.T, top string, env *stack.Env, members []string) *dataplane.Harness {
	t.Helper()
	ms, err := stack.DataplaneMembers(env, members, true)
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "dataplane.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	var mu sync.Mutex
	h, err := dataplane.Start(t.Context(), dataplane.Config{
		Dir:         filepath.Join(env.Dir, "dataplane"),
		WireguardGo: filepath.Join(top, ".cache", "bin", "wireguard-go"),
		Members:     ms,
		Hosts:       fixture.Hosts(),
		Keys:        fixture.PrivateKey,
		Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(logf, time.Now().Format(time.TimeOnly)+" "+format+"\n", args...)
		},
	})
	if err != nil {
		t.Fatalf("the data-plane harness: %v", err)
	}
	return h
}

// meshtool builds test/stack/meshtool into the run folder once and runs it
// on the stack.
func meshtool(t *testing.T, top, dir string, args ...string) error {
	t.Helper()
	bin := filepath.Join(dir, "meshtool")
	if _, err := os.Stat(bin); err != nil {
		build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./test/stack/meshtool")
		build.Dir = top
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building meshtool: %w\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "STACK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("meshtool %s:\n%s", strings.Join(args, " "), out)
	return err
}
