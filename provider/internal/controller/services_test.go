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

package controller_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/controller/servicesync"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// svcMember is a member cluster that shares Services: the MCS CRDs,
// namespaces shop (shared, with the grant of kilomesh-member-services) and
// other (not shared, no grant).
type svcMember struct {
	name, id string
	nets     []string
	m        *testenv.Member
	c        client.Client
}

func startServiceMember(t *testing.T, name, id string, nets ...string) *svcMember {
	t.Helper()
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{Services: true})
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
	for _, ns := range []string{"shop", "other"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The grant docs/services.md tells users to make, in the shared
	// namespace only.
	if err := c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kilomesh-services"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kilomesh-member-services"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "kilomesh"}},
	}); err != nil {
		t.Fatal(err)
	}
	return &svcMember{name: name, id: id, nets: nets, m: m, c: c}
}

// serviceSync is the ServiceSync the function composes for member m of a
// mesh of members.
func serviceSync(ns string, m *svcMember, members ...*svcMember) *v1alpha1.ServiceSync {
	s := &v1alpha1.ServiceSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "services-" + m.name},
		Spec: v1alpha1.ServiceSyncSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: ref("ProviderConfig", m.name)},
			ForProvider: v1alpha1.ServiceSyncParameters{
				Selector:   map[string]string{"kilomesh.io/mesh": "m"},
				ClusterID:  m.id,
				Namespaces: []string{"shop"},
				Networks:   m.nets,
				Family:     "IPv4",
			},
		},
	}
	for _, o := range members {
		if o != m {
			s.Spec.ForProvider.Sources = append(s.Spec.ForProvider.Sources, v1alpha1.ServiceSource{
				Name: o.name, ClusterID: o.id, Networks: o.nets,
				ProviderConfigRef: xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: o.name},
			})
		}
	}
	return s
}

func exportService(ctx context.Context, t *testing.T, c client.Client, ns, name string, headless bool, port int32, eps ...discoveryv1.Endpoint) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}},
		},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, o := range []client.Object{svc, slice, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func ep(addr string, ready bool, host string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if host != "" {
		e.Hostname = ptr.To(host)
	}
	return e
}

// imported returns what a member holds of an import: the ServiceImport's
// type, IPs and clusters, and the ready addresses of its EndpointSlices by
// source cluster.
type importState struct {
	Type     string
	IPs      int
	IPIsSvc  bool
	Clusters []string
	Ready    map[string][]string
	Hosts    []string
}

func importOf(ctx context.Context, c client.Client, ns, name string) (*importState, error) {
	si := &mcsv1beta1.ServiceImport{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
		return nil, err
	}
	st := &importState{Type: string(si.Spec.Type), IPs: len(si.Spec.IPs), Ready: map[string][]string{}}
	for _, cl := range si.Status.Clusters {
		st.Clusters = append(st.Clusters, cl.Cluster)
	}
	sl := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, sl, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	for _, s := range sl.Items {
		src := s.Labels[mcsv1beta1.LabelSourceCluster]
		st.Ready[src] = []string{}
		for _, e := range s.Endpoints {
			st.Ready[src] = append(st.Ready[src], e.Addresses[0])
			if e.Hostname != nil {
				st.Hosts = append(st.Hosts, *e.Hostname+"."+src)
			}
		}
		if si.Spec.Type == mcsv1beta1.ClusterSetIP {
			svc := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Labels[discoveryv1.LabelServiceName]}, svc); err != nil {
				return nil, err
			}
			st.IPIsSvc = len(si.Spec.IPs) == 1 && si.Spec.IPs[0] == svc.Spec.ClusterIP && svc.Spec.Selector == nil
		}
	}
	sort.Strings(st.Hosts)
	return st, nil
}

func wantImport(ctx context.Context, c client.Client, name string, want *importState) func() error {
	return func() error {
		got, err := importOf(ctx, c, "shop", name)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("-want, +got:\n%s", diff)
		}
		return nil
	}
}

