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

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
	inv "github.com/kilomesh/kilomesh/provider/inventory"
)

// hostileLabels is how many labels each hostile Node carries. A node
// owner may write 20,000 and more (a Node object holds up to 1.5 MiB), but
// 5,000 such Nodes (3.5 GB) do not fit the test's etcd, whose quota is
// 2 GiB: BENCH_LABELS changes it. Whatever the number, past
// inventory.MaxLabels the provider keeps none of them.
const hostileLabels = 2000

// MemoryResults are the figures of TestHostileLabels.
type MemoryResults struct {
	Nodes                int     `json:"nodes"`
	HostileLabels        int     `json:"hostileLabels"`
	PlainRSSMiB          float64 `json:"plainRSSMiB"`
	PlainPeakRSSMiB      float64 `json:"plainPeakRSSMiB"`
	PlainHeapInuseMiB    float64 `json:"plainHeapInuseMiB"`
	PlainHeldBytes       int     `json:"plainHeldBytes"`
	HostileRSSMiB        float64 `json:"hostileRSSMiB"`
	HostilePeakRSSMiB    float64 `json:"hostilePeakRSSMiB"`
	HostileHeapInuseMiB  float64 `json:"hostileHeapInuseMiB"`
	HostileHeldBytes     int     `json:"hostileHeldBytes"`
	HostileNodeJSONBytes int     `json:"hostileNodeJSONBytes"`
	RSSRatio             float64 `json:"rssRatio"`
}

// TestHostileLabels measures the provider watching a member of 5,000 real
// Nodes, then, as a process of its own against a control plane and member
// of their own, a member of 5,000 Nodes that each carry thousands of
// labels. What the provider keeps of a Node must not grow with its
// labels: the hostile member may take at most 1.5 times the memory of the
// plain one. It also reports the bytes the provider accounts for the Nodes
// of each member (inv.NodeBytes), the figure its per-member bound
// (inv.MaxNodeCacheBytes) counts.
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/bin go test -tags bench -count=1 -timeout 60m -v -run TestHostileLabels ./provider/bench/
func TestHostileLabels(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	nodes := envInt("BENCH_NODES", 5000)
	labels := envInt("BENCH_LABELS", hostileLabels)
	res := MemoryResults{Nodes: nodes, HostileLabels: labels}

	plain := realNode
	hostile := func(i int) *corev1.Node {
		n := realNode(i)
		for j := range labels {
			n.Labels[fmt.Sprintf("feature.node.example.com/f-%05d", j)] = "true"
		}
		return n
	}
	if b, err := json.Marshal(hostile(0)); err == nil {
		res.HostileNodeJSONBytes = len(b)
	}
	for i := range nodes {
		res.PlainHeldBytes += inv.NodeBytes(inv.Slim(plain(i)))
		res.HostileHeldBytes += inv.NodeBytes(inv.Slim(hostile(i)))
	}

	t.Run("Plain", func(t *testing.T) {
		res.PlainRSSMiB, res.PlainPeakRSSMiB, res.PlainHeapInuseMiB = watchMember(t, nodes, plain, func(ni *v1alpha1.NodeInventory) bool {
			return ni.Status.AtProvider.NodesIncomplete == "" && len(ni.Status.AtProvider.Nodes) > 0
		})
	})
	t.Run("Hostile", func(t *testing.T) {
		res.HostileRSSMiB, res.HostilePeakRSSMiB, res.HostileHeapInuseMiB = watchMember(t, nodes, hostile, func(ni *v1alpha1.NodeInventory) bool {
			return ni.Status.AtProvider.ObservedAt != nil && ni.Status.AtProvider.NodesIncomplete == inv.ReasonLabels
		})
	})
	if res.PlainRSSMiB > 0 {
		res.RSSRatio = res.HostileRSSMiB / res.PlainRSSMiB
	}
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
	if res.RSSRatio > 1.5 {
		t.Errorf("the provider watching %d Nodes of %d labels takes %.1f MiB, %.2f times the %.1f MiB of %d real Nodes; want at most 1.5 times",
			nodes, labels, res.HostileRSSMiB, res.RSSRatio, res.PlainRSSMiB, nodes)
	}
}

// watchMember starts a control plane, a member of count Nodes made by
// node, and the provider as a process of its own with two inventories of
// the member; once both are settled as done says, it returns the
// provider's RSS, peak RSS and heap in use, in MiB.
func watchMember(t *testing.T, count int, node func(i int) *corev1.Node, done func(ni *v1alpha1.NodeInventory) bool) (float64, float64, float64) {
	t.Helper()
	ctx := t.Context()
	kubeconfig, mgmt := controlPlane(t)
	m := testenv.StartMember(t, testenv.MemberOptions{})
	createMadeNodes(ctx, t, fastClient(t, m.AdminConfig), count, node)
	ns := "bench"
	mustCreate(ctx, t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err := testenv.ProviderConfig(ctx, mgmt, ns, "member", m.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	p := startProvider(t, kubeconfig)
	t.Cleanup(p.stop)
	halves := map[string][]string{"half-a": {"pool-0", "pool-1", "pool-2", "pool-3", "pool-4"}, "half-b": {"pool-5", "pool-6", "pool-7", "pool-8", "pool-9"}}
	for name, pools := range halves {
		ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		ni.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: "member"}
		ni.Spec.ForProvider.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: pools}}}
		mustCreate(ctx, t, mgmt, ni)
	}
	start := time.Now()
	deadline := start.Add(15 * time.Minute)
	for name := range halves {
		ni := &v1alpha1.NodeInventory{}
		wait.Eventually(ctx, t, "inventory "+name+" settled", time.Until(deadline), time.Second, func() (bool, error) {
			ni = &v1alpha1.NodeInventory{}
			if err := mgmt.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ni); err != nil {
				t.Fatal(err)
			}
			return done(ni), fmt.Errorf("%d Nodes, nodesIncomplete %q, conditions %v", len(ni.Status.AtProvider.Nodes), ni.Status.AtProvider.NodesIncomplete, ni.Status.Conditions)
		})
		t.Logf("inventory %s settled after %s: %d Nodes published, nodesIncomplete %q", name, time.Since(start).Round(time.Second), len(ni.Status.AtProvider.Nodes), ni.Status.AtProvider.NodesIncomplete)
	}
	time.Sleep(15 * time.Second)
	now, peak := rss(t, p.pid)
	heap := metric(t, p.metrics, "go_memstats_heap_inuse_bytes") / (1 << 20)
	t.Logf("provider memory watching %d Nodes: RSS %.1f MiB (peak %.1f MiB), heap in use %.1f MiB", count, now, peak, heap)
	return now, peak, heap
}

// createMadeNodes creates count Nodes made by node, with their status.
func createMadeNodes(ctx context.Context, t *testing.T, c client.Client, count int, node func(i int) *corev1.Node) {
	t.Helper()
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				n := node(i)
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
	for i := range count {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("created %d Nodes in %s", count, time.Since(start).Round(time.Millisecond))
}
