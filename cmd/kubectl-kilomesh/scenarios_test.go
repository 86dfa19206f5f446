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

	"github.com/kilomesh/kilomesh/internal/plugin/view"
	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// TestScenarios runs every command on every render scenario, loaded into
// an API server as the function and the providers wrote it, and compares
// the output with the golden files of testdata/<scenario>.
func TestScenarios(t *testing.T) {
	needAPIServer(t)
	scenarios, err := meshfixture.Scenarios()
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
			scenario := loadScenario(t, sc)
			meshName := scenario.Mesh.GetName()
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
			t.Run("SegmentsAsTheFunction", func(t *testing.T) {
				// The segments the graph reads back from the planned Peers
				// are those the function counted, on every member; a frozen
				// mesh shows what is delivered instead.
				got := plugin(t, nil, "graph", meshName, "-o", "json")
				var g view.Graph
				if err := json.Unmarshal([]byte(got.stdout), &g); err != nil {
					t.Fatal(err)
				}
				if g.Frozen != "" {
					return
				}
				segs := map[string]int{}
				for _, m := range g.Members {
					segs[m.Name] = len(m.Segments)
				}
				if diff := cmp.Diff(segmentsOf(t, scenario), segs); diff != "" {
					t.Errorf("graph: segments per member differ from the function's status: -function +graph:\n%s", diff)
				}
			})
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
			b, err := os.ReadFile(f)
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

// segmentsOf reads the segments per member of a scenario's status, as the
// function reported it.
func segmentsOf(t *testing.T, sc *meshfixture.Scenario) map[string]int {
	t.Helper()
	var st struct {
		Status struct {
			Clusters []struct {
				Name     string `json:"name"`
				Segments int    `json:"segments"`
			} `json:"clusters"`
		} `json:"status"`
	}
	b, err := json.Marshal(sc.Mesh.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range st.Status.Clusters {
		out[c.Name] = c.Segments
	}
	return out
}

func contains(codes []int, code int) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}
