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
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
	inv "github.com/kilomesh/kilomesh/provider/inventory"
)

// keyOf returns a valid WireGuard key made of a name.
func keyOf(name string) string {
	var k [kilov1alpha1.KeyLen]byte
	copy(k[:], name)
	return kilov1alpha1.EncodeKey(k)
}

// routes returns n distinct /32 routes in 10.128.0.0/9, from the k-th on.
func routes(k, n int) []string {
	out := make([]string, n)
	for i := range out {
		j := k + i
		out[i] = fmt.Sprintf("10.%d.%d.%d/32", 128+j>>16&0x7f, j>>8&0xff, j&0xff)
	}
	return out
}

// TestForeignPeerBudget fills a member with Peers named to sort first,
// with as many routes as a Peer may have, ahead of a victim Peer: the
// victim's routes are past the budget of an inventory. Its name and key are
// still published, and the inventory says its foreign routes are
// incomplete, so that the planner writes no new route into that member; once
// the junk is gone, the victim's route is published and the inventory is
// complete again.
func TestForeignPeerBudget(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)

	junk := inv.MaxForeignAllowedIPs / inv.MaxPeerAllowedIPs
	for i := range junk {
		p := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("aaa-%d", i)}, Spec: kilov1alpha1.PeerSpec{
			AllowedIPs: routes(i*inv.MaxPeerAllowedIPs, inv.MaxPeerAllowedIPs), PublicKey: keyOf(fmt.Sprintf("junk-%d", i)),
		}}
		if err := m.Admin.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	victim := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "zzz-victim"}, Spec: kilov1alpha1.PeerSpec{AllowedIPs: []string{"10.60.0.0/16"}, PublicKey: keyA}}
	if err := m.Admin.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	inventory(ctx, t, ns, "budget", "member", v1alpha1.NodeInventoryParameters{OwnedPeerLabels: map[string]string{"kilomesh.io/mesh": "m1"}})

	victimIs := func(want v1alpha1.ForeignPeer, incomplete string) func() error {
		return func() error {
			ni, err := getInventory(ctx, ns, "budget")
			if err != nil {
				return err
			}
			at := ni.Status.AtProvider
			if len(at.ForeignPeers) == 0 {
				return fmt.Errorf("no foreign Peers published: %v", ni.Status.Conditions)
			}
			if d := cmp.Diff(want, at.ForeignPeers[len(at.ForeignPeers)-1], cmpopts.EquateEmpty()); d != "" {
				return fmt.Errorf("the victim: -want +got:\n%s", d)
			}
			if at.ForeignPeersIncomplete != incomplete {
				return fmt.Errorf("foreignPeersIncomplete is %q, want %q", at.ForeignPeersIncomplete, incomplete)
			}
			return nil
		}
	}
	eventually(ctx, t, "the victim past the route budget is published by name and key, and the inventory says routes are missing",
		victimIs(v1alpha1.ForeignPeer{Name: "zzz-victim", PublicKey: keyA}, fmt.Sprintf("more than %d routes", inv.MaxForeignAllowedIPs)))

	if err := m.Admin.Delete(ctx, &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "aaa-0"}}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "with room in the budget the victim's route is published, and nothing is missing",
		victimIs(v1alpha1.ForeignPeer{Name: "zzz-victim", PublicKey: keyA, AllowedIPs: []string{"10.60.0.0/16"}}, ""))
}

