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
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// TestExamples checks every provider-kilomesh and provider-kubernetes
// object of examples/provider against the real CRDs (a dry run).
func TestExamples(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	top, err := testenv.Top()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(top, "examples", "provider", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, u := range readObjects(t, f) {
				gv := u.GroupVersionKind().Group
				if gv != v1alpha1.Group && gv != clients.Group {
					continue
				}
				if ns := u.GetNamespace(); ns != "" {
					_ = cp.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				}
				if err := cp.kube.Create(ctx, u, client.DryRunAll); err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
				checked[u.GetKind()] = true
			}
		})
	}
	for _, k := range []string{v1alpha1.NodeInventoryKind, v1alpha1.PeerSetKind, clients.KindProviderConfig} {
		if !checked[k] {
			t.Errorf("no example of %s", k)
		}
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
