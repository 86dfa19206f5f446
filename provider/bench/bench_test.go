//go:build bench

/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package bench measures provider-kilomesh at scale against real API
// servers, with the provider running as its own process:
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/bin go test -tags bench -count=1 -timeout 40m -v ./provider/bench/
//
// It reports figures (and writes them as JSON to $BENCH_OUT when set); it
// asserts no timing.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// Sizes of the scenarios; BENCH_NODES and BENCH_PEERS override the largest.
const (
	heartbeatNodes = 1000
	heartbeatFor   = 2 * time.Minute
	latencySamples = 30
	// staleNodes stop their heartbeats, go stale, and come back.
	staleNodes = 100
)

// Results of a run.
type Results struct {
	Nodes                 int     `json:"nodes"`
	RSSMiB                float64 `json:"rssMiB"`
	PeakRSSMiB            float64 `json:"peakRSSMiB"`
	HeapInuseMiB          float64 `json:"heapInuseMiB"`
	StatusBytesPerNode    int     `json:"statusBytesPerNode"`
	HeartbeatNodes        int     `json:"heartbeatNodes"`
	HeartbeatUpdates      int     `json:"heartbeatUpdates"`
	StatusWritesPerMinute float64 `json:"statusWritesPerMinute"`
	LatencyP50Ms          float64 `json:"latencyP50Ms"`
	LatencyP90Ms          float64 `json:"latencyP90Ms"`
	LatencyMaxMs          float64 `json:"latencyMaxMs"`
	Peers                 int     `json:"peers"`
	PeerSetApplySeconds   float64 `json:"peerSetApplySeconds"`
	StaleNodes            int     `json:"staleNodes"`
	StaleWrites           int     `json:"staleWrites"`
	StaleDelayP50Ms       float64 `json:"staleDelayP50Ms"`
	StaleDelayMaxMs       float64 `json:"staleDelayMaxMs"`
	FreshWrites           int     `json:"freshWrites"`
	FreshDelayP50Ms       float64 `json:"freshDelayP50Ms"`
	FreshDelayMaxMs       float64 `json:"freshDelayMaxMs"`
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestScale(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	totalNodes := envInt("BENCH_NODES", 5000)
	totalPeers := envInt("BENCH_PEERS", 2000)

	kubeconfig, mgmt := controlPlane(t)
	m := testenv.StartMember(t, testenv.MemberOptions{})
	member := fastClient(t, m.AdminConfig)

	ns := "bench"
	mustCreate(ctx, t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err := testenv.ProviderConfig(ctx, mgmt, ns, "member", m.Kubeconfig); err != nil {
		t.Fatal(err)
	}

	p := startProvider(t, kubeconfig)
	res := Results{HeartbeatNodes: heartbeatNodes, Nodes: totalNodes, Peers: totalPeers}

	// 1,000 Nodes, one inventory.
	createNodes(ctx, t, member, 0, heartbeatNodes)
	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"}}
	ni.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: "member"}
	mustCreate(ctx, t, mgmt, ni)
	waitNodes(ctx, t, mgmt, ns, heartbeatNodes)

	// Two minutes of Kilo heartbeats on every Node (every 30 s) and of
	// kubelet heartbeats (every 60 s); count the inventory's writes.
	rv := inventory(ctx, t, mgmt, ns).ResourceVersion
	writesSoFar := countWrites(watchInventory(ctx, t, mgmt, ns, rv))
	stop := make(chan struct{})
	var hb sync.WaitGroup
	beats := newBeats(heartbeatNodes)
	updates := heartbeats(ctx, t, member, beats, stop, &hb)
	time.Sleep(heartbeatFor)
	writes := writesSoFar()
	res.StatusWritesPerMinute = float64(writes) / heartbeatFor.Minutes()
	t.Logf("status writes during %s of heartbeats on %d Nodes: %d", heartbeatFor, heartbeatNodes, writes)

	// Latency of relevant changes, while the heartbeats go on.
	var lat []time.Duration
	for i := range latencySamples {
		name := nodeName(i * 7 % heartbeatNodes)
		value := fmt.Sprintf("203.0.113.%d:%d", i%250+1, 40000+i)
		rv := inventory(ctx, t, mgmt, ns).ResourceVersion
		w := watchInventory(ctx, t, mgmt, ns, rv)
		start := time.Now()
		patchAnnotation(ctx, t, member, name, kilov1alpha1.AnnotationEndpoint, value)
		lat = append(lat, waitEndpoint(t, w, name, value).Sub(start))
		w.Stop()
		time.Sleep(500 * time.Millisecond)
	}

	// Nodes whose heartbeats stop go stale 60 s after their last one,
	// without any event; then their heartbeats come back.
	staleAndFresh(ctx, t, mgmt, ns, beats, &res)

	close(stop)
	hb.Wait()
	res.HeartbeatUpdates = int(updates.Load())
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.LatencyP50Ms = ms(lat[len(lat)/2])
	res.LatencyP90Ms = ms(lat[len(lat)*9/10])
	res.LatencyMaxMs = ms(lat[len(lat)-1])
	t.Logf("latency Node annotation -> inventory status over %d samples: p50 %.0f ms, p90 %.0f ms, max %.0f ms", len(lat), res.LatencyP50Ms, res.LatencyP90Ms, res.LatencyMaxMs)

	// The rest of the Nodes; memory once they are all published. One
	// object cannot hold the status of thousands of Nodes (etcd's 1.5 MiB),
	// so the cluster is split across two inventories by node pool; they
	// share the cluster's one watch.
	if err := mgmt.Delete(ctx, ni); err != nil {
		t.Fatal(err)
	}
	for name, pools := range map[string][]string{"half-a": {"pool-0", "pool-1", "pool-2", "pool-3", "pool-4"}, "half-b": {"pool-5", "pool-6", "pool-7", "pool-8", "pool-9"}} {
		half := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		half.Spec.ProviderConfigReference = ni.Spec.ProviderConfigReference
		half.Spec.ForProvider.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: pools}}}
		mustCreate(ctx, t, mgmt, half)
	}
	createNodes(ctx, t, member, heartbeatNodes, totalNodes)
	waitNamedNodes(ctx, t, mgmt, ns, "half-a", totalNodes/2)
	waitNamedNodes(ctx, t, mgmt, ns, "half-b", totalNodes-totalNodes/2)
	half := &v1alpha1.NodeInventory{}
	if err := mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: "half-a"}, half); err != nil {
		t.Fatal(err)
	}
	if b, err := json.Marshal(half.Status.AtProvider); err == nil {
		res.StatusBytesPerNode = len(b) / len(half.Status.AtProvider.Nodes)
	}
	time.Sleep(15 * time.Second)
	res.RSSMiB, res.PeakRSSMiB = rss(t, p.pid)
	res.HeapInuseMiB = metric(t, p.metrics, "go_memstats_heap_inuse_bytes") / (1 << 20)
	t.Logf("provider memory watching %d Nodes: RSS %.1f MiB (peak %.1f MiB), heap in use %.1f MiB", totalNodes, res.RSSMiB, res.PeakRSSMiB, res.HeapInuseMiB)

	// One PeerSet of many Peers into the member cluster.
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"}}
	ps.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: "member"}
	ps.Spec.ForProvider.Selector = map[string]string{"kilomesh.io/mesh": "bench"}
	for i := range totalPeers {
		ps.Spec.ForProvider.Peers = append(ps.Spec.ForProvider.Peers, v1alpha1.DesiredPeer{
			Name:   fmt.Sprintf("peer-%05d", i),
			Labels: map[string]string{"kilomesh.io/source": "bench"},
			Spec: v1alpha1.PeerSpec{
				AllowedIPs:          []string{fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256), fmt.Sprintf("10.200.%d.%d/32", i/256, i%256)},
				Endpoint:            &v1alpha1.PeerEndpoint{DNSOrIP: v1alpha1.DNSOrIP{IP: fmt.Sprintf("198.51.%d.%d", i/256, i%256)}, Port: 51820},
				PersistentKeepalive: 25,
				PublicKey:           key(i),
			},
		})
	}
	start := time.Now()
	mustCreate(ctx, t, mgmt, ps)
	waitApplied(t, mgmt, ns, "bench", totalPeers, func(*v1alpha1.PeerSet) bool { return true })
	res.PeerSetApplySeconds = time.Since(start).Seconds()
	t.Logf("PeerSet of %d Peers applied (status applied=%d, Ready) in %.1f s", totalPeers, totalPeers, res.PeerSetApplySeconds)

	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("results:\n%s", b)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, b, 0o600); err != nil {
			t.Error(err)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func key(i int) string {
	var k [kilov1alpha1.KeyLen]byte
	copy(k[:], fmt.Sprintf("bench-peer-%021d", i))
	return kilov1alpha1.EncodeKey(k)
}

func fastClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	s, err := pcontroller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := kilov1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// realNode is a Node of the size a cloud or kwok Node has (about 8 KB as
// JSON): labels, annotations, capacity, conditions, node info and images.
func realNode(i int) *corev1.Node {
	name := nodeName(i)
	n := nodefixture.Node{
		Name:     name,
		PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)},
		Labels: map[string]string{
			"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.large",
			"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3),
			"node-role.kubernetes.io/worker": "", "pool": fmt.Sprintf("pool-%d", i%10),
		},
		Annotations: map[string]string{
			kilov1alpha1.AnnotationKey:                               key(1000000 + i),
			kilov1alpha1.AnnotationWireguardIP:                       fmt.Sprintf("10.4.%d.%d/16", i/256, i%256),
			kilov1alpha1.AnnotationEndpoint:                          fmt.Sprintf("203.0.%d.%d:51820", i/256, i%256),
			kilov1alpha1.AnnotationInternalIP:                        fmt.Sprintf("192.168.%d.%d/16", i/256, i%256),
			kilov1alpha1.AnnotationGranularity:                       "location",
			kilov1alpha1.AnnotationLastSeen:                          strconv.FormatInt(time.Now().Unix(), 10),
			kilov1alpha1.AnnotationDiscoveredEndpoints:               "{}",
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%017d"}`, i),
		},
	}.Object()
	n.Spec.ProviderID = fmt.Sprintf("aws:///eu-west-1a/i-%017d", i)
	return n
}