// TestNodeLabelBound gives a Node of a member more labels than the
// provider keeps: the Node is not published, since a cut label set could
// change what a selector selects, and the inventory says so; with fewer
// labels it is published again.
func TestNodeLabelBound(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	crowded := map[string]string{}
	for i := range inv.MaxLabels + 1 {
		crowded[fmt.Sprintf("feature.example.com/f-%d", i)] = "true"
	}
	node(ctx, t, m.Admin, "crowded", crowded, map[string]string{kilov1alpha1.AnnotationLastSeen: future}, nil, nil, corev1.ConditionTrue)
	node(ctx, t, m.Admin, "plain", nil, map[string]string{kilov1alpha1.AnnotationLastSeen: future}, nil, nil, corev1.ConditionTrue)
	inventory(ctx, t, ns, "all", "member", v1alpha1.NodeInventoryParameters{})

	published(ctx, t, ns, "all", []v1alpha1.ObservedNode{{Name: "plain", Ready: true}})
	eventually(ctx, t, "the inventory says a Node was left out for its labels", func() error {
		ni, err := getInventory(ctx, ns, "all")
		if err != nil {
			return err
		}
		if got := ni.Status.AtProvider.NodesIncomplete; got != inv.ReasonLabels {
			return fmt.Errorf("nodesIncomplete is %q, want %q", got, inv.ReasonLabels)
		}
		return nil
	})

	mutateNode(ctx, t, m.Admin, "crowded", false, func(n *corev1.Node) { n.Labels = map[string]string{"role": "edge"} })
	published(ctx, t, ns, "all", []v1alpha1.ObservedNode{{Name: "crowded", Ready: true}, {Name: "plain", Ready: true}})
	eventually(ctx, t, "the inventory is complete again", func() error {
		ni, err := getInventory(ctx, ns, "all")
		if err != nil {
			return err
		}
		if got := ni.Status.AtProvider.NodesIncomplete; got != "" {
			return fmt.Errorf("nodesIncomplete is %q", got)
		}
		return nil
	})
}

// A hostile is an API server of a member's administrator that answers
// kilomesh with whatever it likes. It refuses streaming lists, as older
// servers do, holds watches open without a word, and answers a list of
// Nodes with list.
type hostile struct {
	URL string
	CA  []byte
}

func startHostile(t *testing.T, list, peers http.HandlerFunc) *hostile {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.URL.Path != "/api/v1/nodes" && (r.URL.Path != peersPath || peers == nil):
			status(w, kerrors.NewNotFound(corev1.Resource("thing"), r.URL.Path))
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			status(w, kerrors.NewBadRequest("sendInitialEvents is not supported"))
		case q.Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.URL.Path == peersPath:
			peers(w, r)
		default:
			list(w, r)
		}
	}))
	srv.StartTLS()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &hostile{URL: srv.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

// peersPath is where Kilo's Peers are listed.
const peersPath = "/apis/kilo.squat.ai/v1alpha1/peers"

func status(w http.ResponseWriter, err *kerrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(&s) //nolint:errchkjson // A write the provider does not read is the provider's to notice.
}

func nodeList(w http.ResponseWriter, nodes ...corev1.Node) {
	l := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: nodes}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&l) //nolint:errchkjson // A write the provider does not read is the provider's to notice.
}

