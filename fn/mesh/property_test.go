package mesh

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Property tests: many random meshes from a seeded generator. The generator
// draws addresses, keys and endpoints from small pools so that duplicates,
// conflicts and skips are frequent.

const propertyIterations = 400

type meshGen struct {
	r *rand.Rand
	// v6 makes every member an IPv6 cluster: a mesh runs one family.
	v6 bool
}

func (g meshGen) chance(p float64) bool { return g.r.Float64() < p }

func (g meshGen) pick(ss ...string) string { return ss[g.r.Intn(len(ss))] }

func (g meshGen) some(most int, ss ...string) []string {
	n := g.r.Intn(most + 1)
	out := make([]string, 0, n)
	for range n {
		out = append(out, g.pick(ss...))
	}
	return out
}

// The networks of the k-th member (k from 1) derive from k, so that members
// never overlap: pods, WireGuard, service, additional, nodes.
func (g meshGen) podNet(k int) string {
	if g.v6 {
		return fmt.Sprintf("fd0%d::/48", k)
	}
	return fmt.Sprintf("10.%d.0.0/16", k)
}

func (g meshGen) nodePod(k, j int) string {
	if g.v6 {
		return fmt.Sprintf("fd0%d:0:0:%d::/64", k, j+1)
	}
	return fmt.Sprintf("10.%d.%d.0/24", k, j+1)
}

func (g meshGen) wgIP(k, host int) string {
	if g.v6 {
		return fmt.Sprintf("fd4%d::%d/64", k, host)
	}
	return fmt.Sprintf("10.%d.0.%d/16", 40+k, host)
}

func (g meshGen) nodeNet(k int) string {
	if g.v6 {
		return fmt.Sprintf("fd1%d::/64", k)
	}
	return fmt.Sprintf("192.168.%d.0/24", k)
}

// nodeAddr is an address of member k's node network, as a CIDR.
func (g meshGen) nodeAddr(k, host int) string {
	if g.v6 {
		return fmt.Sprintf("fd1%d::%d/64", k, host)
	}
	return fmt.Sprintf("192.168.%d.%d/24", k, host)
}

func (g meshGen) additionalNet(k, i int) string {
	if g.v6 {
		return fmt.Sprintf("fd3%d:%d::/64", k, i)
	}
	return fmt.Sprintf("172.%d.0.0/16", 16*i+k)
}

// genCluster declares the k-th member.
func (g meshGen) genCluster(k int, name string) meshv1alpha1.Cluster {
	wg := fmt.Sprintf("10.%d.0.0/16", 40+k)
	if g.v6 {
		wg = fmt.Sprintf("fd4%d::/64", k)
	}
	c := memberCluster(name, g.podNet(k), wg)
	if g.chance(0.7) {
		c.NodeCIDRs = cidrs(g.nodeNet(k))
	}
	if g.chance(0.5) {
		if g.v6 {
			c.ServiceCIDR = cidrPtr(fmt.Sprintf("fd2%d::/108", k))
		} else {
			c.ServiceCIDR = cidrPtr(fmt.Sprintf("10.%d.0.0/16", 200+k))
		}
	}
	if g.chance(0.5) {
		c.AdditionalCIDRs = cidrs(g.additionalNet(k, 1))
		if g.chance(0.5) {
			c.AdditionalCIDRs = append(c.AdditionalCIDRs, meshv1alpha1.CIDR(g.additionalNet(k, 2)))
		}
	}
	if g.chance(0.3) {
		c.WireguardPort = int32Ptr(int32(1 + g.r.Intn(65535)))
	}
	if g.chance(0.3) {
		c.PersistentKeepalive = int32Ptr(int32(g.r.Intn(61)))
	}
	return c
}

// sharedKey is one of a few keys that nodes of any cluster may share.
func (g meshGen) sharedKey() string { return testKey(byte(200 + g.r.Intn(3))) }

