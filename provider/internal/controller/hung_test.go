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
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// A hung server accepts connections on loopback and never answers.
type hung struct {
	// URL is the server's https URL, CA the certificate to trust it with.
	URL string
	CA  []byte

	// held counts the connections (or requests) it holds; first is closed
	// when it holds the first.
	held  atomic.Int64
	first chan struct{}
	once  sync.Once
}

func (h *hung) hold() {
	h.held.Add(1)
	h.once.Do(func() { close(h.first) })
}

// hungTCP accepts TCP connections and holds them: a TLS client waits for
// a handshake that never comes.
func hungTCP(t *testing.T) *hung {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hung{URL: "https://" + ln.Addr().String(), first: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			h.hold()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return h
}

// hungTLS completes TLS with a certificate the client trusts, then never
// answers a request: no transport deadline can save a client without one
// of its own.
func hungTLS(t *testing.T) *hung {
	t.Helper()
	release := make(chan struct{})
	h := &hung{first: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		h.hold()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	srv.StartTLS()
	t.Cleanup(func() {
		close(release)
		srv.CloseClientConnections()
		srv.Close()
	})
	h.URL = srv.URL
	h.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return h
}

// TestHungMember runs inventories and PeerSets of a member that accepts
// connections and never answers next to those of a healthy member. The
// hung member's resources are more than the provider has workers, and
// start first; the healthy member's still complete while the hung ones
// are pending, which they are until their requests time out.
func TestHungMember(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	node(ctx, t, m.Admin, "healthy-node", nil, nil, []string{"10.1.1.0/24"}, nil, corev1.ConditionTrue)

	// More hung resources of each kind than the provider's workers.
	const hungUsers = 6
	cases := map[string]struct {
		reason string
		server func(t *testing.T) *hung
		// key of the healthy member's Peer.
		key string
	}{
		"AcceptsTCP": {
			reason: "A server that accepts TCP connections and never completes TLS delays no other member.",
			server: hungTCP,
			key:    keyA,
		},
		"AnswersNoRequest": {
			reason: "A server that completes TLS and never answers a request delays no other member.",
			server: hungTLS,
			key:    keyC,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := tc.server(t)
			ns := namespace(ctx, t)
			providerConfig(ctx, t, ns, "healthy", m.Kubeconfig)
			kc, err := testenv.Kubeconfig(h.URL, h.CA, "token")
			if err != nil {
				t.Fatal(err)
			}
			providerConfig(ctx, t, ns, "hung", kc)

			var hungObjs []client.Object
			for i := range hungUsers {
				ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("hung-%d", i)}}
				ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "hung")
				ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("hung-%d", i)}}
				ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "hung")
				ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{desired("peer-hung", keyB, "10.3.1.0/24")}}
				hungObjs = append(hungObjs, ni, ps)
			}
			for _, obj := range hungObjs {
				if err := cp.kube.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			// The test's context ends before its cleanups run.
			cleanup := context.WithoutCancel(ctx)
			t.Cleanup(func() { forget(cleanup, t, hungObjs) })
			// The healthy member's resources come once the hung member
			// holds a request of the provider.
			select {
			case <-h.first:
			case <-ctx.Done():
				t.Fatal("the provider never reached the hung member")
			}

			ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}}
			ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "healthy")
			ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}}
			ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "healthy")
			peer := desired("peer-healthy-"+strings.ToLower(name), tc.key, "10.2.1.0/24")
			ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{peer}}
			for _, obj := range []client.Object{ni, ps} {
				if err := cp.kube.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				for _, obj := range []client.Object{ni, ps} {
					if err := cp.kube.Delete(cleanup, obj); err != nil {
						t.Error(err)
					}
					eventually(cleanup, t, "the healthy member's resource is deleted", gone(cleanup, obj))
				}
			})
			eventually(ctx, t, tc.reason+" The healthy member's inventory publishes its node", func() error {
				got, err := getInventory(ctx, ns, "healthy")
				if err != nil {
					return err
				}
				if c := got.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue || got.Status.AtProvider.NodeCount != 1 {
					return fmt.Errorf("Ready is %s (%s), %d nodes", c.Status, c.Message, got.Status.AtProvider.NodeCount)
				}
				return nil
			})
			eventually(ctx, t, tc.reason+" The healthy member's PeerSet applies its Peer", func() error {
				got, err := getPeerSet(ctx, ns, "healthy")
				if err != nil {
					return err
				}
				if c := got.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
					return fmt.Errorf("Ready is %s: %s", c.Status, c.Message)
				}
				return nil
			})
			if _, ok := peers(ctx, t, m.Admin)[peer.Name]; !ok {
				t.Errorf("%s\nthe healthy member does not hold the Peer", tc.reason)
			}
			// Meanwhile nothing of the hung member is known.
			for _, obj := range hungObjs {
				if err := cp.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					t.Fatal(err)
				}
				if c := obj.(conditioned).GetCondition(xpv2.TypeReady); c.Status == corev1.ConditionTrue {
					t.Errorf("%s\n%T %s of the hung member is Ready", tc.reason, obj, obj.GetName())
				}
			}
			// Its requests time out, and say so.
			for i := range hungUsers {
				n := fmt.Sprintf("hung-%d", i)
				eventually(ctx, t, "the hung member's inventory reports it", synced(inventoryOf(ctx, ns, n), corev1.ConditionFalse, "cannot observe the Nodes of the cluster"))
				eventually(ctx, t, "the hung member's PeerSet reports it", synced(peerSetOf(ctx, ns, n), corev1.ConditionFalse, "cannot observe the Peers of the cluster"))
			}
		})
	}
}

// forget deletes managed resources and, for those a member that never
// answers keeps from finishing their deletion, removes their finalizers.
func forget(ctx context.Context, t *testing.T, objs []client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := client.IgnoreNotFound(cp.kube.Delete(ctx, obj)); err != nil {
			t.Error(err)
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := cp.kube.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
}