// TestHostileMember runs inventories of members whose API servers lie:
// what they send is bounded when it is read, and what cannot be kept is
// said, never applied, nor quoted whole.
func TestHostileMember(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	fresh := func(name string) corev1.Node {
		n := nodefixture.New(name).With(kilov1alpha1.AnnotationLastSeen, future).Object()
		n.ResourceVersion = "1"
		return *n
	}
	cases := map[string]struct {
		reason string
		list   http.HandlerFunc
		peers  http.HandlerFunc
		check  func(ni *v1alpha1.NodeInventory) error
	}{
		"PeersInPages": {
			reason: "Peers are listed in pages, however many the member has: a server that answers only pages is read whole.",
			list:   func(w http.ResponseWriter, _ *http.Request) { nodeList(w) },
			peers: func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if q.Get("limit") != "500" {
					status(w, kerrors.NewBadRequest("this server only answers pages of 500"))
					return
				}
				l := kilov1alpha1.PeerList{TypeMeta: metav1.TypeMeta{Kind: "PeerList", APIVersion: kilov1alpha1.APIVersion}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
				page := q.Get("continue")
				if page == "" {
					page, l.Continue = "1", "2"
				}
				l.Items = []kilov1alpha1.Peer{{ObjectMeta: metav1.ObjectMeta{Name: "page-" + page, ResourceVersion: "1"}, Spec: kilov1alpha1.PeerSpec{PublicKey: keyA}}}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(&l) //nolint:errchkjson // A write the provider does not read is the provider's to notice.
			},
			check: func(ni *v1alpha1.NodeInventory) error {
				want := []v1alpha1.ForeignPeer{{Name: "page-1", PublicKey: keyA}, {Name: "page-2", PublicKey: keyA}}
				if d := cmp.Diff(want, ni.Status.AtProvider.ForeignPeers); d != "" {
					return fmt.Errorf("foreign Peers: -want +got:\n%s; conditions %v", d, ni.Status.Conditions)
				}
				if ni.Status.AtProvider.ForeignPeersIncomplete != "" {
					return fmt.Errorf("foreignPeersIncomplete is %q", ni.Status.AtProvider.ForeignPeersIncomplete)
				}
				return nil
			},
		},
		"NameOfAMebibyte": {
			reason: "A Node name of 1 MiB is no name an API server accepts: the Node is not published, and the inventory says so.",
			list: func(w http.ResponseWriter, _ *http.Request) {
				nodeList(w, fresh(strings.Repeat("x", 1<<20)), fresh("ok"))
			},
			check: func(ni *v1alpha1.NodeInventory) error {
				at := ni.Status.AtProvider
				if d := cmp.Diff([]v1alpha1.ObservedNode{{Name: "ok"}}, at.Nodes, cmpopts.EquateEmpty()); d != "" {
					return fmt.Errorf("nodes: -want +got:\n%s", d)
				}
				if at.NodesIncomplete != inv.ReasonBadName {
					return fmt.Errorf("nodesIncomplete is %q, want %q", at.NodesIncomplete, inv.ReasonBadName)
				}
				return nil
			},
		},
		"ErrorOfAMebibyte": {
			reason: "An error of 1 MiB reaches the Synced condition cut to 1 KiB, on a character boundary.",
			list: func(w http.ResponseWriter, _ *http.Request) {
				status(w, kerrors.NewForbidden(corev1.Resource("nodes"), "", fmt.Errorf("%s", strings.Repeat("é", 1<<19))))
			},
			check: func(ni *v1alpha1.NodeInventory) error {
				c := ni.GetCondition(xpv2.TypeSynced)
				if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "cannot observe the Nodes of the cluster") {
					return fmt.Errorf("Synced is %s: %.200s", c.Status, c.Message)
				}
				if n := len(c.Message); n > remote.MaxErrorBytes+64 {
					return fmt.Errorf("the condition's message takes %d bytes", n)
				}
				if strings.ContainsRune(c.Message, '\uFFFD') {
					return fmt.Errorf("the message is cut inside a character: %q", c.Message)
				}
				return nil
			},
		},
		"EndlessBody": {
			reason: "A list whose body goes on past 64 MiB is read no further, and the failure names the bound.",
			list: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[`)
				pad := []byte(strings.Repeat(" ", 64<<10))
				for i := 0; i < (remote.MaxResponseBytes>>16)+2 && r.Context().Err() == nil; i++ {
					if _, err := w.Write(pad); err != nil {
						return
					}
				}
				_, _ = io.WriteString(w, `]}`)
			},
			check: func(ni *v1alpha1.NodeInventory) error {
				c := ni.GetCondition(xpv2.TypeSynced)
				if want := fmt.Sprintf("larger than %d MiB", remote.MaxResponseBytes>>20); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, want) {
					return fmt.Errorf("Synced is %s %q, want False naming %q", c.Status, c.Message, want)
				}
				return nil
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := startHostile(t, tc.list, tc.peers)
			ns := namespace(ctx, t)
			kc, err := testenv.Kubeconfig(h.URL, h.CA, "token")
			if err != nil {
				t.Fatal(err)
			}
			providerConfig(ctx, t, ns, "hostile", kc)
			inventory(ctx, t, ns, "hostile", "hostile", v1alpha1.NodeInventoryParameters{OwnedPeerLabels: map[string]string{"kilomesh.io/mesh": "m1"}})
			// The test's context ends before its cleanups run.
			cleanup := context.WithoutCancel(ctx)
			t.Cleanup(func() {
				forget(cleanup, t, []client.Object{&v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile"}}})
			})
			eventually(ctx, t, tc.reason, func() error {
				ni, err := getInventory(ctx, ns, "hostile")
				if err != nil {
					return err
				}
				return tc.check(ni)
			})
		})
	}
}
