// Package docs checks the Markdown documentation (docs/*.md, README.md,
// CHANGELOG.md and test/README.md) against the project: every YAML block parses and every
// Kubernetes object in one passes `crossplane resource validate` against its
// schema, every `make` target named exists, every relative link leads
// somewhere, and the member RBAC example is the one the end-to-end stack
// applies.
package docs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	root = "../.."
	// strictEnv makes a missing Crossplane CLI or schema a failure instead of
	// a skip; the make target that runs this check sets it.
	strictEnv = "KILOMESH_DOCS_STRICT"
)

// markdownFiles are the pages checked, relative to the repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"), filepath.Join(root, "test", "README.md"))
	rel := make([]string, 0, len(files))
	for _, f := range files {
		r, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, r)
	}
	sort.Strings(rel)
	return rel
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A block is a fenced code block of a page.
type block struct {
	file string
	// line is the line of the opening fence, counting from 1.
	line int
	lang string
	body string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_-]*)")

// blocks returns the fenced code blocks of a page, and the page's text with
// them blanked out (so that links and headings in code are not read).
func blocks(file, text string) ([]block, string) {
	var out []block
	var prose strings.Builder
	var cur *block
	var closing string
	var body strings.Builder
	for i, l := range strings.Split(text, "\n") {
		m := fence.FindStringSubmatch(l)
		switch {
		case cur == nil && m != nil:
			cur = &block{file: file, line: i + 1, lang: m[2]}
			closing = m[1]
			body.Reset()
			prose.WriteString("\n")
		case cur != nil && m != nil && strings.TrimSpace(l) == closing:
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
			prose.WriteString("\n")
		case cur != nil:
			body.WriteString(l + "\n")
			prose.WriteString("\n")
		default:
			prose.WriteString(l + "\n")
		}
	}
	return out, prose.String()
}

// An object is one YAML document of a block that is a Kubernetes object.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// documents splits a YAML block into documents and decodes what each names.
func documents(body string) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(body)))
	var out []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			return nil, err
		}
		o := object{}
		if m, ok := v.(map[string]any); ok {
			o.APIVersion, _ = m["apiVersion"].(string)
			o.Kind, _ = m["kind"].(string)
		}
		out = append(out, o)
	}
}

// schemas gathers every schema the docs' objects are validated against, in
// one folder, and returns it with the API groups it covers.
func schemas(t *testing.T) (string, map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	groups := map[string]bool{"": true} // Kubernetes' own kinds: the CLI knows them
	add := func(pattern string) int {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			spec := struct {
				Spec struct {
					Group string `json:"group"`
				} `json:"spec"`
			}{}
			if err := yaml.Unmarshal(b, &spec); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			groups[spec.Spec.Group] = true
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return len(files)
	}
	for _, p := range []string{"package/configuration/xrd.yaml", "package/provider/crds/*.yaml", "test/crds/*.yaml"} {
		if add(filepath.Join(root, p)) == 0 {
			t.Fatalf("no schema at %s", p)
		}
	}
	// provider-kubernetes and Crossplane core, from the module cache, at the
	// versions the tool modules pin.
	for _, m := range []struct{ toolMod, module, crds string }{
		{"test/tools/provider-kubernetes/go.mod", "github.com/crossplane-contrib/provider-kubernetes", "package/crds/kubernetes.m.crossplane.io_*.yaml"},
		{"test/tools/crossplane/go.mod", "github.com/crossplane/crossplane/v2", "cluster/crds/*.yaml"},
	} {
		moduleDir, err := moduleDir(filepath.Join(root, m.toolMod), m.module)
		if err == nil && add(filepath.Join(moduleDir, m.crds)) > 0 {
			continue
		}
		msg := fmt.Sprintf("no CRDs of %s (%v): objects of its kinds are not validated", m.module, err)
		if os.Getenv(strictEnv) != "" {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	return dir, groups
}

// moduleDir returns where the Go module cache holds a module at the version a
// tool module requires, downloading it if needed.
func moduleDir(goMod, module string) (string, error) {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s does not require %s", goMod, module)
	}
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+string(m[1])) //nolint:noctx // a module of the repository's own pins
	cmd.Dir = os.TempDir()
	// Outside any module, like test/render/check.sh; one dependency of
	// provider-kubernetes is not in the checksum database.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GONOSUMDB=github.com/nebius/gosdk", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, m[1], err)
	}
	dl := struct{ Dir string }{}
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s told no folder", module, m[1])
	}
	return dl.Dir, nil
}

