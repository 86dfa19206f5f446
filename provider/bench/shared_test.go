//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// meshSize reads BENCH_SHARED (clusters x nodes, default 20x250).
func meshSize() (int, int) {
	c, n, ok := strings.Cut(os.Getenv("BENCH_SHARED"), "x")
	clusters, err1 := strconv.Atoi(c)
	nodes, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || clusters < 2 || nodes < 1 {
		return 20, 250
	}
	return clusters, nodes
}

// TestSharedPeerSet applies, into one member, the Peers a member of a
// C x N mesh in the shared form receives: those of the SegmentSets of the
// C-1 other members, (C-1) x N Peers, through one PeerSet that references
// them, the way function-kilomesh composes it; then one SegmentSet changes.
// It reports how long the apply takes, how long the change takes to reach
// the member, and the provider's memory before and after.
//
//	BENCH_SHARED=20x250 KUBEBUILDER_ASSETS=$PWD/.cache/bin go test -tags bench -count=1 -v -run TestSharedPeerSet ./provider/bench/
func TestSharedPeerSet(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	clusters, nodes := meshSize()
	kubeconfig, mgmt := controlPlane(t)
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := "bench"
	mustCreate(ctx, t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err := testenv.ProviderConfig(ctx, mgmt, ns, "member", m.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, kubeconfig)

	// Every member's SegmentSet, as the function writes them: C x N Peers.
	segments(ctx, t, mgmt, ns, clusters, nodes)
	ps := sharedPeerSet(ns, 0, "member", clusters)
	want := (clusters - 1) * nodes
	time.Sleep(5 * time.Second)
	before, _ := rss(t, p.pid)

	start := time.Now()
	mustCreate(ctx, t, mgmt, ps)
	waitApplied(t, mgmt, ns, "cluster-00", want, func(*v1alpha1.PeerSet) bool { return true })
	apply := time.Since(start)
	t.Logf("PeerSet of a %d x %d mesh in the shared form: %d Peers from %d SegmentSets applied (status applied=%d, Ready) in %.1f s", clusters, nodes, want, clusters-1, want, apply.Seconds())

	// One Peer of one SegmentSet changes its endpoint: only the watch of
	// SegmentSets brings it.
	seg := &v1alpha1.SegmentSet{}
	if err := mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: "mesh-cluster-01-segments-0"}, seg); err != nil {
		t.Fatal(err)
	}
	seg.Spec.Peers[0].Spec.Endpoint.Port = 51999
	start = time.Now()
	if err := mgmt.Update(ctx, seg); err != nil {
		t.Fatal(err)
	}
	member := fastClient(t, m.AdminConfig)
	wait.Eventually(ctx, t, "the changed SegmentSet in the member", 5*time.Minute, 20*time.Millisecond, func() (bool, error) {
		got, err := getPeer(ctx, member, seg.Spec.Peers[0].Name)
		if err != nil {
			return false, err
		}
		return got.Spec.Endpoint != nil && got.Spec.Endpoint.Port == 51999, fmt.Errorf("endpoint %v", got.Spec.Endpoint)
	})
	change := time.Since(start)
	time.Sleep(5 * time.Second)
	after, peak := rss(t, p.pid)
	t.Logf("a SegmentSet's changed Peer reached the member in %.2f s", change.Seconds())
	t.Logf("provider memory: RSS %.1f MiB with the %d SegmentSets cached, %.1f MiB (peak %.1f MiB) once %d Peers are applied into its member and watched there; a %d x %d mesh's %d members would add at most %.0f MiB each, %.0f MiB in all",
		before, clusters, after, peak, want, clusters, nodes, clusters, after-before, before+float64(clusters)*(after-before))
}

// waitApplied waits until the PeerSet reports want Peers applied and Ready.
func waitApplied(t *testing.T, c client.Client, ns, name string, want int, ok func(*v1alpha1.PeerSet) bool) {
	t.Helper()
	wait.Eventually(t.Context(), t, fmt.Sprintf("PeerSet %s applying %d Peers", name, want), 15*time.Minute, 100*time.Millisecond, func() (bool, error) {
		got := &v1alpha1.PeerSet{}
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
			return false, err
		}
		ready := got.GetCondition(xpv2.TypeReady).Status
		return got.Status.AtProvider.Applied == want && ready == corev1.ConditionTrue && ok(got), fmt.Errorf("applied %d, Ready %s", got.Status.AtProvider.Applied, ready)
	})
}

func getPeer(ctx context.Context, c client.Client, name string) (*kilov1alpha1.Peer, error) {
	p := &kilov1alpha1.Peer{}
	return p, c.Get(ctx, client.ObjectKey{Name: name}, p)
}

