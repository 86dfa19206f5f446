//go:build bench

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// svcBenchMember is a member of the services bench: its API server, an
// admin client, and its pod network, where its endpoints lie.
type svcBenchMember struct {
	name, id, net string
	c             client.Client
}

// TestServicesAtScale shares BENCH_SERVICES Services (default 1,000), each
// with BENCH_ENDPOINTS ready endpoints (default 10), exported in turn by
// BENCH_MEMBERS members (default 5, a kube-apiserver each) to every other
// member, through one provider-kilomesh process and the ServiceSyncs the
// function composes for such a mesh. It reports how long until every
// member holds every other member's imports, the provider's memory, and,
// for BENCH_CHURN endpoint changes (default 50, each one endpoint of one
// export turned not ready or ready again), the time until an importer's
// EndpointSlice shows it, with the writes to the control plane's
// ServiceSyncs meanwhile: endpoints flow between members, not through the
// control plane, so a mesh's XR sees no watch event for them.
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/bin go test -tags bench -count=1 -v -timeout 30m -run TestServicesAtScale ./provider/bench/
func TestServicesAtScale(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	services, endpoints := envInt("BENCH_SERVICES", 1000), envInt("BENCH_ENDPOINTS", 10)
	count, churn := envInt("BENCH_MEMBERS", 5), envInt("BENCH_CHURN", 50)
	kubeconfig, mgmt := controlPlane(t)
	ns := "bench"
	mustCreate(ctx, t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	members := make([]*svcBenchMember, count)
	for k := range members {
		members[k] = startSvcBenchMember(t, k, mgmt, ns)
	}
	exporter := func(i int) *svcBenchMember { return members[i%count] }
	for i := range services {
		exportAtScale(ctx, t, exporter(i), i, endpoints)
	}
	p := startProvider(t, kubeconfig)
	time.Sleep(5 * time.Second)
	before, _ := rss(t, p.pid)
	cpu := cpuSeconds(t, p.pid)

	start := time.Now()
	for _, m := range members {
		mustCreate(ctx, t, mgmt, svcBenchSync(ns, m, members))
	}
	for _, m := range members {
		// As the MCS API has it, an exporter holds the ServiceImport of
		// its own exports too.
		waitImports(t, m, services)
	}
	took := time.Since(start)
	time.Sleep(5 * time.Second)
	after, peak := rss(t, p.pid)
	syncCPU := cpuSeconds(t, p.pid) - cpu

	// Every write to a ServiceSync is a watch event of its mesh's XR.
	w, err := mgmt.Watch(ctx, &v1alpha1.ServiceSyncList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	writes := countSyncWrites(w)
	cpu = cpuSeconds(t, p.pid)
	churnStart := time.Now()
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		saveCPU(ctx, t, p, fmt.Sprintf("services-%dx%d-%d-churn", services, endpoints, count), 10*time.Second)
	}()
	var delays []time.Duration
	for n := range churn {
		// An endpoint turns not ready, then ready again, then the next
		// Service's.
		i := n / 2 * 7 % services
		delays = append(delays, changeEndpoint(t, exporter(i), members[(i+1)%count], i, n%2 == 1))
	}
	// Whatever the changes wrote has landed after a while.
	time.Sleep(2 * time.Second)
	churnWrites := writes()
	w.Stop()
	churnCPU, churnWall := cpuSeconds(t, p.pid)-cpu, time.Since(churnStart)
	<-profiled

	// New exports, one after the other, each until the next member holds
	// its import with endpoints.
	var exports []time.Duration
	for j := range envInt("BENCH_EXPORTS", 20) {
		i := services + j
		to := members[(i+1)%count]
		start := time.Now()
		exportAtScale(ctx, t, exporter(i), i, endpoints)
		exports = append(exports, waitImport(t, to, i, start))
	}
	time.Sleep(2 * time.Second)
	t.Logf("one provider, %d members, %d Services of %d endpoints each exported in turn by them to every other member: every member held every import %.1f s after the ServiceSyncs were created (%d ServiceImports in all, an exporter's own included), for %.1f s of the provider's CPU; provider RSS %.1f MiB before, %.1f MiB (peak %.1f MiB) after",
		count, services, endpoints, took.Seconds(), services*count, syncCPU, before, after, peak)
	t.Logf("%d endpoint changes (one endpoint of one export turned not ready or ready), each seen in an importer's EndpointSlice: %s; the provider's CPU meanwhile %.1f s in %.1f s (%.0f%% of a core); ServiceSync writes in the control plane meanwhile: %d",
		churn, percentiles(delays), churnCPU, churnWall.Seconds(), 100*churnCPU/churnWall.Seconds(), churnWrites)
	t.Logf("%d new exports, one after the other, each held by an importer as a ServiceImport with its endpoints: %s", len(exports), percentiles(exports))
	if churnWrites != 0 {
		t.Errorf("endpoint changes wrote the control plane's ServiceSyncs %d times; want none: endpoints must not reach the mesh's XR", churnWrites)
	}
}

// startSvcBenchMember starts member k with the Multi-Cluster Services CRDs,
// namespace shop and the grant docs/services.md asks for, and its
// ProviderConfig in the control plane.
func startSvcBenchMember(t *testing.T, k int, mgmt client.Client, ns string) *svcBenchMember {
	t.Helper()
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{Services: true, ServiceCIDR: "10.96.0.0/16"})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1beta1.Install} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(m.AdminConfig, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})
	mustCreate(ctx, t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kilomesh-services"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kilomesh-member-services"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "kilomesh"}},
	})
	name := fmt.Sprintf("member-%d", k)
	if err := testenv.ProviderConfig(ctx, mgmt, ns, name, m.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return &svcBenchMember{name: name, id: name + ".bench", net: fmt.Sprintf("10.%d.0.0/16", 10+k), c: c}
}

