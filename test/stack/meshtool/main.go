// Command meshtool works on a ClusterMesh of the local stack: it seeds the
// member clusters with Kilo Nodes, waits until every member holds exactly the
// Peers the planner computes from those Nodes, prints the Peers of every
// member and the ClusterMesh's status, runs the data-plane harness in place
// of Kilo's agents (test/dataplane) and probes which pods reach which.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// CLI of meshtool.
type CLI struct {
	StackDir string `default:".run/stack" env:"STACK_DIR" help:"Run folder of the stack."`

	Seed     SeedCmd     `cmd:"" help:"Create the fixture Nodes (test/stack/fixture) in the member clusters, and write Kilo's annotations on their real nodes."`
	Wait     WaitCmd     `cmd:"" help:"Wait until every member holds exactly the Peers the planner computes from its Nodes, and the ClusterMesh is Ready."`
	Show     ShowCmd     `cmd:"" help:"Print the Peers of every member and the ClusterMesh's status."`
	Agent    AgentCmd    `cmd:"" help:"Stand in for Kilo's agent on every Node of the members until stopped: a data plane of real WireGuard tunnels (test/dataplane) and Kilo's heartbeat."`
	Matrix   MatrixCmd   `cmd:"" help:"Probe, through the running agent's data plane, which members' pods reach which."`
	Pods     PodsCmd     `cmd:"" help:"Run pods on the members' real nodes and check that each reaches a pod and a Service of every other member across the mesh (test/stack/meshpods)."`
	Services ServicesCmd `cmd:"" help:"Ask, from each member's probe pod, for a Service another member exports on the mesh, by its clusterset.local name (docs/services.md)."`
}

// SeedCmd seeds Nodes.
type SeedCmd struct {
	Clusters []string `arg:"" optional:"" help:"Clusters to seed (default: every cluster the fixture has Nodes for and the stack has)."`
	Extra    bool     `help:"Seed cluster-d's Nodes too."`
}