func realStatus(n *corev1.Node, i int) {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7901952Ki"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("83873772Ki"),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
	n.Status.Capacity, n.Status.Allocatable = res, res
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/256, i%256)},
		{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("203.0.%d.%d", i/256, i%256)},
		{Type: corev1.NodeHostName, Address: n.Name},
	}
	for _, c := range []struct {
		t      corev1.NodeConditionType
		s      corev1.ConditionStatus
		reason string
	}{
		{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"},
		{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"},
	} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: c.t, Status: c.s, Reason: c.reason, Message: "kubelet is posting ready status and has sufficient resources",
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	n.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID: fmt.Sprintf("%032d", i), SystemUUID: fmt.Sprintf("ec2%029d", i), BootID: fmt.Sprintf("%032d", i),
		KernelVersion: "6.1.0-28-cloud-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.24",
		KubeletVersion: "v1.34.4", OperatingSystem: "linux", Architecture: "amd64",
	}
	for j := range 20 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.com/team-%d/service-%d@sha256:%064d", j%5, j, j),
				fmt.Sprintf("registry.example.com/team-%d/service-%d:v1.%d.0", j%5, j, j),
			},
			SizeBytes: int64(50_000_000 + j*1_000_000),
		})
	}
}

func createNodes(ctx context.Context, t *testing.T, c client.Client, from, to int) {
	t.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				n := realNode(i)
				err := c.Create(ctx, n)
				if err == nil {
					realStatus(n, i)
					err = c.Status().Update(ctx, n)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	start := time.Now()
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("created Nodes %d-%d in %s", from, to-1, time.Since(start).Round(time.Millisecond))
}

// beats records the heartbeats of the Nodes, and which of them are paused.
type beats struct {
	paused []atomic.Bool
	last   []atomic.Int64
}

func newBeats(nodes int) *beats {
	return &beats{paused: make([]atomic.Bool, nodes), last: make([]atomic.Int64, nodes)}
}

// heartbeats patches Kilo's last-seen on every Node that is not paused
// every 30 s and the Ready condition's heartbeat time every 60 s, spread
// evenly, until stop.
func heartbeats(ctx context.Context, t *testing.T, c client.Client, b *beats, stop chan struct{}, wg *sync.WaitGroup) *atomic.Int64 {
	t.Helper()
	nodes := len(b.paused)
	done := &atomic.Int64{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(30 * time.Second / time.Duration(nodes))
		defer tick.Stop()
		for round := 0; ; round++ {
			for i := range nodes {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if b.paused[i].Load() {
					continue
				}
				name := nodeName(i)
				now := time.Now()
				ann := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kilov1alpha1.AnnotationLastSeen, strconv.FormatInt(now.Unix(), 10))
				if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(ann))); err != nil {
					t.Errorf("heartbeat: %v", err)
					return
				}
				b.last[i].Store(now.Unix())
				done.Add(1)
				if round%2 == 0 {
					n := &corev1.Node{}
					if err := c.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
						t.Errorf("heartbeat: %v", err)
						return
					}
					for j := range n.Status.Conditions {
						n.Status.Conditions[j].LastHeartbeatTime = metav1.NewTime(now)
					}
					if err := c.Status().Update(ctx, n); err == nil {
						done.Add(1)
					}
				}
			}
		}
	}()
	return done
}