var missingSchema = regexp.MustCompile(`could not find CRD/XRD for: (\S*), Kind=(\S+)`)

// TestYAMLBlocks parses every YAML block of the docs and validates every
// Kubernetes object in them against its schema.
func TestYAMLBlocks(t *testing.T) {
	cli, err := filepath.Abs(filepath.Join(root, ".cache", "bin", "crossplane"))
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(cli)
	haveCLI := statErr == nil
	if !haveCLI && os.Getenv(strictEnv) != "" {
		t.Fatalf("%s is missing: run test/tools/build.sh crossplane-cli", cli)
	}
	var schemaDir string
	var covered map[string]bool
	if haveCLI {
		schemaDir, covered = schemas(t)
	}
	work := t.TempDir()

	count := 0
	for _, f := range markdownFiles(t) {
		bs, _ := blocks(f, read(t, f))
		for _, b := range bs {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			count++
			t.Run(b.String(), func(t *testing.T) {
				objs, err := documents(b.body)
				if err != nil {
					t.Fatalf("%s: the YAML does not parse: %v", b, err)
				}
				validated := 0
				for _, o := range objs {
					if o.APIVersion != "" && o.Kind != "" {
						validated++
					}
				}
				if validated == 0 {
					return // a fragment: parsing it is all there is to check
				}
				if !haveCLI {
					t.Skipf("%s: not validated, %s is missing (test/tools/build.sh crossplane-cli)", b, cli)
				}
				file := filepath.Join(work, fmt.Sprintf("%s-%d.yaml", strings.NewReplacer("/", "_", ".", "_").Replace(b.file), b.line))
				if err := os.WriteFile(file, []byte(b.body), 0o600); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(cli, "resource", "validate", schemaDir, file, "--crossplane-image=", "--skip-success-results") //nolint:noctx // the project's own CLI build
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s: invalid:\n%s", b, out)
				}
				for _, m := range missingSchema.FindAllStringSubmatch(string(out), -1) {
					group := m[1]
					if i := strings.LastIndex(group, "/"); i >= 0 {
						group = group[:i]
					} else {
						group = ""
					}
					if covered[group] {
						t.Errorf("%s: %s %s has no schema, although its group's schemas are known: a wrong apiVersion or kind?", b, m[1], m[2])
					}
				}
			})
		}
	}
	if count == 0 {
		t.Fatal("no YAML block found in the docs")
	}
}

var (
	makeInline = regexp.MustCompile("`make ([a-z][a-z0-9-]*)")
	makeLine   = regexp.MustCompile(`^\s*(?:\$\s+)?make\s+([a-z][a-z0-9-]*)`)
	makeTarget = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
)

// TestMakeTargets checks that every `make TARGET` the docs name is a target
// of the Makefile.
func TestMakeTargets(t *testing.T) {
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(read(t, "Makefile"), -1) {
		targets[m[1]] = true
	}
	if len(targets) == 0 {
		t.Fatal("no target found in the Makefile")
	}
	for _, f := range markdownFiles(t) {
		text := read(t, f)
		named := map[string]bool{}
		for _, m := range makeInline.FindAllStringSubmatch(text, -1) {
			named[m[1]] = true
		}
		bs, _ := blocks(f, text)
		for _, b := range bs {
			if b.lang != "sh" && b.lang != "bash" && b.lang != "console" {
				continue
			}
			for _, l := range strings.Split(b.body, "\n") {
				if m := makeLine.FindStringSubmatch(l); m != nil {
					named[m[1]] = true
				}
			}
		}
		for target := range named {
			if !targets[target] {
				t.Errorf("%s names `make %s`, which the Makefile does not have", f, target)
			}
		}
	}
}

var (
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	heading  = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// anchors returns the anchors GitHub gives the headings of a page.
func anchors(prose string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestLinks checks that every relative link of the docs leads to a file or
// folder of the repository, and to a heading of it when it names one.
func TestLinks(t *testing.T) {
	for _, f := range markdownFiles(t) {
		_, prose := blocks(f, read(t, f))
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(prose, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			_, destProse := blocks(dest, read(t, dest))
			if !anchors(destProse)[anchor] {
				t.Errorf("%s links to %s, but %s has no heading #%s", f, target, dest, anchor)
			}
		}
	}
}
