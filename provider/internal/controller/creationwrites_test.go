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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// TestInventoryCreationWrites counts the writes of a new inventory until it
// publishes its member's Nodes: each is a watch event of every mesh that
// composes or requires it, and Crossplane's circuit breaker charges two
// tokens for each. A new inventory costs two: its finalizer, then one status
// that holds the Nodes and every condition. The provider of the test waits
// for the member's first lists far longer than the default second, so that
// a loaded machine cannot make the count vary.
func TestInventoryCreationWrites(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	cfg, kube := ownControlPlane(t)
	m := testenv.StartMember(t, testenv.MemberOptions{})
	startOwnProvider(t, cfg, func(c *pcontroller.Config) { c.FirstListWait = waitTimeout })
	ns := "team"
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.ProviderConfig(ctx, kube, ns, "member", m.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	node(ctx, t, m.Admin, "node-a", nil, nil, []string{"10.1.1.0/24"}, nil, corev1.ConditionTrue)

	w, err := kube.Watch(ctx, &v1alpha1.NodeInventoryList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inv"}}
	ni.Spec.ForProvider.OwnedPeerLabels = map[string]string{"kilomesh.io/mesh": "m"}
	ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	if err := kube.Create(ctx, ni); err != nil {
		t.Fatal(err)
	}
	var writes []string
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev := <-w.ResultChan():
			ni, ok := ev.Object.(*v1alpha1.NodeInventory)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			cs := make([]string, 0, len(ni.Status.Conditions))
			for _, c := range ni.Status.Conditions {
				cs = append(cs, fmt.Sprintf("%s=%s", c.Type, c.Status))
			}
			writes = append(writes, fmt.Sprintf("finalizers %v, %d nodes, conditions %s", ni.Finalizers, ni.Status.AtProvider.NodeCount, strings.Join(cs, " ")))
			if ni.Status.AtProvider.NodeCount != 1 || ni.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
				continue
			}
			if len(writes) > 2 {
				t.Errorf("A new inventory is written twice until it publishes its member: its finalizer, then a status with the Nodes and every condition. It was written %d times:\n%s", len(writes), strings.Join(writes, "\n"))
			}
			return
		case <-deadline:
			t.Fatalf("the inventory did not publish its member: %v", writes)
		}
	}
}
