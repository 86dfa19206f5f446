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

package remote

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

// TestServicesSharedByCount: two ServiceSyncs reading one cluster (two
// meshes, or two tenants behind one ClusterProviderConfig) keep each
// other's watches; a namespace's watches stop when no one reads it.
func TestServicesSharedByCount(t *testing.T) {
	r := NewRegistry(t.Context())
	// Nothing answers there: the watches start and retry, which is all the
	// test needs.
	creds := &clients.Credentials{Key: "shared", Config: &rest.Config{Host: "https://127.0.0.1:1"}}
	one := User{Kind: "ServiceSync", NamespacedName: types.NamespacedName{Namespace: "mesh-a", Name: "services-x"}, Part: "member"}
	two := User{Kind: "ServiceSync", NamespacedName: types.NamespacedName{Namespace: "tenant", Name: "services-x"}, Part: "source/x"}
	c := r.Acquire(one, creds)
	if c2 := r.Acquire(two, creds); c2 != c {
		t.Fatal("the same credentials reach two clusters")
	}
	read := func(u User, ns ...string) {
		t.Helper()
		c.UseServices(u, ns)
		for _, n := range ns {
			_, _ = c.ServiceObjects(t.Context(), n)
		}
	}
	want := func(what string, ns ...string) {
		t.Helper()
		if diff := cmp.Diff(ns, c.ServiceNamespaces()); diff != "" {
			t.Errorf("%s: watched namespaces, -want, +got:\n%s", what, diff)
		}
	}
	read(one, "shop")
	read(two, "shop", "web")
	started := c.started.Load()
	// The next observation of the first stops nothing of the second's.
	read(one, "shop")
	want("after the first's next observation", "shop", "web")
	if s := c.started.Load(); s != started {
		t.Errorf("%d watches started again, want 0", s-started)
	}
	read(two, "web")
	want("once the second stops reading shop, the first still does", "shop", "web")
	read(one)
	want("once the first reads nothing", "web")
	r.Release(two)
	want("once the second is released")
}

// TestSlimServiceKeepsMaker: a slim Service says whether kilomesh made it,
// and keeps nothing else of its managed fields.
func TestSlimServiceKeepsMaker(t *testing.T) {
	for name, tc := range map[string]struct {
		managers []string
		want     []metav1.ManagedFieldsEntry
	}{
		"Kilomesh": {managers: []string{"kubectl-label", ServicesFieldManager}, want: []metav1.ManagedFieldsEntry{{Manager: ServicesFieldManager}}},
		"Other":    {managers: []string{"kubectl-create"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Service{}
			for _, m := range tc.managers {
				s.ManagedFields = append(s.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)})
			}
			got := slimService(s).(*corev1.Service).ManagedFields
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("managed fields, -want, +got:\n%s", diff)
			}
		})
	}
}