func (g meshGen) genNode(k, j int) kubev1alpha1.ObservedNode {
	name := g.pick(fmt.Sprintf("n%d", j), fmt.Sprintf("node-%d.example.com", j), strings.Repeat("z", 200)+strconv.Itoa(j))
	n := observedNode(name, location(g.pick("", "eu", "us")))
	kilo := &kubev1alpha1.KiloAnnotations{}
	n.Kilo = kilo

	switch x := g.r.Float64(); {
	case x < 0.05:
	case x < 0.10:
		n.PodCIDRs = []string{fmt.Sprintf("10.99.%d.0/24", j)}
	case x < 0.13:
		n.PodCIDRs = []string{"junk"}
	case x < 0.16:
		n.PodCIDRs = []string{g.nodePod(k, (j+1)%3)} // claimed by another node too
	default:
		n.PodCIDRs = []string{g.nodePod(k, j)}
		if g.chance(0.3) {
			n.PodCIDRs = append(n.PodCIDRs, "fd77::/64", "10.77.0.0/24") // the other family's
		}
	}

	switch x := g.r.Float64(); {
	case x < 0.65:
		kilo.WireguardIP = g.wgIP(k, j+1)
	case x < 0.80:
	case x < 0.88:
		kilo.WireguardIP = g.wgIP(k, 1)
	case x < 0.94:
		kilo.WireguardIP = g.pick("10.4.0.1", "x/16", "10.4.0.1/40")
	default:
		kilo.WireguardIP = "10.99.0.1/16"
	}

	switch x := g.r.Float64(); {
	case x < 0.75:
		kilo.Key = testKey(byte(k*16 + j))
	case x < 0.85:
		kilo.Key = g.sharedKey()
	case x < 0.90:
		kilo.Key = otherSpelling(testKey(byte(k*16 + j)))
	case x < 0.95:
	default:
		kilo.Key = g.pick("junk", testKey(1)[:43], testKey(0))
	}

	if g.chance(0.6) {
		n.ExternalIPs = g.some(2, "203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "2001:db8::1", "2001:db8::2", "127.0.0.1")
	}
	if g.chance(0.15) {
		kilo.ForceEndpoint = g.pick("203.0.113.9:51820", "[2001:db8::9]:4000", "gw.example.com:51820", "203.0.113.2:51821", "junk", "127.0.0.1:5")
	}
	if g.chance(0.1) {
		kilo.ClustermeshEndpoint = g.pick("mesh.example.com:1", "203.0.113.10:2", "203.0.113.3:3", "bad", "[fe80::1]:4")
	}
	if g.chance(0.85) {
		kilo.Endpoint = g.pick("203.0.113.11:51820", "[2001:db8::11]:51820", "203.0.113.4:51820", "10.0.0.9:51820",
			strings.Split(g.nodeAddr(k, 1+g.r.Intn(5)), "/")[0]+":51820", "bad")
		if strings.Count(kilo.Endpoint, ":") > 1 && !strings.HasPrefix(kilo.Endpoint, "[") {
			i := strings.LastIndex(kilo.Endpoint, ":")
			kilo.Endpoint = "[" + kilo.Endpoint[:i] + "]" + kilo.Endpoint[i:]
		}
	}
	if g.chance(0.7) {
		kilo.InternalIP = g.pick(g.nodeAddr(k, 1), g.nodeAddr(k, 2), g.nodeAddr(k, 3), g.nodeAddr(k, 1+j), g.nodeAddr(k%4+1, 5),
			"203.0.113.1/24", "fd02::1/64", "10.0.0.1/8", "192.168.9.9")
	}
	if g.chance(0.1) {
		kilo.ForceInternalIP = g.pick("-", g.nodeAddr(k, 7), "junk", "10.2.0.1/32")
	}
	n.InternalIPs = g.some(2, "192.168.0.1", "10.2.0.7", "fd02::2")
	if g.chance(0.2) {
		kilo.AllowedLocationIPs = strings.Join(g.some(3, g.additionalNet(k, 1), g.additionalNet(k, 2), "172.16.1.0/24",
			strings.Replace(g.additionalNet(k, 1), "0.0/16", "5.0/24", 1), "10.2.0.0/16", "junk", "fd99::/64"), ",")
	}
	if g.chance(0.2) {
		kilo.Leader = "true"
	}
	n.Stale = g.chance(0.08)
	kilo.Granularity = g.pick("", "", "full", "location")
	if g.chance(0.1) {
		kilo.PersistentKeepalive = g.pick("10", "60", "x")
	}
	if g.chance(0.25) {
		entries := map[string]map[string]any{}
		for range 1 + g.r.Intn(3) {
			// Each key once, in one spelling: a JSON object with two
			// spellings of one key says two things of one peer.
			k := testKey(byte(16*(1+g.r.Intn(4)) + g.r.Intn(6)))
			if g.chance(0.2) {
				k = g.sharedKey()
			}
			entries[k] = map[string]any{
				"IP":   g.pick("198.51.100.1", "198.51.100.2", "192.168.0.1", "203.0.113.2", "127.0.0.1", "2001:db8::77"),
				"Port": g.pick("0", "40000", "51820"),
			}
		}
		b, err := json.Marshal(entries)
		if err != nil {
			panic(err) // maps of strings always marshal
		}
		kilo.DiscoveredEndpoints = strings.ReplaceAll(strings.ReplaceAll(string(b), `"Port":"`, `"Port":`), `"}`, `}`)
		if g.chance(0.1) {
			kilo.DiscoveredEndpoints = "{"
		}
	}
	return n
}

// genInput is a random valid mesh with random observations.
func genInput(r *rand.Rand) *Input {
	g := meshGen{r: r, v6: r.Intn(4) == 0}
	names := []string{"a", "b", "c", "d", strings.Repeat("l", 62) + "x"}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	in := &Input{
		Namespace:    g.pick("team-a", strings.Repeat("s", 63)),
		Name:         g.pick("prod", strings.Repeat("m", 120)),
		Observations: map[string]*Observation{},
	}
	in.Spec.Granularity = meshv1alpha1.Granularity(g.pick("", "Auto", "Node", "Location"))
	switch r.Intn(3) {
	case 0:
		in.Spec.AdvertiseNodeIPs = boolPtr(true)
	case 1:
		in.Spec.AdvertiseNodeIPs = boolPtr(false)
	}
	n := 2 + r.Intn(3)
	var nodeNames []string
	var sources []string
	for k := 1; k <= n; k++ {
		c := g.genCluster(k, names[k-1])
		in.Spec.Clusters = append(in.Spec.Clusters, c)
		if g.chance(0.1) {
			continue // never observed
		}
		obs := observation()
		for j := range r.Intn(7) {
			node := g.genNode(k, j)
			obs.Nodes = append(obs.Nodes, node)
			nodeNames = append(nodeNames, node.Name)
			sources = append(sources, c.Name)
		}
		if g.chance(0.1) {
			obs.Reachable = false
			obs.UnreachableSince = &unreachableSince
		}
		in.Observations[c.Name] = obs
	}
	for _, c := range in.Spec.Clusters {
		obs := in.Observations[c.Name]
		if obs == nil || len(nodeNames) == 0 {
			continue
		}
		if g.chance(0.2) {
			other := in.Spec.Clusters[r.Intn(n)].Name
			obs.ForeignPeers = append(obs.ForeignPeers,
				kubev1alpha1.ForeignPeer{Name: PeerName(in.Namespace, in.Name, other, nodeNames[r.Intn(len(nodeNames))])},
				kubev1alpha1.ForeignPeer{Name: "vpn", PublicKey: g.sharedKey(), AllowedIPs: g.some(2, "10.1.1.0/24", "10.2.0.0/16", "0.0.0.0/0", "fd01::/16", "junk")},
			)
		}
		// Some Peers of the mesh were delivered here before: their names,
		// keys and routes make incumbents.
		for range r.Intn(3) {
			i := r.Intn(len(nodeNames))
			if in.Delivered == nil {
				in.Delivered = map[string]map[string]DeliveredPeer{}
			}
			if in.Delivered[c.Name] == nil {
				in.Delivered[c.Name] = map[string]DeliveredPeer{}
			}
			in.Delivered[c.Name][PeerName(in.Namespace, in.Name, sources[i], nodeNames[i])] = DeliveredPeer{
				PublicKey: g.pick(g.sharedKey(), testKey(byte(16+r.Intn(64)))), AllowedIPs: g.some(2, "10.1.1.0/24", "10.2.0.0/16"),
			}
		}
	}
	return in
}

// permuted is the same mesh with every list of nodes, the clusters of the
// spec and the observation map rebuilt in another order.
func permuted(in *Input, r *rand.Rand) *Input {
	out := *in
	out.Spec.Clusters = append([]meshv1alpha1.Cluster(nil), in.Spec.Clusters...)
	r.Shuffle(len(out.Spec.Clusters), func(i, j int) {
		out.Spec.Clusters[i], out.Spec.Clusters[j] = out.Spec.Clusters[j], out.Spec.Clusters[i]
	})
	names := make([]string, 0, len(in.Observations))
	for name := range in.Observations {
		names = append(names, name)
	}
	sort.Strings(names)
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	out.Observations = make(map[string]*Observation, len(names))
	for _, name := range names {
		obs := *in.Observations[name]
		obs.Nodes = append([]kubev1alpha1.ObservedNode(nil), obs.Nodes...)
		r.Shuffle(len(obs.Nodes), func(i, j int) { obs.Nodes[i], obs.Nodes[j] = obs.Nodes[j], obs.Nodes[i] })
		out.Observations[name] = &obs
	}
	return &out
}

// normalised is a plan with the parts that follow spec order sorted by
// cluster name.
func normalised(p *Plan) *Plan {
	out := *p
	out.Status.Clusters = append([]meshv1alpha1.ClusterStatus(nil), p.Status.Clusters...)
	sort.Slice(out.Status.Clusters, func(i, j int) bool { return out.Status.Clusters[i].Name < out.Status.Clusters[j].Name })
	out.Warnings = append([]Warning(nil), p.Warnings...)
	sort.SliceStable(out.Warnings, func(i, j int) bool { return out.Warnings[i].Cluster < out.Warnings[j].Cluster })
	out.Pending = append([]string(nil), p.Pending...)
	sort.Strings(out.Pending)
	return &out
}

func TestPropertyOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range propertyIterations {
		in := genInput(r)
		want, err := Do(in)
		if err != nil {
			t.Fatalf("iteration %d: Do(...): %v", i, err)
		}
		again, err := Do(in)
		if err != nil {
			t.Fatalf("iteration %d: Do(...) again: %v", i, err)
		}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Fatalf("iteration %d: the same input planned twice differs: -first, +second:\n%s", i, diff)
		}
		for range 2 {
			got, err := Do(permuted(in, r))
			if err != nil {
				t.Fatalf("iteration %d: Do(permuted): %v", i, err)
			}
			if diff := cmp.Diff(normalised(want), normalised(got)); diff != "" {
				t.Fatalf("iteration %d: the plan depends on the order of nodes or clusters: -want, +got:\n%s", i, diff)
			}
		}
	}
}

