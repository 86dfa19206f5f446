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

package inventory

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// TestNodeFixtureAgrees pins that the tests' node builder publishes what an
// inventory publishes: the planner's tests feed it the entries the builder
// makes, so the two must not drift apart.
func TestNodeFixtureAgrees(t *testing.T) {
	kilo := nodefixture.New("a").Pods("10.1.1.0/24", "fd00::/64").Internal("192.168.0.2", "192.168.0.3").External("203.0.113.1").
		Label(kilov1alpha1.LabelRegion, "region").
		With(kilov1alpha1.AnnotationKey, nodefixture.Key("a")).
		With(kilov1alpha1.AnnotationWireguardIP, "10.4.0.1/16").
		With(kilov1alpha1.AnnotationEndpoint, "203.0.113.1:51820").
		With(kilov1alpha1.AnnotationInternalIP, "192.168.0.2/24").
		With(kilov1alpha1.AnnotationForceEndpoint, "vpn.example.com:51820").
		With(kilov1alpha1.AnnotationClustermeshEndpoint, "[2001:db8::1]:51820").
		With(kilov1alpha1.AnnotationGranularity, "full").
		With(kilov1alpha1.AnnotationPersistentKeepalive, "25").
		With(kilov1alpha1.AnnotationDiscoveredEndpoints, `{"k":{"IP":"198.51.100.1","Port":51820,"Zone":""}}`).
		With(kilov1alpha1.AnnotationForceInternalIP, "192.168.0.3/24").
		With(kilov1alpha1.AnnotationAllowedLocationIPs, "10.9.0.0/24").
		With(kilov1alpha1.AnnotationLeader, "false").
		With("unrelated", "dropped").
		Seen(now.Add(-59 * time.Second)).Reported(corev1.ConditionTrue)
	cases := map[string]struct {
		reason string
		node   nodefixture.Node
		// noStaleSince leaves StaleSince out of the comparison: the builder
		// does not know since when a node without a heartbeat is stale.
		noStaleSince bool
	}{
		"EveryField":   {reason: "Every Kilo annotation, address and pod CIDR is published alike; the region label is the location.", node: kilo},
		"Location":     {reason: "A location annotation wins over the region label.", node: kilo.With(kilov1alpha1.AnnotationLocation, "dc1")},
		"EmptyValues":  {reason: "An empty location wins, an empty force-internal-ip is \"-\", an empty key is no key.", node: kilo.With(kilov1alpha1.AnnotationLocation, "").With(kilov1alpha1.AnnotationForceInternalIP, "").With(kilov1alpha1.AnnotationKey, "")},
		"NotReady":     {reason: "A Ready condition that is not True is not ready.", node: kilo.Reported(corev1.ConditionUnknown)},
		"Unreported":   {reason: "A Node without a Ready condition is not ready.", node: nodefixture.New("a").Seen(now)},
		"Stale":        {reason: "A heartbeat 60 s old is stale, since its end.", node: kilo.Seen(now.Add(-5 * time.Minute))},
		"NoHeartbeat":  {reason: "A Node without a heartbeat is stale.", node: kilo.Without(kilov1alpha1.AnnotationLastSeen), noStaleSince: true},
		"BadHeartbeat": {reason: "A heartbeat that is no number is stale.", node: kilo.With(kilov1alpha1.AnnotationLastSeen, "yesterday"), noStaleSince: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var opts []cmp.Option
			if tc.noStaleSince {
				opts = append(opts, cmpopts.IgnoreFields(v1alpha1.ObservedNode{}, "StaleSince"))
			}
			if diff := cmp.Diff(ObserveNode(tc.node.Object(), now), tc.node.ObservedAt(now), opts...); diff != "" {
				t.Errorf("\n%s\nObservedAt(now): -ObserveNode(Object()), +builder:\n%s", tc.reason, diff)
			}
		})
	}
}