// staleAndFresh pauses the heartbeats of staleNodes Nodes until the
// inventory publishes every one of them as stale, then resumes them until
// it publishes every one as fresh again, and records the status writes of
// each phase and how long after the fact each node's state was published:
// after the moment its heartbeat turned 60 s old, and after its first new
// heartbeat.
func staleAndFresh(ctx context.Context, t *testing.T, c client.WithWatch, ns string, b *beats, res *Results) {
	t.Helper()
	res.StaleNodes = staleNodes
	phase := func(stale bool, due func(i int) time.Time) (int, []time.Duration) {
		rv := inventory(ctx, t, c, ns).ResourceVersion
		w := watchInventory(ctx, t, c, ns, rv)
		defer w.Stop()
		seen := map[string]time.Duration{}
		writes := 0
		deadline := time.After(5 * time.Minute)
		for len(seen) < staleNodes {
			select {
			case ev, open := <-w.ResultChan():
				if !open {
					t.Fatal("the watch of the inventory ended")
				}
				ni, ok := ev.Object.(*v1alpha1.NodeInventory)
				if !ok || ev.Type != watch.Modified {
					continue
				}
				writes++
				now := time.Now()
				for _, n := range ni.Status.AtProvider.Nodes {
					i, err := strconv.Atoi(strings.TrimPrefix(n.Name, "node-"))
					if err != nil || i >= staleNodes || n.Stale != stale {
						continue
					}
					if _, ok := seen[n.Name]; !ok {
						seen[n.Name] = now.Sub(due(i))
					}
				}
			case <-deadline:
				t.Fatalf("%d of %d nodes published with stale=%t", len(seen), staleNodes, stale)
			}
		}
		delays := make([]time.Duration, 0, len(seen))
		for _, d := range seen {
			delays = append(delays, d)
		}
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		return writes, delays
	}
	for i := range staleNodes {
		b.paused[i].Store(true)
	}
	writes, delays := phase(true, func(i int) time.Time { return time.Unix(b.last[i].Load()+60, 0) })
	res.StaleWrites, res.StaleDelayP50Ms, res.StaleDelayMaxMs = writes, ms(delays[len(delays)/2]), ms(delays[len(delays)-1])
	t.Logf("%d nodes going stale without an event: %d status writes; published %.0f ms (p50), %.0f ms (max) after their heartbeat turned 60 s old",
		staleNodes, writes, res.StaleDelayP50Ms, res.StaleDelayMaxMs)

	resumed := time.Now()
	for i := range staleNodes {
		b.paused[i].Store(false)
	}
	writes, delays = phase(false, func(i int) time.Time { return time.Unix(max(b.last[i].Load(), resumed.Unix()), 0) })
	res.FreshWrites, res.FreshDelayP50Ms, res.FreshDelayMaxMs = writes, ms(delays[len(delays)/2]), ms(delays[len(delays)-1])
	t.Logf("%d nodes fresh again: %d status writes; published %.0f ms (p50), %.0f ms (max) after their new heartbeat (second resolution)",
		staleNodes, writes, res.FreshDelayP50Ms, res.FreshDelayMaxMs)
}