func TestPropertyPlanInvariants(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := range propertyIterations {
		in := genInput(r)
		p, err := Do(in)
		if err != nil {
			t.Fatalf("iteration %d: Do(...): %v", i, err)
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			checkPlan(t, in, p)
			checkAnchors(t, in, p)
			checkCounts(t, in, p)
		})
		if t.Failed() {
			return
		}
	}
}

// sourceOf is the cluster whose Peer this is.
func sourceOf(peer kilov1alpha1.Peer) string {
	return peer.Labels[meshv1alpha1.LabelSourceCluster]
}

// checkAnchors asserts that in every target each anchor CIDR of a source
// that has Peers there is routed exactly once, through that source.
func checkAnchors(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	for target, peers := range p.Peers {
		count := map[string]map[string]int{} // source -> CIDR -> Peers routing it
		for _, peer := range peers {
			src := sourceOf(peer)
			if count[src] == nil {
				count[src] = map[string]int{}
			}
			for _, a := range peer.Spec.AllowedIPs {
				count[src][a]++
			}
		}
		for _, c := range in.Spec.Clusters {
			if count[c.Name] == nil {
				continue
			}
			var anchor []meshv1alpha1.CIDR
			if c.ServiceCIDR != nil {
				anchor = append(anchor, *c.ServiceCIDR)
			}
			anchor = append(anchor, c.AdditionalCIDRs...)
			for _, a := range anchor {
				// A route a foreign Peer holds, or a location's range whose
				// Peer a foreign Peer holds back, may be missing.
				n := count[c.Name][string(a)]
				if n > 1 || (n == 0 && len(statusOf(p, target).Conflicts) == 0) {
					t.Errorf("anchor CIDR %s of %s is routed by %d of its Peers in %s, want exactly 1", a, c.Name, n, target)
				}
				for src, cs := range count {
					if src != c.Name && cs[string(a)] > 0 {
						t.Errorf("anchor CIDR %s of %s is routed by a Peer of %s in %s", a, c.Name, src, target)
					}
				}
			}
		}
	}
}