// svcBenchSync is the ServiceSync of member m of a mesh of members.
func svcBenchSync(ns string, m *svcBenchMember, members []*svcBenchMember) *v1alpha1.ServiceSync {
	s := &v1alpha1.ServiceSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "services-" + m.name},
		Spec: v1alpha1.ServiceSyncSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: m.name}},
			ForProvider: v1alpha1.ServiceSyncParameters{
				Selector:   map[string]string{"kilomesh.io/mesh": "mesh"},
				ClusterID:  m.id,
				Namespaces: []string{"shop"},
				Networks:   []string{m.net},
				Family:     "IPv4",
			},
		},
	}
	for _, o := range members {
		if o != m {
			s.Spec.ForProvider.Sources = append(s.Spec.ForProvider.Sources, v1alpha1.ServiceSource{
				Name: o.name, ClusterID: o.id, Networks: []string{o.net},
				ProviderConfigRef: xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: o.name},
			})
		}
	}
	return s
}

// svcName is Service i of the bench.
func svcName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// endpointAddr is endpoint e of Service i, in m's pod network.
func endpointAddr(m *svcBenchMember, i, e int) string {
	var a, b int
	fmt.Sscanf(m.net, "10.%d.", &a) //nolint:errcheck // The bench's own format.
	b = i*16 + e
	return fmt.Sprintf("10.%d.%d.%d", a, b/250, b%250+1)
}

// exportAtScale creates Service i in m, its EndpointSlice of n ready
// endpoints and its ServiceExport.
func exportAtScale(ctx context.Context, t *testing.T, m *svcBenchMember, i, n int) {
	t.Helper()
	name := svcName(i)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for e := range n {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpointAddr(m, i, e)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	for _, o := range []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		},
		slice,
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}},
	} {
		mustCreate(ctx, t, m.c, o)
	}
}

