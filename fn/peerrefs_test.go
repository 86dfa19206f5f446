package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// TestComposeLeavesSharedPeersAlone: the planner gives the function one Peer
// for all the members that receive it alike (Input.PeerRefs), so composing
// must never write into a Peer of the plan, or one member's change would
// reach the others. Both deliveries, inline and shared, with the composed
// resources observed again as a running mesh has them.
func TestComposeLeavesSharedPeersAlone(t *testing.T) {
	for _, delivery := range []string{"Objects", "PeerSet"} {
		for _, size := range []struct{ clusters, nodes int }{{3, 4}, {4, 30}} {
			t.Run(fmt.Sprintf("%s/%dx%d", delivery, size.clusters, size.nodes), func(t *testing.T) {
				req := largeMesh(t, delivery, size.clusters, size.nodes)
				f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, maxResponse: 1 << 30, maxPeerSet: 1 << 30}
				shared := 0
				for range 2 {
					shared += composeUnchanged(t, f, req)
					// The next round observes what this one composed.
					rsp, err := f.RunFunction(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					for name, r := range rsp.GetDesired().GetResources() {
						req.Observed.Resources[name] = &fnv1.Resource{Resource: r.GetResource()}
					}
				}
				if shared == 0 {
					t.Fatal("no Peer of the plans is shared among members: the test checks nothing")
				}
			})
		}
	}
}

// composeUnchanged plans the request as run does and composes it, and fails
// when composing changed a Peer of the plan.
// It returns how many of the plan's Peers members share.
func composeUnchanged(t *testing.T, f *Function, req *fnv1.RunFunctionRequest) int {
	t.Helper()
	xr, err := decodeMesh(req.GetObserved().GetComposite().GetResource())
	if err != nil {
		t.Fatal(err)
	}
	rsp := &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{}, Desired: &fnv1.State{}}
	others, resolved := siblings(rsp, req, xr)
	if !resolved {
		t.Fatal("the request leaves the sibling meshes unresolved")
	}
	obs, err := readObserved(req, xr)
	if err != nil {
		t.Fatal(err)
	}
	threshold, err := shareAbove(xr, f.shareAbove)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := mesh.Do(&mesh.Input{
		Now: time.Now(), Namespace: xr.Namespace, Name: xr.Name, Spec: xr.Spec,
		Observations: obs.inventories, Others: others, Delivered: delivered(obs.composed),
		PeerRefs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := map[*kilov1alpha1.Peer]kilov1alpha1.Peer{}
	shared := 0
	for _, ps := range plan.PeerRefs {
		for _, p := range ps {
			if _, ok := before[p]; ok {
				shared++
				continue
			}
			before[p] = *p.DeepCopy()
		}
	}
	if _, err := compose(rsp, xr, obs, plan, f.maxPeerSet, threshold); err != nil {
		t.Fatal(err)
	}
	for p, was := range before {
		if diff := cmp.Diff(was, *p); diff != "" {
			t.Fatalf("composing changed Peer %s of the plan: -before, +after:\n%s", was.Name, diff)
		}
	}
	return shared
}
