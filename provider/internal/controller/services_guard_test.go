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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
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