// Run seeds.
func (c *SeedCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	sets := fixture.Mesh()
	if c.Extra {
		for k, v := range fixture.Extra() {
			sets[k] = v
		}
	}
	clusters := c.Clusters
	if len(clusters) == 0 {
		for _, cl := range env.Clusters() {
			if _, ok := sets[cl]; ok {
				clusters = append(clusters, cl)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cl := range clusters {
		nodes, ok := sets[cl]
		if !ok {
			return fmt.Errorf("the fixture has no nodes for %s", cl)
		}
		kc, err := env.Client(cl)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if err := fixture.Apply(ctx, kc, n); err != nil {
				return fmt.Errorf("%s: %w", cl, err)
			}
		}
		seeded, err := stack.SeedRealNode(ctx, env, cl, kc)
		if err != nil {
			return fmt.Errorf("%s: %w", cl, err)
		}
		if seeded {
			n, _ := env.RealNode(cl)
			fmt.Fprintf(os.Stderr, ">> %s: %d nodes, and Kilo's annotations on the real node %s\n", cl, len(nodes), n.Name)
		} else {
			fmt.Fprintf(os.Stderr, ">> %s: %d nodes\n", cl, len(nodes))
		}
	}
	return nil
}

// WaitCmd waits for a mesh.
type WaitCmd struct {
	Namespace string        `default:"network" short:"n" help:"Namespace of the ClusterMesh."`
	Name      string        `default:"mesh" help:"Name of the ClusterMesh."`
	Timeout   time.Duration `default:"3m" help:"How long to wait."`
}

// Run waits.
func (c *WaitCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	clients, err := env.Clients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	start := time.Now()
	last, printed := "", time.Now()
	err = wait.Poll(ctx, fmt.Sprintf("ClusterMesh %s/%s converged", c.Namespace, c.Name), c.Timeout, 500*time.Millisecond, func() (bool, error) {
		why := converged(ctx, clients, env.Management(), c.Namespace, c.Name)
		if why == "" {
			return true, nil
		}
		if why != last || time.Since(printed) > 15*time.Second {
			fmt.Fprintf(os.Stderr, ">> %5.1fs waiting: %s\n", time.Since(start).Seconds(), why)
			last, printed = why, time.Now()
		}
		return false, errors.New(why)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, ">> ClusterMesh %s/%s converged after %.1fs\n", c.Namespace, c.Name, time.Since(start).Seconds())
	return nil
}

// converged says why the mesh has not converged, or nothing: first every
// member must hold exactly the planned Peers, then the ClusterMesh must be
// Ready.
func converged(ctx context.Context, clients map[string]client.WithWatch, mgmt, namespace, name string) string {
	u, spec, err := stack.GetMesh(ctx, clients[mgmt], namespace, name)
	if err != nil {
		return err.Error()
	}
	plan, err := stack.Want(ctx, clients, namespace, name, spec)
	if err != nil {
		return "cannot plan: " + err.Error()
	}
	var members []string
	for _, m := range spec.Clusters {
		if _, ok := clients[m.Name]; ok {
			members = append(members, m.Name)
		}
	}
	held := func(m string) ([]kilov1alpha1.Peer, error) { return stack.MeshPeers(ctx, clients[m], namespace, name) }
	if why := stack.Mismatch(plan, members, held); why != "" {
		// The first line says which member; the difference is for the tests.
		first, _, _ := strings.Cut(why, "\n")
		return first
	}
	if s, text := condition(u, "Ready"); s != "True" {
		msg := "every member holds its Peers; the ClusterMesh is not Ready yet"
		if rs, rtext := condition(u, "Responsive"); rs == "False" {
			msg += " (Crossplane's watch circuit breaker is open: " + rtext + ")"
		} else if text != "" {
			msg += " (" + text + ")"
		}
		return msg
	}
	return ""
}

func condition(u *unstructured.Unstructured, typ string) (status, text string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		text = reason
		if msg != "" {
			text += ": " + msg
		}
		return status, text
	}
	return "", ""
}

// ShowCmd prints a mesh.
type ShowCmd struct {
	Namespace string `default:"network" short:"n" help:"Namespace of the ClusterMesh."`
	Name      string `default:"mesh" help:"Name of the ClusterMesh."`
}

// Run prints.
func (c *ShowCmd) Run(cli *CLI) error {
	env, err := stack.Load(cli.StackDir)
	if err != nil {
		return err
	}
	clients, err := env.Clients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, spec, err := stack.GetMesh(ctx, clients[env.Management()], c.Namespace, c.Name)
	if err != nil {
		return err
	}
	w := os.Stdout
	for _, m := range spec.Clusters {
		cl, ok := clients[m.Name]
		if !ok {
			fmt.Fprintf(w, "\n%s: not a cluster of this stack\n", m.Name)
			continue
		}
		peers, err := stack.Peers(ctx, cl)
		if err != nil {
			fmt.Fprintf(w, "\n%s: cannot list Peers: %v\n", m.Name, err)
			continue
		}
		printPeers(w, m.Name, peers, c.Namespace, c.Name)
	}
	printStatus(w, u)
	return nil
}

func printPeers(w io.Writer, member string, peers []kilov1alpha1.Peer, namespace, name string) {
	fmt.Fprintf(w, "\nPeers in %s:\n", member)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSOURCE\tENDPOINT\tKEEPALIVE\tALLOWED IPS")
	for i := range peers {
		p := &peers[i]
		src := p.Labels[meshv1alpha1.LabelSourceCluster]
		if !stack.Owned(p, namespace, name) {
			src = "(not of this mesh)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", p.Name, src, endpoint(p.Spec.Endpoint), p.Spec.PersistentKeepalive, strings.Join(p.Spec.AllowedIPs, ","))
	}
	_ = tw.Flush()
}

func endpoint(e *kilov1alpha1.PeerEndpoint) string {
	if e == nil {
		return "(roaming)"
	}
	host := e.DNSOrIP.IP
	if host == "" {
		host = e.DNSOrIP.DNS
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, e.Port)
}

func printStatus(w io.Writer, u *unstructured.Unstructured) {
	st := &meshv1alpha1.ClusterMeshStatus{}
	if raw, ok := u.Object["status"].(map[string]any); ok {
		_ = runtimeConvert(raw, st)
	}
	fmt.Fprintf(w, "\nClusterMesh %s/%s: %d clusters, %d Peers, %d skipped nodes\n", u.GetNamespace(), u.GetName(), st.ClusterCount, st.PeerCount, st.SkippedNodeCount)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	types := make([]string, 0, len(conds))
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			types = append(types, t)
		}
	}
	sort.Strings(types)
	for _, t := range types {
		s, text := condition(u, t)
		fmt.Fprintf(w, "  %-18s %-7s %s\n", t, s, text)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tREACHABLE\tNODES\tSEGMENTS\tPEERS OUT\tSKIPPED")
	for _, c := range st.Clusters {
		fmt.Fprintf(tw, "  %s\t%v\t%d\t%d\t%d\t%d\n", c.Name, c.Reachable, c.Nodes, c.Segments, c.Peers, c.SkippedNodes)
	}
	_ = tw.Flush()
	for _, c := range st.Clusters {
		for _, s := range c.Skipped {
			fmt.Fprintf(w, "  skipped %s/%s: %s: %s\n", c.Name, s.Node, s.Reason, s.Message)
		}
		for _, x := range c.Conflicts {
			fmt.Fprintf(w, "  not written into %s: %s: %s: %s\n", c.Name, x.Peer, x.Reason, x.Message)
		}
	}
}

func main() {
	cli := &CLI{}
	ctx := kong.Parse(cli, kong.Description("Seeds, waits for and shows a ClusterMesh of the local stack."))
	ctx.FatalIfErrorf(ctx.Run(cli))
}

// runtimeConvert decodes an unstructured value into a typed one.
func runtimeConvert(in map[string]any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
