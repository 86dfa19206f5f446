package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/dataplane"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
	"github.com/kilomesh/kilomesh/test/stack/meshpods"
)

// dataplaneDir is the harness's folder in a stack's run folder.
func dataplaneDir(env *stack.Env) string { return filepath.Join(env.Dir, "dataplane") }

// AgentCmd runs the data-plane harness for the stack.
type AgentCmd struct {
	Clusters      []string `arg:"" optional:"" help:"Members to run (default: every cluster of the stack)."`
	HeartbeatOnly bool     `help:"Only write Kilo's heartbeat on every Node: no data plane (it needs root and /dev/net/tun)."`
	Discovered    bool     `default:"true" negatable:"" help:"Write, at every check-in, the endpoints each agent learned from handshakes (kilo.squat.ai/discovered-endpoints), as Kilo's agent does."`
}

// Run runs the harness until it is told to stop (SIGTERM or SIGINT).
func (c *AgentCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	clusters := c.Clusters
	if len(clusters) == 0 {
		clusters = env.Clusters()
	}
	cfg := dataplane.Config{
		Dir:         dataplaneDir(env),
		WireguardGo: filepath.Join(env.Vars["STACK_BIN"], "wireguard-go"),
		Hosts:       fixture.Hosts(),
		Keys:        fixture.PrivateKey,
		Log:         log.New(os.Stderr, "", log.LstdFlags).Printf,
		Discovered:  c.Discovered,
	}
	// A member without Kilo's Peer has no Kilo to stand in for; it gets
	// heartbeats only. A real node's agent runs in the node's namespace.
	if cfg.Members, err = stack.DataplaneMembers(env, clusters, !c.HeartbeatOnly); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	h, err := dataplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	cfg.Log("running the agents of %s (data plane: %v)", strings.Join(clusters, ", "), !c.HeartbeatOnly)
	<-ctx.Done()
	cfg.Log("stopping")
	h.Close()
	return nil
}

// MatrixCmd probes the pods of the running harness.
type MatrixCmd struct {
	All     bool          `help:"Probe every pod, also those of the nodes the mesh leaves out on purpose."`
	Timeout time.Duration `default:"60s" help:"How long to wait for the harness to run."`
}

// errUnreached says that some pairs got no echo.
var errUnreached = errors.New("some pods do not reach each other")

// Run probes from every pod to every pod of every other member and prints
// the matrix.
func (c *MatrixCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout+5*time.Minute)
	defer cancel()
	var st *dataplane.State
	err = wait.Poll(ctx, "a data plane to probe", c.Timeout, 500*time.Millisecond, func() (bool, error) {
		var err error
		if st, err = dataplane.LoadState(dataplaneDir(env)); err != nil {
			return false, err
		}
		if len(st.Pods) == 0 {
			return false, errors.New("it runs no pods (meshtool agent --heartbeat-only?)")
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	pods := st.Pods
	var out []string
	if !c.All {
		pods = dataplane.Select(st.Pods, fixture.Reachable())
		kept := map[string]bool{}
		for _, p := range pods {
			kept[p.Cluster+"/"+p.Node] = true
		}
		for _, p := range st.Pods {
			if !kept[p.Cluster+"/"+p.Node] {
				out = append(out, p.Cluster+"/"+p.Node)
			}
		}
		sort.Strings(out)
	}
	start := time.Now()
	m := dataplane.Matrix{Results: dataplane.Run(ctx, dataplane.Between(pods), dataplane.DefaultProbing)}
	w := os.Stdout
	fmt.Fprintf(w, "\nPods reaching the pods of the other members through WireGuard (UDP echo; pairs passed/tried, %.1fs):\n", time.Since(start).Seconds())
	m.Write(w)
	if len(out) > 0 {
		fmt.Fprintf(w, "  not probed, left out of the mesh on purpose: %s (--all probes them too)\n", strings.Join(out, ", "))
	}
	if len(m.Failed()) > 0 {
		return errUnreached
	}
	return nil
}

// PodsCmd runs the real pods' check (test/stack/meshpods).
type PodsCmd struct {
	Clusters   []string      `arg:"" optional:"" help:"Members to check (default: every cluster of the stack with a real node)."`
	DeployOnly bool          `help:"Only write the pods and Services and wait until the pods are ready; ask nothing."`
	Timeout    time.Duration `default:"3m" help:"How long to wait for the pods."`
}

// realNodeClusters are the clusters of the stack with a real node, but
// except.
func realNodeClusters(env *stack.Env, except string) []string {
	var out []string
	for _, cl := range env.Clusters() {
		if _, ok := env.RealNode(cl); ok && cl != except {
			out = append(out, cl)
		}
	}
	return out
}

// clientsOf returns a client of each cluster, as its admin.
func clientsOf(env *stack.Env, clusters []string) (map[string]client.Client, error) {
	clients := map[string]client.Client{}
	for _, cl := range clusters {
		c, err := env.Client(cl)
		if err != nil {
			return nil, err
		}
		clients[cl] = c
	}
	return clients, nil
}

// errPodsUnreached says that some real pods do not reach another member.
var errPodsUnreached = errors.New("some real pods do not reach another member")

// Run deploys the check's pods and, unless told not to, asks every pair.
func (c *PodsCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	clusters := c.Clusters
	if len(clusters) == 0 {
		clusters = realNodeClusters(env, "")
	}
	if len(clusters) < 2 {
		return errors.New("the check needs two clusters with a real node (STACK_REAL_NODES=1)")
	}
	clients, err := clientsOf(env, clusters)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	start := time.Now()
	pods, err := meshpods.Deploy(ctx, clients)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, ">> real pods ready in namespace %s of %s after %.1fs\n", meshpods.Namespace, strings.Join(clusters, ", "), time.Since(start).Seconds())
	if c.DeployOnly {
		return nil
	}
	start = time.Now()
	m := pods.Run(context.Background(), pods.Pairs(), meshpods.DefaultProbing)
	fmt.Printf("\nReal pods reaching the other members across the mesh (an HTTP GET from each member's probe pod, %.1fs):\n"+
		"  pod: the other member's hello pod at its pod IP; svc: the Service hello-<member> of the client's member,\n"+
		"  without a selector, whose Endpoints name the other member's hello ClusterIP (Kilo's multi-cluster Services)\n", time.Since(start).Seconds())
	m.Write(os.Stdout)
	if len(m.Failed()) > 0 {
		return errPodsUnreached
	}
	return nil
}