func patchAnnotation(ctx context.Context, t *testing.T, c client.Client, node, k, v string) {
	t.Helper()
	p := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
	if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		t.Fatal(err)
	}
}

func inventory(ctx context.Context, t *testing.T, c client.Client, ns string) *v1alpha1.NodeInventory {
	t.Helper()
	ni := &v1alpha1.NodeInventory{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bench"}, ni); err != nil {
		t.Fatal(err)
	}
	return ni
}

func watchInventory(ctx context.Context, t *testing.T, c client.WithWatch, ns, rv string) watch.Interface {
	t.Helper()
	w, err := c.Watch(ctx, &v1alpha1.NodeInventoryList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "bench"},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// countWrites counts the writes a watch sees from now on. The function it
// returns stops the watch and says how many there were.
func countWrites(w watch.Interface) func() int {
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Modified {
				n.Add(1)
			}
		}
	}()
	return func() int {
		w.Stop()
		<-done
		return int(n.Load())
	}
}

func waitEndpoint(t *testing.T, w watch.Interface, node, value string) time.Time {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatalf("the watch of the inventory ended before the change of %s reached it", node)
			}
			ni, ok := ev.Object.(*v1alpha1.NodeInventory)
			if !ok {
				continue
			}
			for _, n := range ni.Status.AtProvider.Nodes {
				if n.Name == node && n.Kilo != nil && n.Kilo.Endpoint == value {
					return time.Now()
				}
			}
		case <-deadline:
			t.Fatalf("the change of %s did not reach the inventory", node)
		}
	}
}