func exportConditions(ctx context.Context, c client.Client, ns, name string) (map[string]string, error) {
	x := &mcsv1beta1.ServiceExport{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, x); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, cd := range x.Status.Conditions {
		out[cd.Type] = string(cd.Status) + "/" + cd.Reason
	}
	return out, nil
}

func wantExport(ctx context.Context, c client.Client, ns, name string, want map[string]string, sync ...string) func() error {
	return func() error {
		got, err := exportConditions(ctx, c, ns, name)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("-want, +got:\n%s%s", diff, syncConditions(ctx, sync...))
		}
		return nil
	}
}

// syncConditions quotes the conditions of a ServiceSync (namespace, name),
// for the message of a failed wait.
func syncConditions(ctx context.Context, nn ...string) string {
	if len(nn) != 2 {
		return ""
	}
	s := &v1alpha1.ServiceSync{}
	if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: nn[0], Name: nn[1]}, s); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("\n%s: %+v", nn[1], s.Status.Conditions)
}

func absent(ctx context.Context, c client.Client, obj client.Object) func() error {
	return func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if kerrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s %s still exists", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
}

func ownedCount(ctx context.Context, c client.Client, ns string) (int, error) {
	sel := client.MatchingLabels{"kilomesh.io/mesh": "m"}
	n := 0
	for _, l := range []client.ObjectList{&mcsv1beta1.ServiceImportList{}, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}} {
		if err := c.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			return 0, err
		}
		switch t := l.(type) {
		case *mcsv1beta1.ServiceImportList:
			n += len(t.Items)
		case *corev1.ServiceList:
			n += len(t.Items)
		case *discoveryv1.EndpointSliceList:
			n += len(t.Items)
		}
	}
	return n, nil
}

