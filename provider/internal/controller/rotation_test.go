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
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// remoteGoroutines returns the stacks of the goroutines of member-cluster
// and credential watches: those the remote package started or runs in,
// except the reaper, which runs for the life of the provider.
func remoteGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "provider/internal/remote.") && !strings.Contains(g, "remote.(*Registry).Reap") {
			out = append(out, g)
		}
	}
	return out
}

// closeWithin bounds the wait for the connections of stopped watches to
// close. client-go would close idle connections after 90 seconds by
// itself; a stopped watch closes them at once, so the bound sits far below
// the one and far above the other.
const closeWithin = 30 * time.Second

// TestCredentialRotation rotates a member's kubeconfig Secret while the
// provider runs: to a new token and server address, to a token the member
// refuses, to a CA that does not verify it, to another Secret, and to a new
// CA bundle. Each change takes effect through the
// watch of the Secret or config, without a restart; only the rotated
// member's watch is rebuilt; a refused token keeps the last known nodes
// and deletes no Peer; and the watches and connections of credentials no
// longer used are gone.
func TestCredentialRotation(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	before := len(remoteGoroutines())

	m := testenv.StartMember(t, testenv.MemberOptions{})
	other := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "a", m.Kubeconfig)
	providerConfig(ctx, t, ns, "b", other.Kubeconfig)
	t.Cleanup(func() { deleteInventories(t, ns) })

	node(ctx, t, m.Admin, "a-1", nil, map[string]string{kilov1alpha1.AnnotationKey: keyA}, nil, nil, "")
	node(ctx, t, other.Admin, "b-1", nil, map[string]string{kilov1alpha1.AnnotationKey: keyB}, nil, nil, "")
	nodeA1 := v1alpha1.ObservedNode{Name: "a-1", Kilo: &v1alpha1.KiloAnnotations{Key: keyA}, Stale: true}
	nodeA2 := v1alpha1.ObservedNode{Name: "a-2", Kilo: &v1alpha1.KiloAnnotations{Key: keyC}, Stale: true}

	inventory(ctx, t, ns, "a", "a", v1alpha1.NodeInventoryParameters{})
	inventory(ctx, t, ns, "b", "b", v1alpha1.NodeInventoryParameters{})
	peer := desired("peer-b", keyB, "10.2.2.0/24")
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-a"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "a")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{peer}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	published(ctx, t, ns, "a", []v1alpha1.ObservedNode{nodeA1})
	published(ctx, t, ns, "b", []v1alpha1.ObservedNode{{Name: "b-1", Kilo: &v1alpha1.KiloAnnotations{Key: keyB}, Stale: true}})
	eventually(ctx, t, "the PeerSet's Peer is applied", hasPeers(ctx, t, m.Admin, map[string]v1alpha1.DesiredPeer{"peer-b": peer}))

	userA := remote.User{Kind: v1alpha1.NodeInventoryKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: "a"}}
	userB := remote.User{Kind: v1alpha1.NodeInventoryKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: "b"}}
	keyOf := func(u remote.User) string {
		t.Helper()
		k, ok := cp.reg.ClusterOf(u)
		if !ok {
			t.Fatalf("%s uses no cluster", u.Name)
		}
		return k
	}
	watchB, ok := cp.reg.Watch(keyOf(userB))
	if !ok {
		t.Fatal("cluster b is not watched")
	}
	// The untouched member's watch must never be rebuilt.
	unchangedB := func(t *testing.T) {
		t.Helper()
		w, ok := cp.reg.Watch(keyOf(userB))
		if !ok || w.ID != watchB.ID || w.Started != watchB.Started {
			t.Errorf("cluster b's watch was rebuilt: before %+v, now %+v (watched %t)", watchB, w, ok)
		}
	}
	setSecret := func(name string, kubeconfig []byte) {
		t.Helper()
		s := &corev1.Secret{}
		if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"kubeconfig": kubeconfig}
		if err := cp.kube.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// moved waits until every user of config a reaches the cluster through
	// other credentials than old, and returns the new key.
	moved := func(what, old string) string {
		t.Helper()
		start := time.Now()
		var now string
		eventually(ctx, t, what, func() error {
			now = keyOf(userA)
			if now == old {
				return errors.New("inventory a still uses the old credentials")
			}
			if k, _ := cp.reg.ClusterOf(remote.User{Kind: v1alpha1.PeerSetKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: "to-a"}}); k != now {
				return errors.New("PeerSet to-a does not use the new credentials yet")
			}
			if cp.reg.Watching(old) {
				return errors.New("the watch of the old credentials still runs")
			}
			return nil
		})
		t.Logf("%s: %s from the change to the new watch", what, time.Since(start).Round(time.Millisecond))
		return now
	}

	t.Run("NewTokenAndServer", func(t *testing.T) {
		old := keyOf(userA)
		if m.Proxy.Open() == 0 {
			t.Fatal("no connection through the proxy of member a before the rotation")
		}
		// A new ServiceAccount token, and the API server's own address
		// instead of the proxy in front of it.
		token, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, "kube-system", "kilomesh")
		if err != nil {
			t.Fatal(err)
		}
		kc, err := testenv.Kubeconfig(m.AdminConfig.Host, m.AdminConfig.CAData, token)
		if err != nil {
			t.Fatal(err)
		}
		setSecret("a", kc)
		moved("the rotated Secret is used", old)
		// The old credentials' connections are closed, not left idle.
		eventuallyWithin(ctx, t, closeWithin, "the old connections are closed", func() error {
			if n := m.Proxy.Open(); n != 0 {
				return fmt.Errorf("%d connections to the old address are still open", n)
			}
			return nil
		})
		node(ctx, t, m.Admin, "a-2", nil, map[string]string{kilov1alpha1.AnnotationKey: keyC}, nil, nil, "")
		published(ctx, t, ns, "a", []v1alpha1.ObservedNode{nodeA1, nodeA2})
		unchangedB(t)
	})

	// refused writes a kubeconfig the member refuses into Secret a: both
	// users of it say why, naming the Secret and not the credentials, the
	// inventory keeps its last known nodes, and the untouched member's
	// watch runs on.
	refused := func(t *testing.T, kc []byte, credential, why string) {
		t.Helper()
		setSecret("a", kc)
		msg := fmt.Sprintf("%s of Secret %s/a", why, ns)
		eventually(ctx, t, "inventory a says why", synced(inventoryOf(ctx, ns, "a"), corev1.ConditionFalse, msg))
		eventually(ctx, t, "PeerSet to-a says why", synced(peerSetOf(ctx, ns, "to-a"), corev1.ConditionFalse, msg))
		ni, err := getInventory(ctx, ns, "a")
		if err != nil {
			t.Fatal(err)
		}
		// When the nodes turned stale is TestNodeInventory's.
		if d := cmp.Diff([]v1alpha1.ObservedNode{nodeA1, nodeA2}, ni.Status.AtProvider.Nodes, cmpopts.IgnoreFields(v1alpha1.ObservedNode{}, "StaleSince")); d != "" {
			t.Errorf("the last known nodes are not kept: -want +got:\n%s", d)
		}
		if c := ni.GetCondition(xpv2.TypeSynced); strings.Contains(c.Message, credential) {
			t.Errorf("Synced quotes the credentials: %q", c.Message)
		}
		unchangedB(t)
	}

	t.Run("RefusedToken", func(t *testing.T) {
		const revoked = "revoked-token-must-not-be-printed"
		kc, err := testenv.Kubeconfig(m.AdminConfig.Host, m.AdminConfig.CAData, revoked)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, kc, revoked, "the cluster does not accept the credentials")
	})

	t.Run("WrongCA", func(t *testing.T) {
		// A valid token, but the CA of another cluster: the member's
		// serving certificate cannot be verified.
		token, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, "kube-system", "kilomesh")
		if err != nil {
			t.Fatal(err)
		}
		kc, err := testenv.Kubeconfig(m.AdminConfig.Host, other.AdminConfig.CAData, token)
		if err != nil {
			t.Fatal(err)
		}
		refused(t, kc, token, "cannot verify the cluster's serving certificate with the certificate-authority-data and server")
	})

	t.Run("ConfigPointedAtAnotherSecret", func(t *testing.T) {
		old := keyOf(userA)
		token, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, "kube-system", "kilomesh")
		if err != nil {
			t.Fatal(err)
		}
		kc, err := testenv.Kubeconfig("https://"+m.Proxy.Addr(), m.AdminConfig.CAData, token)
		if err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-fixed"}, Data: map[string][]byte{"kubeconfig": kc}}
		if err := cp.kube.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		pc := &unstructured.Unstructured{}
		pc.SetGroupVersionKind(pkConfig(clients.KindProviderConfig, ns, "a", nil).GroupVersionKind())
		if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, pc); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(pc.Object, "a-fixed", "spec", "credentials", "secretRef", "name"); err != nil {
			t.Fatal(err)
		}
		if err := cp.kube.Update(ctx, pc); err != nil {
			t.Fatal(err)
		}
		moved("the config's new Secret is used", old)
		published(ctx, t, ns, "a", []v1alpha1.ObservedNode{nodeA1, nodeA2})
		eventually(ctx, t, "the PeerSet recovers", synced(peerSetOf(ctx, ns, "to-a"), corev1.ConditionTrue, ""))
		eventually(ctx, t, "the Secret no longer named is not watched", func() error {
			if cp.reg.Watches(clients.Source{Kind: clients.KindSecret, Namespace: ns, Name: "a"}) {
				return errors.New("Secret a is still watched")
			}
			return nil
		})
		unchangedB(t)
	})

	t.Run("NewCABundle", func(t *testing.T) {
		// The member's CA next to a second one, as during a CA rotation:
		// other credentials, so a new watch, which verifies the server.
		old := keyOf(userA)
		s := &corev1.Secret{}
		if err := cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-fixed"}, s); err != nil {
			t.Fatal(err)
		}
		token, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, "kube-system", "kilomesh")
		if err != nil {
			t.Fatal(err)
		}
		bundle := append(append([]byte{}, other.AdminConfig.CAData...), m.AdminConfig.CAData...)
		kc, err := testenv.Kubeconfig("https://"+m.Proxy.Addr(), bundle, token)
		if err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"kubeconfig": kc}
		if err := cp.kube.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		moved("the new CA bundle is used", old)
		node(ctx, t, m.Admin, "a-3", nil, map[string]string{kilov1alpha1.AnnotationKey: keyD}, nil, nil, "")
		published(ctx, t, ns, "a", []v1alpha1.ObservedNode{nodeA1, nodeA2, {Name: "a-3", Kilo: &v1alpha1.KiloAnnotations{Key: keyD}, Stale: true}})
		unchangedB(t)
	})

	t.Run("UnusedWatchesStop", func(t *testing.T) {
		keyA := keyOf(userA)
		keyB := keyOf(userB)
		if m.Proxy.Open() == 0 {
			t.Fatal("no connection through the proxy of member a while it is watched")
		}
		during := len(remoteGoroutines())
		if during <= before {
			t.Fatalf("%d goroutines of member watches while two members are watched, %d before: the count misses them", during, before)
		}
		for _, obj := range []client.Object{ps, &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}, &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}} {
			if err := cp.kube.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, obj.GetName()+" is deleted", gone(ctx, obj))
		}
		eventuallyWithin(ctx, t, closeWithin, "the watches, connections and goroutines of both members are gone", func() error {
			switch {
			case cp.reg.Watching(keyA) || cp.reg.Watching(keyB):
				return errors.New("a member is still watched")
			case m.Proxy.Open() != 0 || other.Proxy.Open() != 0:
				return fmt.Errorf("connections still open: %d to a, %d to b", m.Proxy.Open(), other.Proxy.Open())
			}
			for _, s := range []clients.Source{
				{Kind: clients.KindProviderConfig, Namespace: ns, Name: "a"},
				{Kind: clients.KindSecret, Namespace: ns, Name: "a-fixed"},
				{Kind: clients.KindProviderConfig, Namespace: ns, Name: "b"},
				{Kind: clients.KindSecret, Namespace: ns, Name: "b"},
			} {
				if cp.reg.Watches(s) {
					return fmt.Errorf("%s %s is still watched", s.Kind, s.Name)
				}
			}
			if g := remoteGoroutines(); len(g) > before {
				return fmt.Errorf("%d goroutines of member watches, %d before the test:\n%s", len(g), before, strings.Join(g, "\n\n"))
			}
			return nil
		})
		t.Logf("goroutines of member watches: %d before the test, %d while two members were watched, %d after", before, during, len(remoteGoroutines()))
	})
}
