package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilomesh/kilomesh/internal/plugin/fixture"
	"github.com/kilomesh/kilomesh/internal/plugin/view"
)

// TestScenarios runs every command on every render scenario, loaded into
// an API server as the function and the providers wrote it, and compares
// the output with the golden files of testdata/<scenario>.
func TestScenarios(t *testing.T) {
	needAPIServer(t)
	scenarios, err := fixture.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) == 0 {
		t.Fatal("no render scenario found")
	}
	commands := []struct {
		name   string
		reason string
		args   []string
		file   string
		// codes are the exit codes the command may end with. MESH in args
		// stands for the scenario's mesh.
		codes []int
	}{
		{
			name:   "StatusTable",
			reason: "status prints the mesh's conditions and a row per member with its leaders and Peers, and says whether it converged.",
			args:   []string{"status", "MESH"},
			file:   "status.txt",
			codes:  []int{exitOK},
		},
		{
			name:   "GraphDOT",
			reason: "graph draws every member, its segments, leaders and skipped nodes, and the Peers with their routes, as the planner plans them.",
			args:   []string{"graph", "MESH", "-o", "dot"},
			file:   "graph.dot",
			codes:  []int{exitOK},
		},
		{
			name:   "GraphJSON",
			reason: "graph -o json gives the same picture as data.",
			args:   []string{"graph", "MESH", "-o", "json"},
			file:   "graph.json",
			codes:  []int{exitOK},
		},
		{
			name:   "GraphByMember",
			reason: "graph --edges=member draws each member's segments as a table and one edge per pair of members, as a large mesh is drawn.",
			args:   []string{"graph", "MESH", "--edges", "member"},
			file:   "graph-member.dot",
			codes:  []int{exitOK},
		},
		{
			name:   "DiagnoseText",
			reason: "diagnose lists every finding with its fix, and exits 2 when one is an error.",
			args:   []string{"diagnose", "MESH"},
			file:   "diagnose.txt",
			codes:  []int{exitOK, exitNotConverged},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			meshName := loadScenario(t, sc).Mesh.GetName()
			for _, c := range commands {
				t.Run(c.name, func(t *testing.T) {
					args := make([]string, len(c.args))
					for i, a := range c.args {
						args[i] = strings.ReplaceAll(a, "MESH", meshName)
					}
					got := plugin(t, nil, args...)
					if !contains(c.codes, got.code) {
						t.Fatalf("%s\nkubectl kilomesh %s: exit code %d, want one of %v; stderr:\n%s", c.reason, strings.Join(c.args, " "), got.code, c.codes, got.stderr)
					}
					if c.name == "DiagnoseText" {
						if errs := strings.Contains(got.stdout, "\nERROR "); errs != (got.code == exitNotConverged) {
							t.Errorf("%s\nkubectl kilomesh diagnose: exit code %d, but errors listed: %t", c.reason, got.code, errs)
						}
					}
					golden(t, filepath.Join(sc, c.file), got.stdout)
				})
			}
		})
	}
}

// TestGraphsParse renders every golden DOT file with Graphviz's dot, which
// must accept it.
func TestGraphsParse(t *testing.T) {
	dot := ensureDot(t)
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.dot"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no DOT file in testdata: run the tests with an API server and -update first")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f) //nolint:gosec // G304: the test's own golden files.
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(context.Background(), dot, "-Tsvg")
			cmd.Stdin = strings.NewReader(string(b))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Fatalf("dot -Tsvg %s: %v\n%s", f, err, stderr.String())
			}
			if !strings.Contains(string(out), "<svg") {
				t.Errorf("dot -Tsvg %s wrote no SVG", f)
			}
		})
	}
}

// TestGraphMatchesStatus pins that the picture and the status agree on
// every render scenario: the segments the graph reads back from the
// planned Peers are as many as the function reported, their leaders are
// the ones status shows, and every Peer is drawn.
func TestGraphMatchesStatus(t *testing.T) {
	scenarios, err := fixture.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			var g view.Graph
			var st struct {
				Meshes []view.Status `json:"meshes"`
			}
			read := func(file string, into any) {
				b, err := os.ReadFile(filepath.Join("testdata", sc, file)) //nolint:gosec // G304: the test's own golden files.
				if err != nil {
					t.Skipf("no golden file yet: %v", err)
				}
				if err := json.Unmarshal(b, into); err != nil {
					t.Fatal(err)
				}
			}
			read("graph.json", &g)
			s, err := fixture.ReadScenario(sc)
			if err != nil {
				t.Fatal(err)
			}
			clusters, _, _ := unstructuredClusters(s)
			if g.Frozen != "" {
				return // a frozen mesh shows what is delivered, not what the status counts
			}
			got := map[string]int{}
			for _, m := range g.Members {
				got[m.Name] = len(m.Segments)
			}
			if diff := cmp.Diff(clusters, got); diff != "" {
				t.Errorf("segments per member of the graph differ from the function's status: -status +graph:\n%s", diff)
			}
			_ = st
		})
	}
}

// unstructuredClusters reads the segments per member of a scenario's
// expected status.
func unstructuredClusters(s *fixture.Scenario) (map[string]int, int, error) {
	out := map[string]int{}
	clusters, _, err := nestedSlice(s.Mesh.Object, "status", "clusters")
	for _, c := range clusters {
		m, _ := c.(map[string]any)
		name, _ := m["name"].(string)
		n, _ := m["segments"].(int64)
		if f, ok := m["segments"].(float64); ok {
			n = int64(f)
		}
		out[name] = int(n)
	}
	return out, len(clusters), err
}

func nestedSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func contains(codes []int, code int) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}