func waitNodes(ctx context.Context, t *testing.T, c client.Client, ns string, want int) {
	t.Helper()
	waitNamedNodes(ctx, t, c, ns, "bench", want)
}

func waitNamedNodes(ctx context.Context, t *testing.T, c client.Client, ns, name string, want int) {
	t.Helper()
	start := time.Now()
	wait.Eventually(ctx, t, fmt.Sprintf("inventory %s publishing %d Nodes", name, want), 10*time.Minute, 200*time.Millisecond, func() (bool, error) {
		ni := &v1alpha1.NodeInventory{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ni); err != nil {
			t.Fatal(err)
		}
		return len(ni.Status.AtProvider.Nodes) == want, fmt.Errorf("%d Nodes; conditions %v", len(ni.Status.AtProvider.Nodes), ni.Status.Conditions)
	})
	t.Logf("inventory %s publishes %d Nodes %s after they exist", name, want, time.Since(start).Round(time.Millisecond))
}

type provider struct {
	pid     int
	metrics string
	// pprof is the address of the provider's /debug/pprof endpoints.
	pprof string
	cmd   *exec.Cmd
}

// stop ends the provider, by its own pid.
func (p provider) stop() {
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}

// controlPlane starts the bench's control plane, stopped when the test
// ends, and returns its kubeconfig (for the provider) and an admin client.
func controlPlane(t *testing.T) ([]byte, client.WithWatch) {
	t.Helper()
	s, err := pcontroller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	env, mgmt := testenv.StartControlPlane(t, s)
	return env.KubeConfig, mgmt
}

// startProvider builds provider-kilomesh and runs it as its own process, so
// that its memory is its own.
func startProvider(t *testing.T, kubeconfig []byte) provider {
	t.Helper()
	top, err := testenv.Top()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "provider")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./provider/cmd/provider")
	build.Dir = top
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the provider: %v\n%s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := l.Addr().String()
	_ = l.Close()
	l, err = (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprof := l.Addr().String()
	_ = l.Close()
	log, err := os.Create(filepath.Join(dir, "provider.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--poll=30s", "--metrics-bind-address="+metrics, "--health-probe-bind-address=0", "--pprof-bind-address="+pprof) //nolint:noctx // Stopped below, by its own pid only.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("provider log:\n%s", tail(string(b), 4000))
		}
	})
	return provider{pid: cmd.Process.Pid, metrics: metrics, pprof: pprof, cmd: cmd}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// rss returns the resident and peak resident memory of a process, in MiB.
func rss(t *testing.T, pid int) (float64, float64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var now, peak float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			now = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return now, peak
}

// cpuSeconds returns the CPU time, user and system, that process pid has
// used so far (/proc/PID/stat; USER_HZ is 100 on Linux).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command, which is in parentheses: state is the
	// first, utime the 12th and stime the 13th.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	user, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (user + sys) / 100
}

// saveHeap writes the provider's heap profile (after a GC) to
// $BENCH_PPROF/NAME.heap when BENCH_PPROF names a folder; read it with
// go tool pprof -sample_index=inuse_space.
func saveHeap(ctx context.Context, t *testing.T, p provider, name string) {
	saveProfile(ctx, t, p, "heap?gc=1", name+".heap")
}

// saveCPU writes a CPU profile of the provider's next d to
// $BENCH_PPROF/NAME.cpu when BENCH_PPROF names a folder.
func saveCPU(ctx context.Context, t *testing.T, p provider, name string, d time.Duration) {
	saveProfile(ctx, t, p, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), name+".cpu")
}

func saveProfile(ctx context.Context, t *testing.T, p provider, query, file string) {
	dir := os.Getenv("BENCH_PPROF")
	if dir == "" {
		return
	}
	// Errorf, not Fatal: it may run on a goroutine of its own.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprof+"/debug/pprof/"+query, nil)
	if err != nil {
		t.Errorf("the provider's profile: %v", err)
		return
	}
	rsp, err := http.DefaultClient.Do(req)
	if ctx.Err() != nil {
		return // no longer wanted
	}
	if err != nil {
		t.Errorf("the provider's profile: %v", err)
		return
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if ctx.Err() != nil {
		return
	}
	if err != nil || rsp.StatusCode != http.StatusOK {
		t.Errorf("the provider's profile: %v (HTTP %d)", err, rsp.StatusCode)
		return
	}
	f := filepath.Join(dir, file)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Errorf("the provider's profile: %v", err)
		return
	}
	t.Logf("the provider's profile: %s", f)
}

// metric reads one unlabelled gauge from the provider's metrics endpoint.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
