package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/nodefixture"
)

// TestHostileTextBounded pins that what members and nodes send cannot grow
// the response: every text a member's API server or a node owner controls
// (the member's error, node names, annotation values, the names of Peers
// in the way) is cut where it enters status, conditions and warnings. With
// four members each sending a 1 MiB error, two nodes with 1 MiB names and
// Peers in the way with 1 MiB names, the response once grew past the 3 MiB
// guard, whose fatal result froze the mesh.
func TestHostileTextBounded(t *testing.T) {
	const huge = 1 << 20
	long := func(c rune) string { return strings.Repeat(string(c), huge-1) + "é" }
	// node is a fresh, Ready node with these values.
	node := func(name, pod, key, endpoint, wgIP string) nodefixture.Node {
		return nodefixture.New(name).Pods(pod).
			With(kilov1alpha1.AnnotationKey, key).
			With(kilov1alpha1.AnnotationEndpoint, endpoint).
			With(kilov1alpha1.AnnotationWireguardIP, wgIP).
			Reported(corev1.ConditionTrue).Seen(inventoryObservedAt)
	}
	var clusters []any
	observed := map[string]*fnv1.Resource{}
	required := map[string]*fnv1.Resources{}
	for c := range 4 {
		name := fmt.Sprintf("cluster-%d", c)
		clusters = append(clusters, map[string]any{
			"name": name, "providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": name},
			"podCIDRs": []any{fmt.Sprintf("10.%d.0.0/16", c+1)}, "wireguardCIDR": fmt.Sprintf("10.%d.0.0/16", 100+c),
		})
		var nodes []nodefixture.Node
		for n := range 2 {
			nodes = append(nodes, node(long(rune('a'+n)), fmt.Sprintf("10.%d.%d.0/24", c+1, n), long('k'), "203.0.113.1:51820", long('w')))
		}
		nodes = append(nodes, node("fine", fmt.Sprintf("10.%d.9.0/24", c+1), fmt.Sprintf("%c%s=", 'A'+c, strings.Repeat("B", 42)), fmt.Sprintf("203.0.113.%d:51820", 10+c), fmt.Sprintf("10.%d.0.1/16", 100+c)))
		foreign := []any{
			map[string]any{"name": long('p'), "allowedIPs": []any{"10.0.0.0/8"}},
			map[string]any{"name": long('q'), "allowedIPs": []any{"10.0.0.0/9"}},
		}
		inv, err := structpb.NewStruct(map[string]any{
			"apiVersion": "kube.kilomesh.io/v1alpha1", "kind": "NodeInventory",
			"metadata": map[string]any{"name": name},
			"status": map[string]any{
				"conditions": []any{
					map[string]any{"type": "Ready", "status": "True"},
					map[string]any{"type": "Synced", "status": "False", "message": long('m'), "lastTransitionTime": "2026-11-22T01:05:00Z"},
				},
				"atProvider": map[string]any{"observedAt": "2026-11-22T01:00:00Z", "foreignPeers": foreign},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		get(inv, "status", "atProvider").GetStructValue().Fields["nodes"] = nodefixture.Structs(inventoryObservedAt, nodes...)
		observed[prefixInventory+name] = &fnv1.Resource{Resource: inv}
		required[prefixRequireMember+name] = &fnv1.Resources{}
	}
	x, err := structpb.NewStruct(map[string]any{
		"apiVersion": "kilomesh.io/v1alpha1", "kind": "ClusterMesh",
		"metadata": map[string]any{"name": "mesh", "namespace": "network"},
		"spec":     map[string]any{"granularity": "Node", "clusters": clusters},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
	rsp, err := f.RunFunction(context.Background(), request(x, observed, required))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			t.Fatalf("RunFunction(...): fatal result %.300q", r.GetMessage())
		}
		if len(r.GetMessage()) > 4096 || !utf8.ValidString(r.GetMessage()) {
			t.Errorf("RunFunction(...): a result of %d bytes: %.200q", len(r.GetMessage()), r.GetMessage())
		}
	}
	for _, c := range rsp.GetConditions() {
		if len(c.GetMessage()) > 4096 {
			t.Errorf("RunFunction(...): condition %s has a message of %d bytes", c.GetType(), len(c.GetMessage()))
		}
	}
	status := rsp.GetDesired().GetComposite().GetResource().GetFields()["status"]
	var longest func(v *structpb.Value) int
	longest = func(v *structpb.Value) int {
		n := 0
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			n = len(k.StringValue)
		case *structpb.Value_StructValue:
			for _, f := range k.StructValue.GetFields() {
				n = max(n, longest(f))
			}
		case *structpb.Value_ListValue:
			for _, e := range k.ListValue.GetValues() {
				n = max(n, longest(e))
			}
		}
		return n
	}
	if n := longest(status); n > 4096 {
		t.Errorf("RunFunction(...): the status holds a text of %d bytes", n)
	}
	// The request carries 4 x (1 MiB error + 2 x 3 MiB of node data + 2 MiB
	// of Peer names); the response must not grow with any of it.
	if n := proto.Size(rsp); n > 256<<10 {
		t.Errorf("RunFunction(...): response of %d bytes, want it bounded whatever members send", n)
	}
}
