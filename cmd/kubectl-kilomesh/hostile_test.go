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
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// hostileText is what a member's admin or a node's owner can make appear in
// what the plugin reads: ESC sequences that clear the screen and set the
// window title, a C1 CSI, DEL, a carriage return that overwrites a line,
// and a bidirectional override.
const hostileText = "member says \x1b[2J\x1b]0;owned\x07 \u009b31m \x7f\rfake line \u202eexe.txt"

// TestControlCharacters pins that no output of the plugin holds a control
// character that a terminal acts on, whatever members and nodes wrote into
// what it reads: a mesh's member message, a provider's condition, a
// composed resource's condition.
func TestControlCharacters(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	loadScenario(t, "three-clusters")
	if err := meshfixture.Converge(ctx, apiClient, namespace, "mesh"); err != nil {
		t.Fatal(err)
	}
	// The member's message in the mesh's status, as the function writes
	// what a provider reports.
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(meshfixture.ClusterMeshGVK)
	if err := apiClient.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "mesh"}, xr); err != nil {
		t.Fatal(err)
	}
	clusters, _, _ := unstructured.NestedSlice(xr.Object, "status", "clusters")
	if len(clusters) == 0 {
		t.Fatal("the scenario's mesh has no status.clusters")
	}
	c0, _ := clusters[0].(map[string]any)
	c0["message"] = hostileText
	if err := unstructured.SetNestedSlice(xr.Object, clusters, "status", "clusters"); err != nil {
		t.Fatal(err)
	}
	if err := apiClient.Status().Update(ctx, xr); err != nil {
		t.Fatal(err)
	}
	// A member's error in a provider's condition, which diagnose quotes.
	setCondition(t, "inventory-cluster-b", "Synced", "False", "ReconcileError", "observe failed: "+hostileText)
	setCondition(t, "peerset-cluster-a", "Synced", "False", "ReconcileError", "create failed: "+hostileText)

	dot := ensureDotOrNot(t)
	cases := map[string]struct {
		reason string
		env    *env
		args   []string
		yaml   bool
	}{
		"StatusTable":   {reason: "status prints member messages in a table.", args: []string{"status", "mesh"}},
		"StatusJSON":    {reason: "status -o json.", args: []string{"status", "mesh", "-o", "json"}},
		"StatusYAML":    {reason: "status -o yaml: a YAML parser refuses raw DEL and C1.", args: []string{"status", "mesh", "-o", "yaml"}, yaml: true},
		"DiagnoseText":  {reason: "diagnose quotes the providers' conditions.", args: []string{"diagnose", "mesh"}},
		"DiagnoseJSON":  {reason: "diagnose -o json.", args: []string{"diagnose", "mesh", "-o", "json"}},
		"DiagnoseYAML":  {reason: "diagnose -o yaml.", args: []string{"diagnose", "mesh", "-o", "yaml"}, yaml: true},
		"GraphDOT":      {reason: "graph writes DOT, the member message in a label.", args: []string{"graph", "mesh"}},
		"GraphJSON":     {reason: "graph -o json.", args: []string{"graph", "mesh", "-o", "json"}},
		"GraphSVG":      {reason: "graph -o svg: XML forbids C0 characters, and a terminal shows the SVG.", env: &env{lookPath: dot}, args: []string{"graph", "mesh", "-o", "svg"}},
		"GraphNoDotSVG": {reason: "graph -o svg without Graphviz writes the DOT.", env: &env{lookPath: noDot}, args: []string{"graph", "mesh", "-o", "svg"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := plugin(t, tc.env, tc.args...)
			if got.code == exitError {
				t.Fatalf("\n%s\nkubectl kilomesh %s: exit code %d: %s", tc.reason, strings.Join(tc.args, " "), got.code, got.stderr)
			}
			for stream, out := range map[string]string{"stdout": got.stdout, "stderr": got.stderr} {
				if n := controls(out); n > 0 {
					t.Errorf("\n%s\nkubectl kilomesh %s: %s holds %d control characters:\n%q", tc.reason, strings.Join(tc.args, " "), stream, n, out)
				}
			}
			if tc.yaml {
				var v any
				if err := yaml.Unmarshal([]byte(got.stdout), &v); err != nil {
					t.Errorf("\n%s\nkubectl kilomesh %s: not YAML: %v", tc.reason, strings.Join(tc.args, " "), err)
				}
			}
		})
	}
}

// controls counts the control characters of s but line feeds and tabs,
// and the bytes that are not UTF-8 (a raw 0x9B is an 8-bit CSI).
func controls(s string) int {
	n := 0
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if safetext.Control(r) || r == utf8.RuneError {
			n++
		}
	}
	return n
}

func noDot(string) (string, error) { return "", errors.New("not found") }

// ensureDotOrNot is the lookPath of Graphviz's dot, installed if it can be;
// where it cannot, the SVG case writes DOT, which is checked too.
func ensureDotOrNot(t *testing.T) func(string) (string, error) {
	t.Helper()
	var bin string
	t.Run("Graphviz", func(t *testing.T) { bin = ensureDot(t) })
	if bin == "" {
		return noDot
	}
	return func(string) (string, error) { return bin, nil }
}
