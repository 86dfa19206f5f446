//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// A reporter gathers what the run measured and writes it out at the end:
// change-to-Peer latencies per delivery mode and kind of change, and notes.
type reporter struct {
	path    string
	mu      sync.Mutex
	samples map[string][]time.Duration // by "<mode> <kind>"
	events  map[string][]float64       // XR watch events per change, by "<mode> <kind>"
	sources map[string]*stepEvents     // XR watch events by source, by step
	order   []string                   // steps in the order first seen
	notes   []string
	faults  []string // the fault table's rows
}

// stepEvents are the watch events of the XR during every run of one step.
type stepEvents struct {
	runs   int
	counts map[string]int
}

// xrEvents reports, for one step, the watch events that reached the XR since
// the previous step, by the kind of resource they came from and the kind of
// change, with the count Crossplane's circuit breaker itself recorded.
func (r *reporter) xrEvents(step string, ref meshRef) {
	counts := xrTrace.take(ref.String())
	r.mu.Lock()
	defer r.mu.Unlock()
	se := r.sources[step]
	if se == nil {
		se = &stepEvents{counts: map[string]int{}}
		r.sources[step] = se
		r.order = append(r.order, step)
	}
	se.runs++
	for k, n := range counts {
		se.counts[k] += n
	}
}

func newReporter(path string) *reporter {
	return &reporter{path: path, samples: map[string][]time.Duration{}, events: map[string][]float64{}, sources: map[string]*stepEvents{}}
}

func (r *reporter) sample(mode, kind string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[mode+" "+kind] = append(r.samples[mode+" "+kind], d)
	r.samples[mode+" all"] = append(r.samples[mode+" all"], d)
}

func (r *reporter) count(mode, kind string, n float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[mode+" "+kind] = append(r.events[mode+" "+kind], n)
}

// fault adds a row to the fault table: what went wrong, how many Peers of
// the mesh were lost and written again, how long the mesh took to converge
// (from the node's addition, the fault's end included).
func (r *reporter) fault(mode, name string, lost, rewritten int, took time.Duration, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, fmt.Sprintf("  %-8s %-48s %5d %9d %9.1f  %s", mode, name, lost, rewritten, took.Seconds(), note))
}

func (r *reporter) notef(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, a...))
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func (r *reporter) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "kilomesh e2e, %s, %.0fs\n\n", started.UTC().Format(time.RFC3339), time.Since(started).Seconds())
	if len(r.samples) > 0 {
		fmt.Fprintf(&b, "change -> updated Peer in another member (watch event), seconds:\n")
		fmt.Fprintf(&b, "  %-28s %5s %7s %7s %7s %7s\n", "mode and change", "n", "min", "p50", "p95", "max")
		keys := make([]string, 0, len(r.samples))
		for k := range r.samples {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := append([]time.Duration(nil), r.samples[k]...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			fmt.Fprintf(&b, "  %-28s %5d %7.2f %7.2f %7.2f %7.2f\n", k, len(s), s[0].Seconds(), percentile(s, 0.5).Seconds(), percentile(s, 0.95).Seconds(), s[len(s)-1].Seconds())
		}
		b.WriteString("  goal: p50 <= 1 s, p95 <= 3 s (reported, not asserted)\n\n")
	}
	if len(r.events) > 0 {
		b.WriteString("watch events the XR's circuit breaker counted per batch of node changes made at once (burst 100, refill 1/s by default):\n")
		keys := make([]string, 0, len(r.events))
		for k := range r.events {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sum, mx := 0.0, 0.0
			for _, n := range r.events[k] {
				sum += n
				if n > mx {
					mx = n
				}
			}
			fmt.Fprintf(&b, "  %-28s mean %5.1f  max %3.0f  (n=%d)\n", k, sum/float64(len(r.events[k])), mx, len(r.events[k]))
		}
		b.WriteString("\n")
	}
	if len(r.order) > 0 {
		b.WriteString("watch events that reached the XR per step (mean of its runs), by source kind and change, traced in the management cluster:\n")
		for _, step := range r.order {
			se := r.sources[step]
			mean := map[string]int{}
			for k, n := range se.counts {
				mean[k] = (n + se.runs/2) / se.runs
			}
			line, total := tally(mean)
			fmt.Fprintf(&b, "  %-40s n=%-3d %5d  %s\n", step, se.runs, total, line)
		}
		b.WriteString("\n")
	}
	if usageOf != nil {
		if u := usageOf.text(); u != "" {
			b.WriteString("CPU and resident memory of the packages' and Crossplane's pods (their cgroups on the management node, every 5 s):\n" + u + "\n")
		}
	}
	if len(r.faults) > 0 {
		b.WriteString("fault table (real pods; a node of cluster-a added as each fault began; converged: seconds from then, the fault's end included):\n")
		fmt.Fprintf(&b, "  %-8s %-48s %5s %9s %9s  %s\n", "mode", "fault", "lost", "rewritten", "converged", "what happened")
		for _, f := range r.faults {
			b.WriteString(f + "\n")
		}
		b.WriteString("\n")
	}
	for _, n := range r.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

func (r *reporter) write() {
	t := r.text()
	fmt.Fprint(os.Stderr, "\n"+t)
	if err := os.WriteFile(r.path, []byte(t), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot write the report:", err)
	}
}