// segmentPeer is Peer i of cluster c of the bench's mesh.
func segmentPeer(nodes, c, i int) v1alpha1.DesiredPeer {
	return v1alpha1.DesiredPeer{
		Name:   fmt.Sprintf("mesh-cluster-%02d-node-%04d", c, i),
		Labels: map[string]string{"kilomesh.io/source-cluster": fmt.Sprintf("cluster-%02d", c)},
		Spec: v1alpha1.PeerSpec{
			AllowedIPs:          []string{fmt.Sprintf("10.%d.%d.%d/28", 64+c, i/16, i%16*16), fmt.Sprintf("172.%d.%d.%d/32", 16+c, i/250, i%250+1), fmt.Sprintf("10.%d.%d.%d/32", 128+c, i/250, i%250+1)},
			Endpoint:            &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{IP: fmt.Sprintf("100.%d.%d.%d", 64+c, i/250, i%250+1)}, Port: 51820},
			PersistentKeepalive: 25,
			PublicKey:           key(c*nodes + i),
		},
	}
}

// segments writes the SegmentSet of every cluster of the mesh, one each.
func segments(ctx context.Context, t *testing.T, mgmt client.Client, ns string, clusters, nodes int) {
	t.Helper()
	for c := range clusters {
		seg := &v1alpha1.SegmentSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("mesh-cluster-%02d-segments-0", c)}}
		for i := range nodes {
			seg.Spec.Peers = append(seg.Spec.Peers, segmentPeer(nodes, c, i))
		}
		mustCreate(ctx, t, mgmt, seg)
	}
}

// sharedPeerSet is the PeerSet of cluster target, delivered through the
// ProviderConfig pc: a reference to the SegmentSet of every other cluster.
func sharedPeerSet(ns string, target int, pc string, clusters int) *v1alpha1.PeerSet {
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cluster-%02d", target)}}
	ps.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: pc}
	ps.Spec.ForProvider.Selector = map[string]string{"kilomesh.io/mesh": "mesh"}
	for c := range clusters {
		if c != target {
			ps.Spec.ForProvider.SegmentSetRefs = append(ps.Spec.ForProvider.SegmentSetRefs, v1alpha1.SegmentSetReference{Name: fmt.Sprintf("mesh-cluster-%02d-segments-0", c)})
		}
	}
	return ps
}

// TestSharedMembers runs one provider for BENCH_MEMBERS members (default
// every cluster) of the BENCH_SHARED mesh in the shared form, each a
// kube-apiserver of its own that receives its PeerSet: (C-1) x N Peers
// from the SegmentSets of the other members. It reports how long they take
// to be applied in all, and the provider's memory before and after.
//
//	BENCH_SHARED=20x250 KUBEBUILDER_ASSETS=$PWD/.cache/bin go test -tags bench -count=1 -v -timeout 60m -run TestSharedMembers ./provider/bench/
func TestSharedMembers(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	clusters, nodes := meshSize()
	members := min(envInt("BENCH_MEMBERS", clusters), clusters)
	kubeconfig, mgmt := controlPlane(t)
	ns := "bench"
	mustCreate(ctx, t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for k := range members {
		m := testenv.StartMember(t, testenv.MemberOptions{})
		if err := testenv.ProviderConfig(ctx, mgmt, ns, fmt.Sprintf("member-%02d", k), m.Kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	p := startProvider(t, kubeconfig)
	segments(ctx, t, mgmt, ns, clusters, nodes)
	time.Sleep(5 * time.Second)
	before, _ := rss(t, p.pid)

	want := (clusters - 1) * nodes
	// With BENCH_PPROF, heap profiles every 10 s while the Peers are
	// applied show what the reconciles hold at once.
	sampled := make(chan struct{})
	sampling, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampled)
		for i := 1; os.Getenv("BENCH_PPROF") != ""; i++ {
			select {
			case <-sampling.Done():
				return
			case <-time.After(10 * time.Second):
			}
			saveHeap(sampling, t, p, fmt.Sprintf("members-%dx%d-%d-applying-%02d", clusters, nodes, members, i))
		}
	}()
	start := time.Now()
	for k := range members {
		mustCreate(ctx, t, mgmt, sharedPeerSet(ns, k, fmt.Sprintf("member-%02d", k), clusters))
	}
	for k := range members {
		waitApplied(t, mgmt, ns, fmt.Sprintf("cluster-%02d", k), want, func(*v1alpha1.PeerSet) bool { return true })
	}
	took := time.Since(start)
	stopSampling()
	<-sampled
	time.Sleep(5 * time.Second)
	after, peak := rss(t, p.pid)
	saveHeap(ctx, t, p, fmt.Sprintf("members-%dx%d-%d", clusters, nodes, members))
	t.Logf("one provider, %d members of a %d x %d mesh in the shared form: %d Peers each (%d in all) from %d SegmentSets applied, every PeerSet Ready, in %.1f s; provider RSS %.1f MiB with the SegmentSets cached, %.1f MiB (peak %.1f MiB) once every member's Peers are applied and watched",
		members, clusters, nodes, want, members*want, clusters, took.Seconds(), before, after, peak)
}
