package mesh

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReasonsListed keeps the reasons in one place: every Reason constant of
// the package is named once, in skipReasons or in WarningReasons, so a new
// one cannot miss its rank in the check order (a reason left out ranks 0 and
// wins every tie-break) nor the plugin's fixes and the guide, which are held
// against those lists.
func TestReasonsListed(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	listed := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for _, n := range vs.Names {
						if d.Tok == token.CONST && strings.HasPrefix(n.Name, "Reason") {
							declared = append(declared, n.Name)
						}
						if n.Name == "skipReasons" {
							listed["skipReasons"] = reasonsNamed(vs)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Name.Name == "WarningReasons" {
					listed["WarningReasons"] = reasonsNamed(d)
				}
			}
		}
	}
	if len(listed["skipReasons"]) == 0 || len(listed["WarningReasons"]) == 0 {
		t.Fatalf("skipReasons and WarningReasons must be found in the package's source, found %v", listed)
	}
	where := map[string][]string{}
	for list, names := range listed {
		for _, n := range names {
			where[n] = append(where[n], list)
		}
	}
	for _, n := range declared {
		if len(where[n]) != 1 {
			t.Errorf("Every reason is listed once, in skipReasons (a node is left out) or in WarningReasons (a plan warns): %s is in %v", n, where[n])
		}
	}
	if len(declared) != len(where) {
		t.Errorf("The lists name %d reasons, the package declares %d", len(where), len(declared))
	}
	if got, want := len(SkipReasons()), len(skipReasons); got != want {
		t.Errorf("SkipReasons() returns %d reasons, want %d", got, want)
	}
	for i, r := range SkipReasons() {
		if checkOrder[r] != i+1 {
			t.Errorf("%s ranks %d in the check order, want %d", r, checkOrder[r], i+1)
		}
	}
}

// reasonsNamed returns the Reason constants a declaration names.
func reasonsNamed(n ast.Node) []string {
	var out []string
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Reason") {
			out = append(out, id.Name)
		}
		return true
	})
	return out
}

// guideReasons are the reasons docs/troubleshooting.md explains besides the
// planner's: the function's own.
var guideReasons = []string{"MeshFrozen"}

// TestReasonsInGuide holds docs/troubleshooting.md's tables of skipped nodes
// and warnings against the lists: every reason, in the check order, and
// whether it clears by itself.
func TestReasonsInGuide(t *testing.T) {
	tables := guideTables(t, "../../docs/troubleshooting.md")
	type row struct {
		Reason    string
		Transient bool
	}
	var want, got []row
	for _, r := range skipReasons {
		want = append(want, row{r.reason, r.transient})
	}
	for _, cells := range tables["Skipped nodes"] {
		if len(cells) < 2 {
			t.Fatalf("a row of Skipped nodes has %d cells: %v", len(cells), cells)
		}
		got = append(got, row{cells[0], cells[1] == "yes"})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/troubleshooting.md, Skipped nodes, lists every skip reason in the order the checks run, with whether it clears by itself (-code, +guide):\n%s", diff)
	}
	wantWarnings := append(WarningReasons(), guideReasons...)
	var gotWarnings []string
	for _, cells := range tables["Warnings"] {
		gotWarnings = append(gotWarnings, cells[0])
	}
	sort.Strings(wantWarnings)
	sort.Strings(gotWarnings)
	if diff := cmp.Diff(wantWarnings, gotWarnings); diff != "" {
		t.Errorf("docs/troubleshooting.md, Warnings, explains every warning's reason (-code, +guide):\n%s", diff)
	}
}

var reasonCell = regexp.MustCompile("^`([A-Za-z]+)`$")

// guideTables returns, by section, the rows of the tables of a Markdown
// file whose first cell is a reason in backquotes, without that cell's
// quotes.
func guideTables(t *testing.T, path string) map[string][][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = h
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := reasonCell.FindStringSubmatch(cells[0])
		if m == nil {
			continue
		}
		cells[0] = m[1]
		out[section] = append(out[section], cells)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
