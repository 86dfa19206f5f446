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
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// StaleAfter is how old a Kilo heartbeat may get before Kilo leaves its
// node out of the topology: two of Kilo's 30 second check-in periods
// (Node.Ready in Kilo's pkg/mesh/backend.go).
const StaleAfter = 60 * time.Second

// staleAfterSeconds is StaleAfter in the unit of Kilo's heartbeat.
const staleAfterSeconds = int64(StaleAfter / time.Second)

// LastSeen returns a Node's Kilo heartbeat in unix seconds as Kilo reads
// it: a missing or unparseable kilo.squat.ai/last-seen is 0.
func LastSeen(n *corev1.Node) int64 {
	if n == nil {
		return 0
	}
	ls, err := strconv.ParseInt(n.Annotations[kilov1alpha1.AnnotationLastSeen], 10, 64)
	if err != nil {
		return 0
	}
	return ls
}

// Stale reports whether Kilo leaves a node with this heartbeat out of its
// topology at now. The arithmetic is Kilo's, overflow included: a node is
// fresh while now - lastSeen < 60 s in int64 unix seconds.
func Stale(lastSeen int64, now time.Time) bool {
	return now.Unix()-lastSeen >= staleAfterSeconds
}

// StaleAt returns when a node with this heartbeat, fresh at now, turns
// stale. It returns false for a node that is already stale, or that Kilo's
// arithmetic keeps fresh for good (a heartbeat so far from now that the
// subtraction overflows).
func StaleAt(lastSeen int64, now time.Time) (time.Time, bool) {
	if Stale(lastSeen, now) || lastSeen > math.MaxInt64-staleAfterSeconds {
		return time.Time{}, false
	}
	at := lastSeen + staleAfterSeconds
	if at <= now.Unix() {
		// Fresh only because now - lastSeen overflowed.
		return time.Time{}, false
	}
	return time.Unix(at, 0), true
}

// StaleSince returns when a stale node turned stale: its heartbeat plus
// StaleAfter or, for a node without a heartbeat (Kilo reads a missing or
// unparseable one as 0), its creation plus StaleAfter. The moment is kept
// within 1970 and now, in whole seconds, so that a forged heartbeat or
// creation time always encodes; an inventory publishes it when the node
// turns stale and keeps it while the node stays stale.
func StaleSince(n *corev1.Node, now time.Time) metav1.Time {
	at := n.CreationTimestamp.Add(StaleAfter)
	if ls := LastSeen(n); ls != 0 {
		at = time.Unix(max(ls, 0), 0).Add(StaleAfter)
	}
	if epoch := time.Unix(0, 0); at.Before(epoch) {
		at = epoch
	}
	if at.After(now) {
		at = now
	}
	return metav1.NewTime(at.UTC().Truncate(time.Second))
}