// TestServiceSync runs three members sharing namespace shop, each reached
// with exactly the grants of examples/member-rbac.yaml and a RoleBinding of
// kilomesh-member-services in shop.
func TestServiceSync(t *testing.T) {
	needAPIServers(t)
	ctx := context.Background()
	ns := namespace(ctx, t)
	a := startServiceMember(t, "a", "a-1111", "10.1.0.0/16", "192.168.1.0/24")
	b := startServiceMember(t, "b", "b-2222", "10.2.0.0/16")
	c := startServiceMember(t, "c", "c-3333", "10.3.0.0/16")
	members := []*svcMember{a, b, c}
	for _, m := range members {
		providerConfig(ctx, t, ns, m.name, m.m.Kubeconfig)
	}

	// Exports before the mesh: hello in a, with an endpoint not ready and
	// one outside a's networks (a hostNetwork pod on an undeclared node
	// network, or an address of b's pods); db, headless, in a; an export
	// in the namespace the mesh does not share.
	exportService(ctx, t, a.c, "shop", "hello", false, 80,
		ep("10.1.1.5", true, ""), ep("10.1.1.6", true, ""), ep("10.1.1.7", false, ""), ep("10.2.9.9", true, ""), ep("172.31.0.1", true, ""))
	exportService(ctx, t, a.c, "shop", "db", true, 5432, ep("10.1.2.1", true, "db-0"), ep("10.1.2.2", true, "db-1"))
	exportService(ctx, t, a.c, "other", "secret", false, 80, ep("10.1.3.1", true, ""))
	// A member admin who granted kilomesh more than the mesh declares: the
	// services grant in other too, in the exporter and in an importer. The
	// mesh still shares shop only.
	for _, m := range []*svcMember{a, b} {
		if err := m.c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "kilomesh-services"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kilomesh-member-services"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "kilomesh"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A ServiceImport made by hand in b, whose name a then exports.
	handMade := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "taken"}, Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Port: 1}}}}
	if err := b.c.Create(ctx, handMade); err != nil {
		t.Fatal(err)
	}
	exportService(ctx, t, a.c, "shop", "taken", false, 80, ep("10.1.4.1", true, ""))

	for _, m := range members {
		if err := cp.kube.Create(ctx, serviceSync(ns, m, members...)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("ExportImported", func(t *testing.T) {
		want := &importState{Type: "ClusterSetIP", IPs: 1, IPIsSvc: true, Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": {"10.1.1.5", "10.1.1.6"}}}
		eventually(ctx, t, "hello imported into b", wantImport(ctx, b.c, "hello", want))
		eventually(ctx, t, "hello imported into c", wantImport(ctx, c.c, "hello", want))
		eventually(ctx, t, "hello's export reports the endpoints it refused", wantExport(ctx, a.c, "shop", "hello", map[string]string{
			"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "False/NoConflicts", servicesync.ConditionEndpointsRefused: "True/" + servicesync.ReasonEndpointsRefused,
		}, ns, "services-a"))
	})
	t.Run("Headless", func(t *testing.T) {
		eventually(ctx, t, "db imported into b, headless", wantImport(ctx, b.c, "db", &importState{
			Type: "Headless", Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": {"10.1.2.1", "10.1.2.2"}}, Hosts: []string{"db-0.a-1111", "db-1.a-1111"},
		}))
	})
	t.Run("UndeclaredNamespace", func(t *testing.T) {
		// hello and db of shop are imported by now, so the ServiceSyncs
		// have planned; nothing of other reaches b, though the provider
		// may read and write there.
		eventually(ctx, t, "hello imported into b", wantImport(ctx, b.c, "hello", &importState{Type: "ClusterSetIP", IPs: 1, IPIsSvc: true, Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": {"10.1.1.5", "10.1.1.6"}}}))
		if _, err := importOf(ctx, b.c, "other", "secret"); !kerrors.IsNotFound(err) {
			t.Errorf("an export in an undeclared namespace was imported: %v", err)
		}
		if n, err := ownedCount(ctx, b.c, "other"); err != nil || n > 0 {
			t.Errorf("objects of the mesh in an undeclared namespace of b: %d (%v)", n, err)
		}
	})
	t.Run("HandMadeImport", func(t *testing.T) {
		eventually(ctx, t, "b's ServiceSync reports the name taken", func() error {
			s := &v1alpha1.ServiceSync{}
			if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "services-b"}, s); err != nil {
				return err
			}
			for _, p := range s.Status.AtProvider.Problems {
				if p.Service == "shop/taken" && p.Reason == v1alpha1.ReasonImportNameConflict {
					return nil
				}
			}
			return fmt.Errorf("problems: %v", s.Status.AtProvider.Problems)
		})
		got := &mcsv1beta1.ServiceImport{}
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(handMade), got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(handMade.Spec, got.Spec); diff != "" || len(got.Labels) > 0 {
			t.Errorf("the hand-made ServiceImport was changed: -want, +got:\n%s labels %v", diff, got.Labels)
		}
	})
	t.Run("AnotherMeshCollides", func(t *testing.T) {
		// Another mesh in the same namespace of the control plane joins b
		// and a, and so wants b's shop/hello too: it must neither take
		// over nor change the first mesh's import, and deleting it must
		// leave that import alone.
		other := serviceSync(ns, b, b, a)
		other.Name = "services-b-m2"
		other.Spec.ForProvider.Selector = map[string]string{"kilomesh.io/mesh": "m2"}
		other.Spec.ForProvider.ClusterID = "b-m2"
		if err := cp.kube.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		before := &mcsv1beta1.ServiceImport{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "hello"}, before); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the second mesh reports b's shop/hello taken", func() error {
			s := &v1alpha1.ServiceSync{}
			if err := cp.kube.Get(ctx, client.ObjectKeyFromObject(other), s); err != nil {
				return err
			}
			for _, p := range s.Status.AtProvider.Problems {
				if p.Service == "shop/hello" && p.Reason == v1alpha1.ReasonImportNameConflict {
					return nil
				}
			}
			return fmt.Errorf("problems: %v", s.Status.AtProvider.Problems)
		})
		check := func(when string) {
			t.Helper()
			got := &mcsv1beta1.ServiceImport{}
			if err := b.c.Get(ctx, client.ObjectKeyFromObject(before), got); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if diff := cmp.Diff(before.Labels, got.Labels); diff != "" {
				t.Errorf("%s: the first mesh's import changed hands: -want, +got:\n%s", when, diff)
			}
			if diff := cmp.Diff(before.Spec, got.Spec); diff != "" {
				t.Errorf("%s: the first mesh's import changed: -want, +got:\n%s", when, diff)
			}
		}
		check("with the second mesh")
		if err := cp.kube.Delete(ctx, other); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the second mesh's ServiceSync gone", absent(ctx, cp.kube, other))
		check("after the second mesh went")
		eventually(ctx, t, "hello still imported into b by the first mesh", wantImport(ctx, b.c, "hello", &importState{
			Type: "ClusterSetIP", IPs: 1, IPIsSvc: true, Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": {"10.1.1.5", "10.1.1.6"}},
		}))
	})
	t.Run("EndpointChurnWritesNoStatus", func(t *testing.T) {
		// The ServiceSyncs settle first: their first reconciles write
		// conditions and counts once.
		versions := func() map[string]string {
			out := map[string]string{}
			for _, m := range members {
				s := &v1alpha1.ServiceSync{}
				if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "services-" + m.name}, s); err != nil {
					t.Fatal(err)
				}
				out[m.name] = s.ResourceVersion
			}
			return out
		}
		before := versions()
		eventually(ctx, t, "the ServiceSyncs settled", func() error {
			time.Sleep(2 * time.Second)
			now := versions()
			if diff := cmp.Diff(before, now); diff != "" {
				before = now
				return fmt.Errorf("still written: %s", diff)
			}
			return nil
		})
		// 20 pod restarts in a: an endpoint goes and comes back with a new
		// address, each followed into b.
		for i := range 20 {
			sl := &discoveryv1.EndpointSlice{}
			if err := a.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "hello-abcde"}, sl); err != nil {
				t.Fatal(err)
			}
			addr := fmt.Sprintf("10.1.1.%d", 100+i)
			ready := []string{"10.1.1.5", addr}
			sort.Strings(ready)
			sl.Endpoints[1] = ep(addr, true, "")
			if err := a.c.Update(ctx, sl); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, "the new endpoint in b", wantImport(ctx, b.c, "hello", &importState{
				Type: "ClusterSetIP", IPs: 1, IPIsSvc: true, Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": ready},
			}))
		}
		for _, m := range members {
			s := &v1alpha1.ServiceSync{}
			if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "services-" + m.name}, s); err != nil {
				t.Fatal(err)
			}
			if s.ResourceVersion != before[m.name] {
				t.Errorf("ServiceSync services-%s was written during endpoint churn: resourceVersion %s -> %s", m.name, before[m.name], s.ResourceVersion)
			}
		}
	})
	t.Run("PortConflictOldestWins", func(t *testing.T) {
		exportService(ctx, t, c.c, "shop", "hello", false, 8080, ep("10.3.1.5", true, ""))
		eventually(ctx, t, "c's export reports the port conflict", wantExport(ctx, c.c, "shop", "hello", map[string]string{
			"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "True/PortConflict", servicesync.ConditionEndpointsRefused: "False/" + servicesync.ReasonAllRoutable,
		}, ns, "services-c"))
		eventually(ctx, t, "a's export, the oldest, reports the conflict too", wantExport(ctx, a.c, "shop", "hello", map[string]string{
			"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "True/PortConflict", servicesync.ConditionEndpointsRefused: "True/" + servicesync.ReasonEndpointsRefused,
		}, ns, "services-a"))
		eventually(ctx, t, "b imports hello from a and c, on a's port", func() error {
			got, err := importOf(ctx, b.c, "shop", "hello")
			if err != nil {
				return err
			}
			if diff := cmp.Diff([]string{"a-1111", "c-3333"}, got.Clusters); diff != "" {
				return fmt.Errorf("clusters: %s", diff)
			}
			si := &mcsv1beta1.ServiceImport{}
			if err := b.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "hello"}, si); err != nil {
				return err
			}
			if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
				return fmt.Errorf("ports %+v, want a's port 80 only", si.Spec.Ports)
			}
			if len(got.Ready["c-3333"]) != 1 {
				return fmt.Errorf("c's endpoints: %v", got.Ready)
			}
			return nil
		})
	})
	t.Run("ImportCarriesService", func(t *testing.T) {
		// A Service as the conformance suite makes it: ClientIP affinity
		// with a timeout, a traffic policy and distribution, and an export
		// of labels and annotations, one of them kilomesh's own.
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sticky"},
			Spec: corev1.ServiceSpec{
				Selector:              map[string]string{"app": "sticky"},
				Ports:                 []corev1.ServicePort{{Name: "tcp", Port: 42, Protocol: corev1.ProtocolTCP}},
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}},
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
				TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
			},
		}
		export := &mcsv1beta1.ServiceExport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sticky"},
			Spec: mcsv1beta1.ServiceExportSpec{
				ExportedLabels:      map[string]string{"dummy-label": "true", "kilomesh.io/mesh": "other"},
				ExportedAnnotations: map[string]string{"dummy-annotation": "true"},
			},
		}
		for _, o := range []client.Object{svc, export} {
			if err := a.c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		check := func(labels map[string]string) func() error {
			return func() error {
				si := &mcsv1beta1.ServiceImport{}
				if err := b.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "sticky"}, si); err != nil {
					return err
				}
				want := mcsv1beta1.ServiceImportSpec{
					Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "tcp", Port: 42, Protocol: corev1.ProtocolTCP}},
					SessionAffinity: svc.Spec.SessionAffinity, SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
					InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy, TrafficDistribution: svc.Spec.TrafficDistribution,
					IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPs: si.Spec.IPs,
				}
				if diff := cmp.Diff(want, si.Spec); diff != "" {
					return fmt.Errorf("spec, -want, +got:\n%s", diff)
				}
				if len(si.Spec.IPs) != 1 {
					return fmt.Errorf("IPs %v, want one of IPv4", si.Spec.IPs)
				}
				if si.Labels["kilomesh.io/mesh"] != "m" {
					return fmt.Errorf("the import's mesh label is %q", si.Labels["kilomesh.io/mesh"])
				}
				for k, v := range labels {
					if got, ok := si.Labels[k]; v != "" && got != v || v == "" && ok {
						return fmt.Errorf("labels %v, want %s=%q", si.Labels, k, v)
					}
				}
				if si.Annotations["dummy-annotation"] != "true" {
					return fmt.Errorf("annotations %v", si.Annotations)
				}
				return nil
			}
		}
		eventually(ctx, t, "b's import of sticky carries the Service and the export's labels", check(map[string]string{"dummy-label": "true"}))
		// A label no longer exported goes from the import.
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(export), export); err != nil {
			t.Fatal(err)
		}
		export.Spec.ExportedLabels = map[string]string{"dummy-label2": "true"}
		if err := a.c.Update(ctx, export); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "b's import of sticky follows the export's labels", check(map[string]string{"dummy-label": "", "dummy-label2": "true"}))
	})
	t.Run("ExportDeleted", func(t *testing.T) {
		if err := a.c.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "db's import gone from b", absent(ctx, b.c, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}}))
		eventually(ctx, t, "db's EndpointSlices gone from b", func() error {
			sl := &discoveryv1.EndpointSliceList{}
			if err := b.c.List(ctx, sl, client.InNamespace("shop"), client.MatchingLabels{mcsv1beta1.LabelServiceName: "db"}); err != nil {
				return err
			}
			if len(sl.Items) > 0 {
				return fmt.Errorf("%d left", len(sl.Items))
			}
			return nil
		})
	})
	t.Run("MemberRemoved", func(t *testing.T) {
		// The mesh drops b: its ServiceSync goes, the others no longer
		// name it.
		if err := cp.kube.Delete(ctx, &v1alpha1.ServiceSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "services-b"}}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "every import of the mesh gone from b", func() error {
			n, err := ownedCount(ctx, b.c, "shop")
			if err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%d objects of the mesh left", n)
			}
			return nil
		})
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(handMade), &mcsv1beta1.ServiceImport{}); err != nil {
			t.Errorf("the hand-made ServiceImport is gone: %v", err)
		}
	})
}
