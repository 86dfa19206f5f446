package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

// docsPage is the page that shows the plugin's outputs.
const docsPage = "docs/observability.md"

// docsPicture is the picture of the page, rendered from the three-clusters
// graph.
const docsPicture = "docs/observability-three-clusters.svg"

// outputBlock finds a block of the page marked as an output of the tests:
// <!-- output: <scenario>/<file> --> and the text block right after it.
var outputBlock = regexp.MustCompile("(?s)<!-- output: ([a-z0-9/.-]+) -->\n```text\n(.*?)```\n")

// TestDocsOutputs checks that every output the docs show is the golden file
// it names, so that the page shows what the plugin prints.
func TestDocsOutputs(t *testing.T) {
	top, err := meshfixture.Top()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(top, docsPage))
	if err != nil {
		t.Fatal(err)
	}
	blocks := outputBlock.FindAllStringSubmatch(string(b), -1)
	if len(blocks) == 0 {
		t.Fatalf("%s shows no output marked <!-- output: ... -->", docsPage)
	}
	for _, m := range blocks {
		t.Run(m[1], func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", m[1]))
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != m[2] {
				t.Errorf("%s shows an output of %s that is not the golden file:\n%s", docsPage, m[1], lineDiff(string(want), m[2]))
			}
		})
	}
}

// TestDocsPicture checks the picture of the docs: rendered by Graphviz from
// the three-clusters graph (rewritten with -update), it names every leader
// and endpoint the graph does.
func TestDocsPicture(t *testing.T) {
	top, err := meshfixture.Top()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(top, docsPicture)
	if *update {
		dot := ensureDot(t)
		cmd := exec.CommandContext(context.Background(), dot, "-Tsvg", filepath.Join("testdata", "three-clusters", "graph.dot"), "-o", file)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dot: %v\n%s", err, b)
		}
	}
	svg, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dot, err := os.ReadFile(filepath.Join("testdata", "three-clusters", "graph.dot"))
	if err != nil {
		t.Fatal(err)
	}
	texts := regexp.MustCompile(`(node-[a-c][12] \(leader\))|endpoint ([^\\"]+)`).FindAllString(string(dot), -1)
	if len(texts) == 0 {
		t.Fatal("the three-clusters graph names no leader")
	}
	escaped := strings.NewReplacer("-", "&#45;")
	for _, s := range texts {
		if !strings.Contains(string(svg), escaped.Replace(s)) {
			t.Errorf("%s does not show %q of the three-clusters graph: run go test ./cmd/kubectl-kilomesh/ -run TestDocsPicture -update", docsPicture, s)
		}
	}
}
