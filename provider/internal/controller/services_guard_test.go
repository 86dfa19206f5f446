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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/controller/servicesync"
)

// usedConfigs lists the configs the ProviderConfigUsages of a namespace
// name, as kind/name.
func usedConfigs(ctx context.Context, ns string) ([]string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(clients.UsageGroupVersionKind.GroupVersion().WithKind(clients.KindProviderConfigUsage + "List"))
	if err := cp.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := []string{}
	for _, u := range l.Items {
		kind, _, _ := unstructured.NestedString(u.Object, "providerConfigRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "providerConfigRef", "name")
		out = append(out, kind+"/"+name)
	}
	sort.Strings(out)
	return out, nil
}

func wantUsed(ctx context.Context, ns string, want ...string) func() error {
	return func() error {
		got, err := usedConfigs(ctx, ns)
		if err != nil {
			return err
		}
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("configs in use, -want, +got:\n%s", diff)
		}
		return nil
	}
}

// TestServiceSyncSourceConfigs: the configs of a ServiceSync's sources are
// checked as its member's is, and recorded as in use as long as it uses
// them.
func TestServiceSyncSourceConfigs(t *testing.T) {
	needAPIServers(t)
	ctx := context.Background()
	ns := namespace(ctx, t)
	a := startServiceMember(t, "a", "a-1111", "10.1.0.0/16")
	providerConfig(ctx, t, ns, "a", a.m.Kubeconfig)
	providerConfig(ctx, t, ns, "b", a.m.Kubeconfig)
	cp.mu.Lock()
	cp.inCluster = rest.CopyConfig(a.m.AdminConfig)
	cp.mu.Unlock()
	self := ns + "-self"
	if err := cp.kube.Create(ctx, pkConfig(clients.KindClusterProviderConfig, "", self, map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.kube.Delete(context.Background(), pkConfig(clients.KindClusterProviderConfig, "", self, nil))
	})

	s := serviceSync(ns, a)
	s.Spec.ForProvider.Sources = []v1alpha1.ServiceSource{
		{Name: "b", ClusterID: "b-2222", ProviderConfigRef: xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: "b"}},
		{Name: "self", ClusterID: "s-3333", ProviderConfigRef: xpv2.ProviderConfigReference{Kind: clients.KindClusterProviderConfig, Name: self}},
	}
	if err := cp.kube.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	get := func() (conditioned, error) {
		got := &v1alpha1.ServiceSync{}
		return got, cp.kube.Get(ctx, client.ObjectKeyFromObject(s), got)
	}
	update := func(change func(*v1alpha1.ServiceSync)) func() error {
		return func() error {
			got := &v1alpha1.ServiceSync{}
			if err := cp.kube.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
				return err
			}
			change(got)
			return cp.kube.Update(ctx, got)
		}
	}

	t.Run("NamespacesAreDNSLabels", func(t *testing.T) {
		// An empty namespace means every namespace to a watch.
		for i, bad := range []string{"", "Shop", "a.b"} {
			s := serviceSync(ns, a)
			s.Name = fmt.Sprintf("bad-namespace-%d", i)
			s.Spec.ForProvider.Namespaces = []string{"shop", bad}
			err := cp.kube.Create(ctx, s)
			if !kerrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.forProvider.namespaces[1]") {
				t.Errorf("namespace %q: want Invalid naming spec.forProvider.namespaces[1], got %v", bad, err)
			}
		}
	})

	t.Run("ProviderIdentityRefusedAsSource", func(t *testing.T) {
		// The member's config is a namespaced ProviderConfig, which may not
		// carry the provider's identity: neither may a source's.
		eventually(ctx, t, "the source with the provider's identity refused", synced(get, corev1.ConditionFalse,
			`spec.forProvider.sources[1].providerConfigRef: the identity of provider-kilomesh named by ClusterProviderConfig "`+self+`" is refused as a source`))
	})

	t.Run("SourcesRecordedInUse", func(t *testing.T) {
		eventually(ctx, t, "the refused source dropped", update(func(s *v1alpha1.ServiceSync) { s.Spec.ForProvider.Sources = s.Spec.ForProvider.Sources[:1] }))
		eventually(ctx, t, "the ServiceSync synced", synced(get, corev1.ConditionTrue, ""))
		eventually(ctx, t, "the member's and the source's configs in use", wantUsed(ctx, ns, "ProviderConfig/a", "ProviderConfig/b"))
	})

	t.Run("DroppedSourceReleased", func(t *testing.T) {
		eventually(ctx, t, "the source dropped", update(func(s *v1alpha1.ServiceSync) { s.Spec.ForProvider.Sources = nil }))
		eventually(ctx, t, "only the member's config in use", wantUsed(ctx, ns, "ProviderConfig/a"))
	})

	t.Run("DeletedReleasesAll", func(t *testing.T) {
		eventually(ctx, t, "a source again", update(func(s *v1alpha1.ServiceSync) {
			s.Spec.ForProvider.Sources = []v1alpha1.ServiceSource{{Name: "b", ClusterID: "b-2222", ProviderConfigRef: xpv2.ProviderConfigReference{Kind: clients.KindProviderConfig, Name: "b"}}}
		}))
		eventually(ctx, t, "the source's config in use again", wantUsed(ctx, ns, "ProviderConfig/a", "ProviderConfig/b"))
		if err := cp.kube.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the ServiceSync gone", gone(ctx, &v1alpha1.ServiceSync{ObjectMeta: s.ObjectMeta}))
		eventually(ctx, t, "no config in use", wantUsed(ctx, ns))
	})
}

