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

package peerset

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/provider/internal/metrics"
	"github.com/kilomesh/kilomesh/provider/internal/ownership"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// staleWatch is a watch that has not seen the latest Peers yet.
type staleWatch []*kilov1alpha1.Peer

func (w staleWatch) Peers(context.Context) ([]*kilov1alpha1.Peer, error) { return w, nil }

func (w staleWatch) PeersIncomplete() string { return "" }

// TestCreateOnly writes to a real member cluster while the set's watch lags
// behind: a Peer someone created under a desired name since the watch last
// looked is reported as a conflict and left alone, even when its spec is
// exactly the desired one. A server-side apply without force would adopt
// such a Peer.
func TestCreateOnly(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	kube, err := client.New(m.AdminConfig, client.Options{Scheme: remote.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.PeerSpec{AllowedIPs: []string{"10.2.1.0/24"}, PublicKey: keyA}
	squatter := &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "taken"}, Spec: spec.Kilo()}
	if err := kube.Create(ctx, squatter, client.FieldOwner("squatter")); err != nil {
		t.Fatal(err)
	}
	before := &kilov1alpha1.Peer{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "taken"}, before); err != nil {
		t.Fatal(err)
	}

	cr := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "set"}}
	cr.Spec.ForProvider.Selector = mesh.OwnedLabels("team", "mesh")
	cr.Spec.ForProvider.Peers = []v1alpha1.DesiredPeer{
		{Name: "taken", Spec: spec},
		{Name: "free", Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.2.2.0/24"}, PublicKey: keyB}},
	}
	e := &external{peers: staleWatch(nil), kube: kube, manager: ownership.FieldManager("team", "set")}
	if _, err := e.Observe(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}

	want := []v1alpha1.PeerProblem{{Peer: "taken", Reason: v1alpha1.ReasonPeerNameConflict, Message: `a Peer named "taken" was created in the cluster by someone else; it is not taken over`}}
	if diff := cmp.Diff(want, cr.Status.AtProvider.Problems); diff != "" {
		t.Errorf("problems: -want, +got:\n%s", diff)
	}
	after := &kilov1alpha1.Peer{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "taken"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || len(after.Labels) != 0 {
		t.Errorf("the squatter's Peer was taken over: labels %v, resource version %s, was %s", after.Labels, after.ResourceVersion, before.ResourceVersion)
	}
	free := &kilov1alpha1.Peer{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "free"}, free); err != nil {
		t.Fatalf("the other Peer is not created: %v", err)
	}
	if len(free.ManagedFields) != 1 || free.ManagedFields[0].Manager != "kilomesh/team/set" {
		t.Errorf("the created Peer's field managers: want only kilomesh/team/set, got %v", free.ManagedFields)
	}
}

// TestApplyDuration checks that each reconcile's writes are counted in the
// apply-duration metric under their result: a reconcile whose writes all
// succeed as ok, one whose writes cannot be made as error.
func TestApplyDuration(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	// The identity provider-kilomesh has in a member (examples/member-rbac.yaml).
	cfg, err := clientcmd.RESTConfigFromKubeConfig(m.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: remote.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cr := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "timed"}}
	cr.Spec.ForProvider.Selector = mesh.OwnedLabels("team", "timed")
	cr.Spec.ForProvider.Peers = []v1alpha1.DesiredPeer{{Name: "timed", Spec: v1alpha1.PeerSpec{AllowedIPs: []string{"10.2.3.0/24"}, PublicKey: keyA}}}
	e := &external{peers: staleWatch(nil), kube: kube, manager: ownership.FieldManager("team", "timed")}
	if _, err := e.Observe(ctx, cr); err != nil {
		t.Fatal(err)
	}

	ok, failed := applies(t, metrics.ResultOK), applies(t, metrics.ResultError)
	if _, err := e.Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if got := applies(t, metrics.ResultOK) - ok; got != 1 {
		t.Errorf("a reconcile whose writes succeeded: %d more ok samples, want 1", got)
	}

	// The same plan again, with writes that cannot be made.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Update(cancelled, cr); err == nil {
		t.Fatal("a reconcile with a cancelled context wrote its Peers")
	}
	if got := applies(t, metrics.ResultError) - failed; got != 1 {
		t.Errorf("a reconcile whose writes failed: %d more error samples, want 1", got)
	}
}

// applies is how many reconciles the apply-duration metric counted under
// result.
func applies(t *testing.T, result string) uint64 {
	t.Helper()
	h, ok := metrics.ApplyDuration.WithLabelValues(result).(prometheus.Histogram)
	if !ok {
		t.Fatal("the apply-duration metric is not a histogram")
	}
	out := &dto.Metric{}
	if err := h.Write(out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}
