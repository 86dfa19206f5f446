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
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestGather wakes a user of a cluster with changes that keep coming, each
// within the coalescing delay of the last, and counts the reconciles they
// cost. Only counts are asserted; the delays are what makes changes "keep
// coming", and are far apart from each other.
func TestGather(t *testing.T) {
	const coalesce = 400 * time.Millisecond
	cases := map[string]struct {
		reason    string
		maxGather time.Duration
		changes   int
		want      int
	}{
		"LoneChange": {
			reason:    "A lone change costs one reconcile.",
			maxGather: time.Minute,
			changes:   1,
			want:      1,
		},
		"ChangesKeepComing": {
			reason:    "Changes that keep coming, each within the coalescing delay of the last, are gathered into one reconcile while the gathering lasts less than maxGather.",
			maxGather: time.Minute,
			changes:   8,
			want:      1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewRegistry(t.Context(), WithCoalesce(coalesce), WithMaxGather(tc.maxGather))
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			if err := r.Source("PeerSet").Start(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			u := User{Kind: "PeerSet", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "set"}}
			r.users[u] = "cluster"
			reconciles := make(chan struct{}, 100)
			go func() {
				for {
					item, shutdown := q.Get()
					if shutdown {
						return
					}
					reconciles <- struct{}{}
					q.Done(item)
				}
			}()
			for i := range tc.changes {
				if i > 0 {
					time.Sleep(coalesce / 4)
				}
				r.wake("cluster", "PeerSet")
			}
			<-reconciles
			// Whatever else the changes cost has come by now.
			time.Sleep(4 * coalesce)
			got := 1 + len(reconciles)
			if got != tc.want {
				t.Errorf("%s\n%d changes cost %d reconciles, want %d", tc.reason, tc.changes, got, tc.want)
			}
		})
	}
}