// waitImports waits until m holds want ServiceImports, each with an
// imported EndpointSlice.
func waitImports(t *testing.T, m *svcBenchMember, want int) {
	t.Helper()
	var imports, sliced int
	next := time.Now().Add(time.Minute)
	wait.Eventually(t.Context(), t, fmt.Sprintf("%s holding %d ServiceImports with endpoints", m.name, want), 15*time.Minute, 500*time.Millisecond, func() (bool, error) {
		if time.Now().After(next) {
			t.Logf("%s holds %d ServiceImports, %d with endpoints; waiting for %d", m.name, imports, sliced, want)
			next = next.Add(time.Minute)
		}
		sis := &mcsv1beta1.ServiceImportList{}
		sls := &discoveryv1.EndpointSliceList{}
		if err := m.c.List(t.Context(), sis, client.InNamespace("shop")); err != nil {
			return false, err
		}
		if err := m.c.List(t.Context(), sls, client.InNamespace("shop"), client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
			return false, err
		}
		imports, sliced = len(sis.Items), 0
		seen := map[string]bool{}
		for _, s := range sls.Items {
			if n := s.Labels[mcsv1beta1.LabelServiceName]; !seen[n] && len(s.Endpoints) > 0 {
				seen[n] = true
				sliced++
			}
		}
		return imports == want && sliced == want, fmt.Errorf("%d ServiceImports, %d with endpoints", imports, sliced)
	})
}

// changeEndpoint sets the readiness of the first endpoint of Service i in
// from, and returns how long until the EndpointSlice to imports shows it.
func changeEndpoint(t *testing.T, from, to *svcBenchMember, i int, ready bool) time.Duration {
	t.Helper()
	ctx := t.Context()
	name := svcName(i)
	sl := &discoveryv1.EndpointSlice{}
	if err := from.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name + "-abcde"}, sl); err != nil {
		t.Fatal(err)
	}
	addr := sl.Endpoints[0].Addresses[0]
	sl.Endpoints[0].Conditions.Ready = ptr.To(ready)
	if err := from.c.Update(ctx, sl); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var took time.Duration
	wait.Eventually(ctx, t, fmt.Sprintf("%s's EndpointSlice of %s showing %s ready=%t", to.name, name, addr, ready), 2*time.Minute, 20*time.Millisecond, func() (bool, error) {
		l := &discoveryv1.EndpointSliceList{}
		if err := to.c.List(ctx, l, client.InNamespace("shop"), client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: from.id}); err != nil {
			return false, err
		}
		took = time.Since(start)
		return readyIn(l.Items, addr) == ready, nil
	})
	return took
}

// waitImport returns how long after start member m holds the import of
// Service i, with its endpoints.
func waitImport(t *testing.T, m *svcBenchMember, i int, start time.Time) time.Duration {
	t.Helper()
	ctx := t.Context()
	name := svcName(i)
	var took time.Duration
	wait.Eventually(ctx, t, fmt.Sprintf("%s holding the import of %s with endpoints", m.name, name), time.Until(start.Add(2*time.Minute)), 20*time.Millisecond, func() (bool, error) {
		si := &mcsv1beta1.ServiceImport{}
		l := &discoveryv1.EndpointSliceList{}
		if err := m.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, si); err != nil {
			return false, err
		}
		if err := m.c.List(ctx, l, client.InNamespace("shop"), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}, client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
			return false, err
		}
		took = time.Since(start)
		return len(l.Items) > 0 && len(l.Items[0].Endpoints) > 0, nil
	})
	return took
}

// percentiles sorts ds and describes them: p50, p95 and max.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no sample"
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ds[int(q*float64(len(ds)-1))].Seconds() }
	return fmt.Sprintf("p50 %.2f s, p95 %.2f s, max %.2f s (%d samples)", at(0.5), at(0.95), at(1), len(ds))
}

// readyIn reports whether slices hold addr as a ready endpoint.
func readyIn(slices []discoveryv1.EndpointSlice, addr string) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && e.Addresses[0] == addr && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				return true
			}
		}
	}
	return false
}

// countSyncWrites counts the modifications a watch of ServiceSyncs sees.
func countSyncWrites(w watch.Interface) func() int {
	var mu sync.Mutex
	n := 0
	go func() {
		for e := range w.ResultChan() {
			if e.Type == watch.Modified {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}