// checkCounts asserts that status counts what the plan holds, and that a
// source's segments reach every other cluster unless a foreign Peer is in
// the way.
func checkCounts(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	floor := 0
	for _, c := range in.Spec.Clusters {
		if c.PersistentKeepalive != nil && int(*c.PersistentKeepalive) > floor {
			floor = int(*c.PersistentKeepalive)
		}
	}
	if got, want := p.Status.ClusterCount, len(in.Spec.Clusters); got != want {
		t.Errorf("status.clusterCount = %d, want %d", got, want)
	}
	total, skipped := 0, 0
	written := map[string]map[string]int{} // source -> target -> Peers
	for target, peers := range p.Peers {
		total += len(peers)
		for _, peer := range peers {
			if written[sourceOf(peer)] == nil {
				written[sourceOf(peer)] = map[string]int{}
			}
			written[sourceOf(peer)][target]++
			if peer.Spec.PersistentKeepalive < floor {
				t.Errorf("Peer %s in %s has keepalive %d below the mesh floor %d", peer.Name, target, peer.Spec.PersistentKeepalive, floor)
			}
		}
	}
	if p.Status.PeerCount != total {
		t.Errorf("status.peerCount = %d, want the %d Peers planned", p.Status.PeerCount, total)
	}
	for i, c := range in.Spec.Clusters {
		if i >= len(p.Status.Clusters) || p.Status.Clusters[i].Name != c.Name {
			t.Fatalf("status lists the clusters in spec order: want %s at %d, got %+v", c.Name, i, p.Status.Clusters)
		}
		cs := p.Status.Clusters[i]
		skipped += cs.SkippedNodes
		obs := in.Observations[c.Name]
		nodes := 0
		if obs != nil {
			nodes = len(obs.Nodes)
		}
		if cs.Nodes != nodes {
			t.Errorf("status of %s: nodes = %d, want %d", c.Name, cs.Nodes, nodes)
		}
		if len(cs.Skipped) > 20 || len(cs.Skipped)+cs.MoreSkipped != cs.SkippedNodes {
			t.Errorf("status of %s: %d listed and %d more skipped, %d skipped in all", c.Name, len(cs.Skipped), cs.MoreSkipped, cs.SkippedNodes)
		}
		if cs.SkippedNodes > cs.Nodes || cs.Segments > cs.Nodes-cs.SkippedNodes {
			t.Errorf("status of %s: %d nodes, %d skipped, %d segments", c.Name, cs.Nodes, cs.SkippedNodes, cs.Segments)
		}
		sum := 0
		for _, tc := range in.Spec.Clusters {
			if tc.Name == c.Name {
				continue
			}
			got := written[c.Name][tc.Name]
			sum += got
			conflicts := len(statusOf(p, tc.Name).Conflicts)
			if got > cs.Segments || (conflicts == 0 && got != cs.Segments) {
				t.Errorf("%d Peers of %s in %s, which has %d conflicts; %s has %d segments", got, c.Name, tc.Name, conflicts, c.Name, cs.Segments)
			}
		}
		if cs.Peers != sum {
			t.Errorf("status of %s: peers = %d, want the %d written into other clusters", c.Name, cs.Peers, sum)
		}
		if (obs == nil || obs.ObservedAt == nil) && (cs.Segments != 0 || cs.Reachable) {
			t.Errorf("status of never observed %s: %+v", c.Name, cs)
		}
		if obs != nil && !obs.Reachable && (cs.Reachable || cs.UnreachableSince == nil) {
			t.Errorf("status of unreachable %s: %+v", c.Name, cs)
		}
	}
	warned := map[warning]bool{}
	for _, w := range p.Warnings {
		key := warning{w.Cluster, w.Reason}
		if warned[key] {
			t.Errorf("two warnings of cluster %s for %s: one per cluster and reason", w.Cluster, w.Reason)
		}
		warned[key] = true
	}
	if p.Status.SkippedNodeCount != skipped {
		t.Errorf("status.skippedNodeCount = %d, want %d", p.Status.SkippedNodeCount, skipped)
	}
}