// statusManagers lists the field managers of kilomesh that hold the status
// of an export of namespace shop.
func statusManagers(ctx context.Context, c client.Client, name string) ([]string, error) {
	x := &mcsv1beta1.ServiceExport{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, x); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range x.ManagedFields {
		if m.Subresource == "status" && strings.HasPrefix(m.Manager, "kilomesh-services") {
			out = append(out, m.Manager)
		}
	}
	sort.Strings(out)
	return out, nil
}

// TestServiceSyncSharedExport: two meshes that share a member namespace
// both export its Services, and one only writes an export's conditions:
// the one it names, or the first.
func TestServiceSyncSharedExport(t *testing.T) {
	needAPIServers(t)
	ctx := context.Background()
	ns := namespace(ctx, t)
	a := startServiceMember(t, "a", "a-1111", "10.1.0.0/16")
	providerConfig(ctx, t, ns, "a", a.m.Kubeconfig)
	exportService(ctx, t, a.c, "shop", "hello", false, 80, ep("10.1.1.5", true, ""))
	first := serviceSync(ns, a)
	if err := cp.kube.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	firstManager := servicesync.StatusManager([2]string{ns, "m"})
	eventually(ctx, t, "the first mesh writes hello's conditions", func() error {
		got, err := statusManagers(ctx, a.c, "hello")
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]string{firstManager}, got); diff != "" {
			return fmt.Errorf("status managers, -want, +got:\n%s", diff)
		}
		return nil
	})
	before, err := exportConditions(ctx, a.c, "shop", "hello")
	if err != nil {
		t.Fatal(err)
	}

	// A second mesh on the same member namespace, whose view differs: its
	// ServiceSync names another cluster ID and other networks, and a
	// second Service is exported, labelled for it.
	second := serviceSync(ns, a)
	second.Name = "services-a-m2"
	second.Spec.ForProvider.Selector = map[string]string{"kilomesh.io/mesh": "m2"}
	second.Spec.ForProvider.ClusterID = "a-m2"
	// Its networks leave hello's endpoint out: the conditions it would
	// write on hello differ from the first mesh's.
	second.Spec.ForProvider.Networks = []string{"10.9.0.0/16"}
	exportService(ctx, t, a.c, "shop", "mine", false, 81, ep("10.1.1.6", true, ""))
	x := &mcsv1beta1.ServiceExport{}
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "mine"}, x); err != nil {
		t.Fatal(err)
	}
	x.Labels = map[string]string{meshv1alpha1.LabelMesh: "m2"}
	if err := a.c.Update(ctx, x); err != nil {
		t.Fatal(err)
	}
	if err := cp.kube.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	secondManager := servicesync.StatusManager([2]string{ns, "m2"})
	eventually(ctx, t, "the second mesh writes the conditions of the export labelled for it", func() error {
		got, err := statusManagers(ctx, a.c, "mine")
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]string{secondManager}, got); diff != "" {
			return fmt.Errorf("status managers of mine, -want, +got:\n%s", diff)
		}
		return nil
	})
	// Both meshes read hello, which only one can import into the member
	// they share (the first holds the ServiceImport's name).
	eventually(ctx, t, "the second mesh imports mine", wantImportCount(ctx, second, 1))
	eventually(ctx, t, "the first mesh imports hello only", wantImportCount(ctx, first, 1))
	got, err := statusManagers(ctx, a.c, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{firstManager}, got); diff != "" {
		t.Errorf("the second mesh wrote hello's conditions: status managers, -want, +got:\n%s", diff)
	}
	after, err := exportConditions(ctx, a.c, "shop", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("hello's conditions changed: -want, +got:\n%s", diff)
	}

	// Once the first mesh goes, it releases hello's conditions, and the
	// second writes its own.
	if err := cp.kube.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the first ServiceSync gone", absent(ctx, cp.kube, first))
	eventually(ctx, t, "the second mesh writes hello's conditions", func() error {
		got, err := statusManagers(ctx, a.c, "hello")
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]string{secondManager}, got); diff != "" {
			return fmt.Errorf("status managers of hello, -want, +got:\n%s", diff)
		}
		return nil
	})
}

