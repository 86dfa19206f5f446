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
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// TestControlPlanePermissions runs the provider in a control plane of its
// own as a ServiceAccount that holds exactly what Crossplane grants every
// provider plus examples/provider/control-plane-rbac.yaml, and checks that
// it can do all its work: the permissions the documentation asks for are
// enough.
func TestControlPlanePermissions(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	cfg, admin := ownControlPlane(t)
	top, err := testenv.Top()
	if err != nil {
		t.Fatal(err)
	}

	// What Crossplane's RBAC manager grants every provider: everything on
	// its own types (every CRD of package/provider/crds, SegmentSets
	// included), and on Secrets, ConfigMaps, Events and Leases.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "provider-kilomesh"}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "crossplane:provider:provider-kilomesh:system"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{v1alpha1.Group}, Resources: []string{"nodeinventories", "nodeinventories/status", "peersets", "peersets/status", "segmentsets", "servicesyncs", "servicesyncs/status"}, Verbs: []string{"*"}},
				{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"secrets", "configmaps", "events", "leases"}, Verbs: []string{"*"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "crossplane:provider:provider-kilomesh:system"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "crossplane:provider:provider-kilomesh:system"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "crossplane-system", Name: "provider-kilomesh"}},
		},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// And what the documentation adds.
	for _, u := range readObjects(t, filepath.Join(top, "examples", "provider", "control-plane-rbac.yaml")) {
		if u.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		if err := admin.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	token, err := testenv.ServiceAccountToken(ctx, cfg, "crossplane-system", "provider-kilomesh")
	if err != nil {
		t.Fatal(err)
	}
	restricted := &rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}

	reg := startOwnProvider(t, restricted, func(*pcontroller.Config) {})

	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := "team"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.ProviderConfig(ctx, admin, ns, "member", m.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"}}
	ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peers"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{desired("peer-a", keyA, "10.2.1.0/24")}}
	for _, obj := range []client.Object{ni, ps} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(obj interface {
		client.Object
		conditioned
	},
	) func() error {
		return func() error {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			for _, ct := range []xpv2.ConditionType{xpv2.TypeSynced, xpv2.TypeReady} {
				if c := obj.GetCondition(ct); c.Status != corev1.ConditionTrue {
					return fmt.Errorf("%s is %s: %s", ct, c.Status, c.Message)
				}
			}
			return nil
		}
	}
	eventually(ctx, t, "the restricted provider publishes the Nodes", ready(ni))
	eventually(ctx, t, "the restricted provider applies the Peers", ready(ps))
	eventually(ctx, t, "the Peer is in the member cluster", hasPeers(ctx, t, m.Admin, map[string]v1alpha1.DesiredPeer{"peer-a": desired("peer-a", keyA, "10.2.1.0/24")}))
	eventually(ctx, t, "the restricted provider records its use of the config", func() error {
		l, err := listUsages(ctx, admin, ns)
		if err != nil {
			return err
		}
		if l != 2 {
			return fmt.Errorf("%d usages, want 2", l)
		}
		return nil
	})

	// The restricted provider may watch the config and the Secret it uses:
	// with an hour between polls, only that watch can make the inventory
	// move to a rotated kubeconfig.
	u := remote.User{Kind: v1alpha1.NodeInventoryKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: ni.Name}}
	old, ok := reg.ClusterOf(u)
	if !ok {
		t.Fatal("the inventory uses no cluster")
	}
	memberToken, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, "kube-system", "kilomesh")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := testenv.Kubeconfig("https://"+m.Proxy.Addr(), m.AdminConfig.CAData, memberToken)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "member"}, Data: map[string][]byte{"kubeconfig": rotated}}
	if err := admin.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the restricted provider follows the rotated Secret", func() error {
		if k, _ := reg.ClusterOf(u); k == old {
			return errors.New("the inventory still uses the old kubeconfig")
		}
		return nil
	})

	for _, obj := range []client.Object{ni, ps} {
		if err := admin.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the restricted provider finishes the deletion", func() error {
			err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if err == nil {
				return fmt.Errorf("%s still exists", obj.GetName())
			}
			return client.IgnoreNotFound(err)
		})
	}
	eventually(ctx, t, "the Peer is deleted", hasPeers(ctx, t, m.Admin, nil))
	eventually(ctx, t, "the usages are deleted", func() error {
		l, err := listUsages(ctx, admin, ns)
		if err != nil {
			return err
		}
		if l != 0 {
			return fmt.Errorf("%d usages left", l)
		}
		return nil
	})
}

func listUsages(ctx context.Context, c client.Client, ns string) (int, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(clients.Group + "/" + clients.Version)
	l.SetKind(clients.KindProviderConfigUsage + "List")
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	return len(l.Items), nil
}