// TestPropertyPeerRefs holds the function's form of a plan (Input.PeerRefs:
// one Peer shared by the members that receive it alike) to the planner's
// own: the same Peers, in the same order, for every member.
func TestPropertyPeerRefs(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for i := range propertyIterations {
		in := genInput(r)
		want, err := Do(in)
		if err != nil {
			t.Fatalf("iteration %d: Do(...): %v", i, err)
		}
		refs := *in
		refs.PeerRefs = true
		got, err := Do(&refs)
		if err != nil {
			t.Fatalf("iteration %d: Do(PeerRefs): %v", i, err)
		}
		if got.Peers != nil {
			t.Fatalf("iteration %d: a PeerRefs plan holds Plan.Peers too", i)
		}
		deref := map[string][]kilov1alpha1.Peer{}
		for target, ps := range got.PeerRefs {
			deref[target] = nil // a member that receives nothing, as in Peers
			for _, p := range ps {
				deref[target] = append(deref[target], *p)
			}
		}
		if diff := cmp.Diff(want.Peers, deref); diff != "" {
			t.Fatalf("iteration %d: PeerRefs differ from Peers: -Peers, +PeerRefs:\n%s", i, diff)
		}
		gotRest, wantRest := *got, *want
		gotRest.PeerRefs, wantRest.Peers = nil, nil
		if diff := cmp.Diff(wantRest, gotRest); diff != "" {
			t.Fatalf("iteration %d: the rest of the plan differs with PeerRefs: -Peers, +PeerRefs:\n%s", i, diff)
		}
	}
}
