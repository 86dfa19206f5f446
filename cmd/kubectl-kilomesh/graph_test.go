package main

import (
	"strings"
	"testing"
)

// TestGraph pins how graph picks its mesh and renders SVG: through
// Graphviz's dot when it is installed, else as DOT with a hint.
func TestGraph(t *testing.T) {
	needAPIServer(t)
	type want struct {
		code int
		// stdout and stderr begin with or hold these texts.
		stdoutPrefix string
		stdout       []string
		stderr       []string
	}
	cases := map[string]struct {
		reason   string
		scenario string
		env      func(t *testing.T) *env
		args     []string
		want     want
	}{
		"SVG": {
			reason:   "With Graphviz installed, -o svg is an SVG picture.",
			scenario: "three-clusters",
			env: func(t *testing.T) *env {
				dot := ensureDot(t)
				return &env{lookPath: func(string) (string, error) { return dot, nil }}
			},
			args: []string{"graph", "mesh", "-o", "svg"},
			want: want{code: exitOK, stdoutPrefix: "<?xml", stdout: []string{"<svg", "cluster&#45;a", "node&#45;c2 (leader)"}},
		},
		"NoGraphviz": {
			reason:   "Without Graphviz, -o svg writes the DOT and says how to render it.",
			scenario: "three-clusters",
			env:      func(*testing.T) *env { return &env{lookPath: noDot} },
			args:     []string{"graph", "mesh", "-o", "svg"},
			want:     want{code: exitOK, stdoutPrefix: "digraph kilomesh {", stderr: []string{"Graphviz's dot is not installed", "dot -Tsvg"}},
		},
		"TheOnlyMesh": {
			reason:   "Without a name, the namespace's only mesh is drawn.",
			scenario: "two-clusters",
			args:     []string{"graph"},
			want:     want{code: exitOK, stdoutPrefix: "digraph kilomesh {", stdout: []string{"ClusterMesh network/mesh"}},
		},
		"SeveralMeshes": {
			reason:   "Without a name, a namespace of several meshes is an error that names them.",
			scenario: "shared-hub",
			args:     []string{"graph"},
			want:     want{code: exitError, stderr: []string{"holds 2 ClusterMeshes (tenant-a, tenant-b): name the one to draw"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			loadScenario(t, tc.scenario)
			var e *env
			if tc.env != nil {
				e = tc.env(t)
			}
			got := plugin(t, e, tc.args...)
			if got.code != tc.want.code {
				t.Errorf("%s\nkubectl kilomesh %s: exit code %d, want %d; stderr: %s", tc.reason, strings.Join(tc.args, " "), got.code, tc.want.code, got.stderr)
			}
			if !strings.HasPrefix(got.stdout, tc.want.stdoutPrefix) {
				t.Errorf("%s\nkubectl kilomesh %s: stdout does not begin with %q:\n%.200s", tc.reason, strings.Join(tc.args, " "), tc.want.stdoutPrefix, got.stdout)
			}
			for _, s := range tc.want.stdout {
				if !strings.Contains(got.stdout, s) {
					t.Errorf("%s\nkubectl kilomesh %s: stdout does not hold %q", tc.reason, strings.Join(tc.args, " "), s)
				}
			}
			for _, s := range tc.want.stderr {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("%s\nkubectl kilomesh %s: stderr does not say %q:\n%s", tc.reason, strings.Join(tc.args, " "), s, got.stderr)
				}
			}
		})
	}
}