// wantImportCount waits until a ServiceSync reports n imports.
func wantImportCount(ctx context.Context, s *v1alpha1.ServiceSync, n int) func() error {
	return func() error {
		got := &v1alpha1.ServiceSync{}
		if err := cp.kube.Get(ctx, client.ObjectKeyFromObject(s), got); err != nil {
			return err
		}
		if got.Status.AtProvider.Imports != n {
			return fmt.Errorf("%s imports %d, want %d (%+v)", s.Name, got.Status.AtProvider.Imports, n, got.Status.Conditions)
		}
		return nil
	}
}

// TestServiceSyncImporterNodes: a ServiceSync made by hand declares a
// source's networks as 0.0.0.0/0, and the source exports endpoints at the
// addresses of the importer's own Node, internal and external, which lie
// in no network of the importer's: they are never imported, so the
// importer's pods are never sent to its own nodes under the source's name.
func TestServiceSyncImporterNodes(t *testing.T) {
	needAPIServers(t)
	ctx := context.Background()
	ns := namespace(ctx, t)
	a := startServiceMember(t, "a", "a-1111", "10.1.0.0/16")
	b := startServiceMember(t, "b", "b-2222", "10.2.0.0/16")
	for _, m := range []*svcMember{a, b} {
		providerConfig(ctx, t, ns, m.name, m.m.Kubeconfig)
	}
	node(ctx, t, b.c, "b-1", nil, nil, nil, []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "172.31.5.5"},
		{Type: corev1.NodeExternalIP, Address: "198.51.100.7"},
	}, corev1.ConditionTrue)
	exportService(ctx, t, a.c, "shop", "hello", false, 80, ep("10.1.1.5", true, ""), ep("172.31.5.5", true, ""), ep("198.51.100.7", true, ""))

	s := serviceSync(ns, b, b, a)
	s.Spec.ForProvider.Sources[0].Networks = []string{"0.0.0.0/0"}
	if err := cp.kube.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "hello imported into b without b's own node addresses", wantImport(ctx, b.c, "hello", &importState{
		Type: "ClusterSetIP", IPs: 1, IPIsSvc: true, Clusters: []string{"a-1111"}, Ready: map[string][]string{"a-1111": {"10.1.1.5"}},
	}))
}
