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

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kilomesh/kilomesh/internal/safetext"
)

// TestHostileTextSanitized pins that no text the function writes holds a
// control character, whatever members and nodes sent: a member's error
// (ESC sequences that clear a terminal and retitle it, a C1 CSI, DEL, a
// carriage return, a bidirectional override), the name of a Peer in the
// way, what a provider says it could not publish, a PeerSet's error.
// kubectl describe prints status and events as they are.
func TestHostileTextSanitized(t *testing.T) {
	const hostile = "\x1b[2J\x1b]0;owned\x07\u009b31m\x7f\rfake\u202eexe"
	observed := observedTwo(t, "False")
	synced := get(observed["inventory-cluster-b"].GetResource(), "status", "conditions").GetListValue().GetValues()[1].GetStructValue()
	synced.Fields["message"] = structpb.NewStringValue("cannot list nodes: " + hostile)
	atA := get(observed["inventory-cluster-a"].GetResource(), "status", "atProvider").GetStructValue()
	atA.Fields["foreignPeers"] = mustValue(t, []any{map[string]any{"name": "in-the-way" + hostile, "allowedIPs": []any{"10.2.1.0/24"}}})
	atA.Fields["foreignPeersIncomplete"] = structpb.NewStringValue("more than 16384 Peers " + hostile)
	observed["peerset-cluster-a"] = &fnv1.Resource{Resource: mustValue(t, map[string]any{
		"apiVersion": "kube.kilomesh.io/v1alpha1", "kind": "PeerSet",
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "False", "message": "cannot apply: " + hostile}}},
	}).GetStructValue()}

	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
	rsp, err := f.RunFunction(context.Background(), request(xr(t, "PeerSet", "10.2.0.0/16"), observed, noOtherMeshes))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range rsp.GetResults() {
		texts = append(texts, "result: "+r.GetMessage())
	}
	for _, c := range rsp.GetConditions() {
		texts = append(texts, "condition "+c.GetType()+": "+c.GetMessage())
	}
	var walk func(path string, v *structpb.Value)
	walk = func(path string, v *structpb.Value) {
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			texts = append(texts, path+": "+k.StringValue)
		case *structpb.Value_StructValue:
			for name, f := range k.StructValue.GetFields() {
				walk(path+"."+name, f)
			}
		case *structpb.Value_ListValue:
			for _, e := range k.ListValue.GetValues() {
				walk(path+"[]", e)
			}
		}
	}
	walk("status", rsp.GetDesired().GetComposite().GetResource().GetFields()["status"])
	escaped := 0
	for _, s := range texts {
		for _, r := range s {
			if safetext.Control(r) {
				t.Errorf("RunFunction(...): %q holds control character %U", s, r)
				break
			}
		}
		if strings.Contains(s, `\u001b[2J`) {
			escaped++
		}
	}
	// The hostile texts reach the status and the conditions, escaped: the
	// test sees them.
	if escaped < 3 {
		t.Errorf("RunFunction(...): %d texts quote the hostile text escaped, want at least 3 (the member's error, the Peer in the way, the PeerSet's error):\n%s", escaped, strings.Join(texts, "\n"))
	}
}

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	out, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
