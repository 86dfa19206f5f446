package stack

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/test/dataplane"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// A RealNode is the real node of a cluster of a stack started with
// STACK_REAL_NODES=1 (node.sh): a kubelet, containerd and pods in a network
// namespace of their own.
type RealNode struct {
	Name string
	// Netns is the network namespace the node lives in.
	Netns string
	// InternalIP is the node's address with the prefix of its link to the
	// host, a /30 (node.sh's address plan).
	InternalIP string
	// PodCIDR is the node's pod CIDR.
	PodCIDR string
}

// RealNode returns the real node of cluster c, if it has one.
func (e *Env) RealNode(c string) (RealNode, bool) {
	n := RealNode{Name: e.Var(c, "NODE"), Netns: e.Var(c, "NODE_NETNS"), PodCIDR: e.Var(c, "POD_CIDR")}
	if n.Name == "" || n.Netns == "" || e.Var(c, "NODE_IP") == "" {
		return RealNode{}, false
	}
	n.InternalIP = e.Var(c, "NODE_IP") + "/30"
	return n, true
}

// SeedRealNode writes on the real node of cluster c the annotations that
// Kilo's agent would write (fixture.RealNode), through cl, and says whether
// c has a real node. The private key of its key is then held by this
// process (fixture.PrivateKey).
func SeedRealNode(ctx context.Context, e *Env, c string, cl client.Client) (bool, error) {
	n, ok := e.RealNode(c)
	if !ok {
		return false, nil
	}
	return true, fixture.Annotate(ctx, cl, n.Name, fixture.RealNode(c, n.Name, n.InternalIP))
}

// DataplaneMembers are the members of a data-plane harness
// (test/dataplane) for clusters of the stack: each reached as its admin,
// with Kilo's --subnet of the fixture's plan when dataPlane is set and the
// cluster serves Kilo's Peer (a member without it gets heartbeats only),
// and the namespace of its real node, which the harness then runs instead
// of making one. The private keys of the fixture's Nodes and of the real
// nodes are held by this process from then on (fixture.PrivateKey), so
// that the harness can run them.
func DataplaneMembers(e *Env, clusters []string, dataPlane bool) ([]dataplane.Member, error) {
	_, _ = fixture.Mesh(), fixture.Extra()
	var out []dataplane.Member
	for _, c := range clusters {
		rc, err := e.RESTConfig(c)
		if err != nil {
			return nil, err
		}
		m := dataplane.Member{Name: c, Config: rc}
		if dataPlane && e.Var(c, "PEER_CRD") == "true" {
			m.Subnet = fixture.WireguardCIDR(c)
		}
		if n, ok := e.RealNode(c); ok {
			m.Netns = map[string]string{n.Name: n.Netns}
			_ = fixture.RealNode(c, n.Name, n.InternalIP)
		}
		out = append(out, m)
	}
	return out, nil
}
