package view

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Bounds of the table: a cell holds at most maxCell characters and lists
// at most maxListed names; the whole text is in -o json and -o yaml.
const (
	maxCell   = 90
	maxListed = 3
)

// WriteStatus writes the status of meshes as tables; ages are counted from
// now, the management cluster's clock.
func WriteStatus(w io.Writer, now time.Time, sts []Status) error {
	ew := &errWriter{w: w}
	for i, st := range sts {
		if i > 0 {
			ew.printf("\n")
		}
		writeStatus(ew, now, st)
	}
	return ew.err
}

func writeStatus(w *errWriter, now time.Time, st Status) {
	verdict := "converged"
	if !st.Converged {
		verdict = "not converged"
	}
	w.printf("ClusterMesh %s/%s: %s\n", st.Namespace, st.Name, verdict)
	w.printf("delivery %s, granularity %s: %s, %s, %s skipped\n\n", st.Delivery, orDash(st.Granularity),
		plural(len(st.Members), "member"), plural(st.Peers, "Peer"), plural(st.Skipped, "node"))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	tw2 := &errWriter{w: tw}
	tw2.printf("CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE\n")
	for _, c := range st.Conditions {
		status := c.Status
		if c.Stale {
			status += " (stale)"
		}
		tw2.printf("%s\t%s\t%s\t%s\t%s\n", c.Type, status, orDash(c.Reason), since(c.Since, now), orDash(cell(c.Message)))
	}
	if len(st.Conditions) == 0 {
		tw2.printf("-\t-\t-\t-\tno condition yet: Crossplane has not reconciled the mesh\n")
	}
	tw2.printf("\n")
	tw2.printf("MEMBER\tREACHABLE\tNODES\tSEGMENTS\tLEADERS\tPEERS OUT\tPEERS IN\tSKIPPED\tCONFLICTS\tLAST OBSERVED\n")
	for _, m := range st.Members {
		tw2.printf("%s\t%s\t%d\t%d\t%s\t%d\t%s\t%d\t%d\t%s\n", m.Name, reachable(m), m.Nodes, m.Segments,
			names(m.Leaders), m.PeersOut, peersInCell(m), m.SkippedNodes, m.Conflicts, since(m.LastObserved, now))
	}
	w.err = firstErr(w.err, tw2.err, tw.Flush())

	var skipped, messages, handshakes []string
	for _, m := range st.Members {
		if h := m.Handshakes; h != nil {
			handshakes = append(handshakes, fmt.Sprintf("  %s: %d of %d Peers with a keepalive", m.Name, h.Seen, h.Peers))
		}
		if m.SkippedNodes > 0 {
			var parts []string
			for _, r := range m.SkippedReasons() {
				parts = append(parts, fmt.Sprintf("%s %d", r, m.Skipped[r]))
			}
			line := fmt.Sprintf("  %s: %s", m.Name, strings.Join(parts, ", "))
			if m.MoreSkipped > 0 {
				line += fmt.Sprintf(" (and %d not listed in the status)", m.MoreSkipped)
			}
			skipped = append(skipped, line)
		}
		if m.Message != "" {
			messages = append(messages, fmt.Sprintf("  %s: %s", m.Name, m.Message))
		}
	}
	section(w, "Skipped nodes by reason:", skipped)
	section(w, "Member messages:", messages)
	section(w, "Handshakes its leaders recorded (kilo.squat.ai/discovered-endpoints: evidence a tunnel worked, not that it works now):", handshakes)
	waits := make([]string, 0, len(st.Waiting))
	for _, wt := range st.Waiting {
		waits = append(waits, "  - "+wt)
	}
	section(w, "Waiting for:", waits)
}

func section(w *errWriter, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	w.printf("\n%s\n%s\n", title, strings.Join(lines, "\n"))
}

func reachable(m Member) string {
	switch {
	case !m.Observed && !m.Reachable:
		return "not yet"
	case m.Reachable:
		return "yes"
	}
	return "no"
}

// peersInCell is "applied/desired": "-" where unknown.
func peersInCell(m Member) string {
	if m.Desired == nil {
		return "-"
	}
	applied := "-"
	if m.Applied != nil {
		applied = strconv.Itoa(*m.Applied)
	}
	return applied + "/" + strconv.Itoa(*m.Desired)
}

// names lists up to maxListed names and counts the rest.
func names(ns []string) string {
	if len(ns) == 0 {
		return "-"
	}
	if len(ns) <= maxListed {
		return strings.Join(ns, ",")
	}
	return fmt.Sprintf("%s,+%d", strings.Join(ns[:maxListed], ","), len(ns)-maxListed)
}

// since is a time and how long ago it was.
func since(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + Age(now.Sub(*t)) + ")"
}

// Age says how long ago a duration was, like kubectl does: 45s ago, 3m
// ago, 5h ago, 2d ago; a negative one is in the future: in 2m.
func Age(d time.Duration) string {
	if d < 0 {
		return "in " + span(-d)
	}
	return span(d) + " ago"
}

func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// cell cuts a message for a table cell on a character boundary.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxCell {
		return s
	}
	r := []rune(s)
	return string(r[:maxCell-3]) + "..."
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// errWriter keeps the first error of a series of writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, format, a...)
}

// Write writes through, unless an earlier write failed.
func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	var n int
	n, e.err = e.w.Write(b)
	return n, e.err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteDiagnosis writes the findings about meshes, each with its fix.
func WriteDiagnosis(w io.Writer, ds []Diagnosis) error {
	ew := &errWriter{w: w}
	for i, d := range ds {
		if i > 0 {
			ew.printf("\n")
		}
		verdict := "no problem found"
		if len(d.Findings) > 0 {
			verdict = fmt.Sprintf("%s, %s, %s", plural(d.Errors(), "error"), plural(d.Warnings(), "warning"),
				plural(len(d.Findings)-d.Errors()-d.Warnings(), "note"))
		}
		ew.printf("ClusterMesh %s/%s: %s\n", d.Namespace, d.Name, verdict)
		for _, f := range d.Findings {
			where := f.Check
			if f.Member != "" {
				where += " " + f.Member
			}
			ew.printf("\n%-7s %s: %s\n", strings.ToUpper(f.Severity), where, f.Message)
			if f.Fix != "" {
				ew.printf("        fix: %s\n", f.Fix)
			}
		}
		ew.printf("\nchecked: %s\n", strings.Join(d.Checks, ", "))
	}
	return ew.err
}
