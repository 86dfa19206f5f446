// Package metricsdoc reads the table of metrics of docs/observability.md, so
// that tests hold the function's and the provider's registries, and the
// alert rules of examples/monitoring, against the one list users read.
package metricsdoc

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// A Family is a metric family of the table.
type Family struct {
	Name      string
	From      string // "function" or "provider"
	Histogram bool
}

// row is a row of the table: the metric in backquotes, what exports it,
// what it counts.
var row = regexp.MustCompile("^\\| `([^`]+)` \\| ([a-z]+) \\| ([^|]*) \\|")

// names expands a metric of the table: a {a,b} right after an underscore
// names several families, a {...} after a word the labels.
func names(metric string) []string {
	name, rest, _ := strings.Cut(metric, "{")
	if !strings.HasSuffix(name, "_") {
		return []string{name}
	}
	alts, rest, _ := strings.Cut(rest, "}")
	suffix, _, _ := strings.Cut(rest, "{")
	var out []string
	for _, a := range strings.Split(alts, ",") {
		out = append(out, name+a+suffix)
	}
	return out
}

// Read returns the families of the table of metrics of a Markdown file.
func Read(path string) ([]Family, error) {
	f, err := os.Open(path) //nolint:gosec // G304: a file of the repository the test names.
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Family
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		for _, n := range names(m[1]) {
			out = append(out, Family{Name: n, From: m[2], Histogram: strings.Contains(m[3], "histogram")})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no table of metrics", path)
	}
	return out, nil
}

// From returns the sorted names of the families one component exports.
func From(families []Family, from string) []string {
	var out []string
	for _, f := range families {
		if f.From == from {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Diff compares the families one component exports, as the table of a
// Markdown file lists them, with those its collectors describe: empty when
// they agree, else the difference (-table, +described).
func Diff(path, from string, cs ...prometheus.Collector) (string, error) {
	families, err := Read(path)
	if err != nil {
		return "", err
	}
	return cmp.Diff(From(families, from), Described(cs...)), nil
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Described returns the sorted names of the families collectors describe.
func Described(cs ...prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	seen := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
