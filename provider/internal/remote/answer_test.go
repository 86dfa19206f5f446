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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// TestMemberBehindDeadForwarder puts a real member API server behind a
// forwarder that, once its server is "down", accepts every connection and
// closes it without a byte, as a load balancer in front of a dead API
// server does. The member must then be reported unreachable: client-go
// retries such requests and turns a watch that fails every time into an
// empty one without an error, so without answerOrFail the Node feed kept
// saying that the member answers for as long as it was down.
func TestMemberBehindDeadForwarder(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	m := testenv.StartMember(t, testenv.MemberOptions{})
	if err := m.Admin.Create(t.Context(), nodefixture.New("node-a1").Object()); err != nil {
		t.Fatal(err)
	}
	// The identity provider-kilomesh has in a member (examples/member-rbac.yaml),
	// through the member's forwarder, as its kubeconfig says.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(m.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t.Context(), 1, cfg, func(...string) {}, 10*time.Second, time.Now)
	t.Cleanup(c.stop)

	// outcome waits, without a bound on the member's side, for the Node
	// feed's outcome to say what done accepts.
	outcome := func(what string, done func([]*corev1.Node, error) bool) error {
		var last error
		wait.Eventually(t.Context(), t, what, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
			nodes, err := c.Nodes(t.Context())
			last = err
			return done(nodes, err), errors.Errorf("the feed says %d Nodes, error %v", len(nodes), err)
		})
		return last
	}
	_ = outcome("the member's Nodes listed", func(n []*corev1.Node, err error) bool { return err == nil && len(n) == 1 })

	m.Proxy.Drop()
	err = outcome("the member reported unreachable behind a forwarder that answers nothing", func(_ []*corev1.Node, err error) bool {
		return err != nil && !errors.Is(err, ErrPending)
	})
	var na *NoAnswerError
	if !errors.As(err, &na) || !strings.Contains(err.Error(), "without an answer") {
		t.Errorf("the feed's error: want a NoAnswerError, got %v", err)
	}
	if !c.NodesAnsweringSince().IsZero() {
		t.Errorf("NodesAnsweringSince is %v while the member answers nothing, want zero", c.NodesAnsweringSince())
	}

	if err := m.Proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	_ = outcome("the member answering again", func(n []*corev1.Node, err error) bool { return err == nil && len(n) == 1 })
}
