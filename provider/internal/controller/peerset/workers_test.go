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
	"net/url"
	"sync/atomic"
	"testing"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

func TestForEach(t *testing.T) {
	const n = 200
	refused := &url.Error{Op: "Post", URL: "https://127.0.0.1:1/apis", Err: errors.New("connection refused")}
	cases := map[string]struct {
		reason string
		err    error
		// most is the most calls made.
		most int
	}{
		"Answered": {
			reason: "Errors the API server answers with (a conflict, an invalid Peer) stop nothing: every call is made.",
			err:    kerrors.NewAlreadyExists(schema.GroupResource{Group: "kilo.squat.ai", Resource: "peers"}, "p"),
			most:   n,
		},
		"Unanswered": {
			reason: "Once a call gets no answer, no further call is started: at most the calls already handed to the workers run.",
			err:    refused,
			most:   1 + 2*workers,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int64
			skipped := forEach(n, func(int) error {
				calls.Add(1)
				return tc.err
			})
			if got := int(calls.Load()); got+skipped != n || got > tc.most {
				t.Errorf("\n%s\nforEach(%d, ...): %d calls and %d skipped, want %d in all and at most %d calls", tc.reason, n, got, skipped, n, tc.most)
			}
		})
	}
}
