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
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

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

// TestSlimExportKeepsExported: a slim ServiceExport keeps the labels and
// annotations it exports within their bounds, whole; past them it keeps
// none, and says where, since a cut label would be carried as another.
func TestSlimExportKeepsExported(t *testing.T) {
	many := map[string]string{}
	for i := range MaxExportedEntries + 1 {
		many["k"+strconv.Itoa(i)] = "v"
	}
	cases := map[string]struct {
		reason string
		spec   mcsv1beta1.ServiceExportSpec
		want   mcsv1beta1.ServiceExportSpec
		says   string
	}{
		"Kept": {
			reason: "Labels and annotations within bounds are kept as they are.",
			spec:   mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"a": "b"}, ExportedAnnotations: map[string]string{"c": "d"}},
			want:   mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"a": "b"}, ExportedAnnotations: map[string]string{"c": "d"}},
		},
		"TooManyLabels": {
			reason: "More labels than an import carries: none kept.",
			spec:   mcsv1beta1.ServiceExportSpec{ExportedLabels: many, ExportedAnnotations: map[string]string{"c": "d"}},
			says:   "spec.exportedLabels: Too many",
		},
		"TooManyBytes": {
			reason: "Annotations past the bytes an import carries: none kept.",
			spec:   mcsv1beta1.ServiceExportSpec{ExportedAnnotations: map[string]string{"c": strings.Repeat("x", MaxExportedBytes)}},
			says:   "Too long",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := slimExport(&mcsv1beta1.ServiceExport{
				ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{AnnotationSlimRefused: "forged"}},
				Spec:       tc.spec,
			}).(*mcsv1beta1.ServiceExport)
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("%s\nspec, -want, +got:\n%s", tc.reason, diff)
			}
			if why := got.Annotations[AnnotationSlimRefused]; !strings.Contains(why, tc.says) || (tc.says == "" && why != "") {
				t.Errorf("%s\nrefused: %q, want it to say %q", tc.reason, why, tc.says)
			}
		})
	}
}

// TestSlimServiceKeepsWhatImportsCarry: a slim Service keeps what an
// import carries of it.
func TestSlimServiceKeepsWhatImportsCarry(t *testing.T) {
	spec := corev1.ServiceSpec{
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}},
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
	}
	got := slimService(&corev1.Service{Spec: spec}).(*corev1.Service).Spec
	if diff := cmp.Diff(spec, got); diff != "" {
		t.Errorf("spec, -want, +got:\n%s", diff)
	}
}
