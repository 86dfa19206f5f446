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
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// stallWrites serves the member's API on a loopback port of its own: it
// answers reads (lists, watches) at once and holds every write until the
// client gives up. It returns a kubeconfig that reaches the member through
// it, and counts the writes it holds.
func stallWrites(t *testing.T, m *testenv.Member) ([]byte, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(m.AdminConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.AdminConfig.CAData)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	proxy.FlushInterval = -1
	held := &atomic.Int64{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			held.Add(1)
			// The server notices that the client went away only once the
			// body has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	kc, err := testenv.Kubeconfig(srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), m.Token)
	if err != nil {
		t.Fatal(err)
	}
	return kc, held
}

// TestStalledWrites runs a provider whose requests to members may each take
// ten minutes, with two workers, against a member that lists at once and
// never completes a write. Its PeerSets, more than the workers, each hold a
// worker no longer than the write deadline of a reconcile, and report it;
// meanwhile a PeerSet of a healthy member is applied. Without the deadline,
// the stalled member's writes would hold both workers for ten minutes.
func TestStalledWrites(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	cfg, admin := ownControlPlane(t)
	// The members and the stalling server start first, so that they stop
	// after the provider: a running provider would reconnect at once.
	healthy := testenv.StartMember(t, testenv.MemberOptions{})
	stalled := testenv.StartMember(t, testenv.MemberOptions{})
	stalledKubeconfig, held := stallWrites(t, stalled)
	const deadline = 2 * time.Second
	startOwnProvider(t, cfg, func(c *pcontroller.Config) {
		c.Timeout = 10 * time.Minute
		c.WriteDeadline = deadline
	})

	ns := "team"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.ProviderConfig(ctx, admin, ns, "healthy", healthy.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := testenv.ProviderConfig(ctx, admin, ns, "stalled", stalledKubeconfig); err != nil {
		t.Fatal(err)
	}

	// More sets of the stalled member than the provider has workers.
	const stalledSets = 4
	keys := []string{keyA, keyB, keyC, keyD}
	for i := range stalledSets {
		ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("stalled-%d", i)}}
		ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "stalled")
		ps.Spec.ForProvider = v1alpha1.PeerSetParameters{
			Selector: map[string]string{"kilomesh.io/mesh": fmt.Sprintf("m%d", i)},
			Peers:    []v1alpha1.DesiredPeer{desired(fmt.Sprintf("peer-%d", i), keys[i], fmt.Sprintf("10.3.%d.0/24", i))},
		}
		if err := admin.Create(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	eventually(ctx, t, "the stalled member holds a write of each worker", func() error {
		if n := held.Load(); n < 2 {
			return fmt.Errorf("%d writes held", n)
		}
		return nil
	})

	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healthy"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "healthy")
	peer := desired("peer-healthy", keyA, "10.2.1.0/24")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{peer}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the healthy member's PeerSet is applied while the stalled member's writes hang", func() error {
		got := &v1alpha1.PeerSet{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
			return err
		}
		if c := got.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Ready is %s: %s", c.Status, c.Message)
		}
		return nil
	})
	if _, ok := peers(ctx, t, healthy.Admin)[peer.Name]; !ok {
		t.Error("the healthy member does not hold the Peer")
	}
	want := fmt.Sprintf("the cluster did not complete the writes of this reconcile within %s", deadline)
	for i := range stalledSets {
		n := fmt.Sprintf("stalled-%d", i)
		eventually(ctx, t, "the stalled member's PeerSet says its writes ran out of time", func() error {
			got := &v1alpha1.PeerSet{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, got); err != nil {
				return err
			}
			return synced(func() (conditioned, error) { return got, nil }, corev1.ConditionFalse, want)()
		})
	}
}
