package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/semver"
)

// changelogSection is one "## " section of CHANGELOG.md.
type changelogSection struct {
	heading string
	version string // empty for Unreleased
	date    string
	body    string
}

var releaseHeading = regexp.MustCompile(`^## (v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?) - ([0-9]{4}-[0-9]{2}-[0-9]{2})$`)

// changelogKinds are the only "### " headings a section may have (a kind may
// be followed by a note in brackets).
var changelogKinds = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// parseChangelog splits CHANGELOG.md into its sections and reports every
// line that breaks its shape.
func parseChangelog(text string) (sections []changelogSection, problems []string) {
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || lines[0] != "# Changelog" {
		problems = append(problems, `the first line is not "# Changelog"`)
	}
	var body []string
	flush := func() {
		if len(sections) > 0 {
			sections[len(sections)-1].body = strings.TrimSpace(strings.Join(body, "\n"))
		}
		body = nil
	}
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			s := changelogSection{heading: line}
			if m := releaseHeading.FindStringSubmatch(line); m != nil {
				s.version, s.date = m[1], m[2]
			} else if line != "## Unreleased" {
				problems = append(problems, "line "+strconv.Itoa(i+1)+": "+line+` is neither "## Unreleased" nor "## vX.Y.Z - YYYY-MM-DD"`)
			}
			sections = append(sections, s)
		case strings.HasPrefix(line, "### "):
			kind := strings.TrimPrefix(line, "### ")
			known := false
			for _, k := range changelogKinds {
				if kind == k || strings.HasPrefix(kind, k+" (") {
					known = true
				}
			}
			if !known {
				problems = append(problems, "line "+strconv.Itoa(i+1)+": "+line+" is not one of "+strings.Join(changelogKinds, ", "))
			}
			body = append(body, line)
		default:
			body = append(body, line)
		}
	}
	flush()
	return sections, problems
}

// recordedReleases reads the versions package/releases records.
func recordedReleases(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "package", "releases"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var versions []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		versions = append(versions, fields[0])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return versions
}

// TestChangelog holds CHANGELOG.md to its shape: Unreleased first, then one
// section per release, newest first, with a date that never grows down the
// page; only the kinds of change of changelogKinds; a section for every
// release package/releases records, and no other but the newest; and
// package/release-notes.sh prints each section's body, as the release
// workflow publishes it.
func TestChangelog(t *testing.T) {
	sections, problems := parseChangelog(read(t, "CHANGELOG.md"))
	for _, p := range problems {
		t.Errorf("CHANGELOG.md: %s", p)
	}
	if len(sections) == 0 || sections[0].heading != "## Unreleased" {
		t.Fatalf(`CHANGELOG.md: the first section is not "## Unreleased"`)
	}
	for i := 2; i < len(sections); i++ {
		prev, cur := sections[i-1], sections[i]
		if prev.version == "" || cur.version == "" {
			t.Errorf("CHANGELOG.md: %q follows %q: Unreleased comes once, first", cur.heading, prev.heading)
			continue
		}
		if semver.Compare(prev.version, cur.version) <= 0 {
			t.Errorf("CHANGELOG.md: %s comes before %s: newest first", prev.version, cur.version)
		}
		if prev.date < cur.date {
			t.Errorf("CHANGELOG.md: %s is dated %s, after %s's %s below it", cur.version, cur.date, prev.version, prev.date)
		}
	}
	documented := map[string]bool{}
	for _, s := range sections {
		documented[s.version] = true
		if s.body == "" {
			t.Errorf("CHANGELOG.md: %q is empty", s.heading)
		}
	}
	recorded := map[string]bool{}
	for _, v := range recordedReleases(t) {
		recorded[v] = true
		if !documented[v] {
			t.Errorf("CHANGELOG.md has no section for %s, which package/releases records", v)
		}
	}
	// The newest release may be the one being tagged, whose commit
	// package/releases can record only in a later commit; every older one
	// must be recorded.
	for i, s := range sections {
		if s.version != "" && !recorded[s.version] && i != 1 {
			t.Errorf("CHANGELOG.md has a section for %s, which package/releases does not record", s.version)
		}
	}

	for _, s := range sections {
		version := s.version
		if version == "" {
			version = "v99.0.0" // a tag no section has yet: the Unreleased notes
		}
		out, err := exec.CommandContext(t.Context(), filepath.Join(root, "package", "release-notes.sh"), version).Output()
		if err != nil {
			t.Errorf("package/release-notes.sh %s: %v", version, err)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != s.body {
			t.Errorf("package/release-notes.sh %s printed\n%s\nwant the body of %q:\n%s", version, got, s.heading, s.body)
		}
	}
}
