package dataplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// A Pair is one probe: a datagram from one pod address to another, echoed
// back.
type Pair struct {
	From, To Pod
}

func (p Pair) String() string { return p.From.String() + " -> " + p.To.String() }

// A Result is the outcome of a probe.
type Result struct {
	Pair
	// Err says why no echo came back; nil when one did.
	Err error
	// Took is how long until the echo came back.
	Took time.Duration
}

// Probing is how hard a probe tries.
type Probing struct {
	// Tries is how many datagrams a probe sends at most.
	Tries int
	// Wait is how long a probe waits for the echo of each.
	Wait time.Duration
	// Parallel is how many probes run at once.
	Parallel int
	// Stagger delays the probes towards clusters whose names sort first
	// (see Run).
	Stagger time.Duration
}

// DefaultProbing tries 40 times, 500 ms each (20 s at most per pair), 128
// pairs at once, staggered by 1 s. The first datagram of a pair also starts
// the WireGuard handshakes on its way, which take milliseconds here; but a
// handshake initiation that arrives before its peer is configured on the
// other side is lost, and WireGuard sends the next one 5 s later
// (REKEY_TIMEOUT); and a peer that still holds a session the other side
// dropped when its configuration was replaced starts a new handshake only
// after 15 s without an answer.
var DefaultProbing = Probing{Tries: 40, Wait: 500 * time.Millisecond, Parallel: 128, Stagger: time.Second}

var errNoEcho = errors.New("no echo")

// Probe sends a datagram from the pod address From to the echo port of the
// pod address To, from From's namespace, and waits for its echo.
func Probe(ctx context.Context, p Pair, pr Probing) (time.Duration, error) {
	var c *net.UDPConn
	err := inNetns(p.From.Netns, func() error {
		var err error
		c, err = net.DialUDP("udp", &net.UDPAddr{IP: p.From.Addr.AsSlice()}, &net.UDPAddr{IP: p.To.Addr.AsSlice(), Port: EchoPort})
		return err
	})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return 0, err
	}
	start := time.Now()
	buf := make([]byte, 64)
	for range pr.Tries {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// A send fails while no route leads to the address: that is a
		// failed try, not the end of the probe.
		_, _ = c.Write(token)
		deadline := time.Now().Add(pr.Wait)
		_ = c.SetReadDeadline(deadline)
		for {
			n, err := c.Read(buf)
			if err != nil {
				if time.Now().Before(deadline) {
					// An ICMP error read as a failed receive: wait out
					// the try.
					time.Sleep(time.Until(deadline))
				}
				break
			}
			if bytes.Equal(buf[:n], token) {
				return time.Since(start), nil
			}
		}
	}
	return 0, fmt.Errorf("%w in %d tries of %s", errNoEcho, pr.Tries, pr.Wait)
}

// Run probes every pair, Parallel at a time, and returns the results in the
// order of pairs.
//
// Probes from a cluster to one whose name sorts before it start Stagger
// later than the others. Two WireGuard peers that start a handshake with
// each other at the same moment can both drop the other's response and
// retry together 5 s later; staggered, one side starts each handshake, and
// the other side's probes, starting later, start a new handshake where a
// reconfigured peer dropped the session the first side still uses (which
// WireGuard would otherwise notice only after 15 s without an answer).
func Run(ctx context.Context, pairs []Pair, pr Probing) []Result {
	out := make([]Result, len(pairs))
	sem := make(chan struct{}, max(pr.Parallel, 1))
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.From.Cluster > p.To.Cluster {
				select {
				case <-time.After(pr.Stagger):
				case <-ctx.Done():
				}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			took, err := Probe(ctx, p, pr)
			out[i] = Result{Pair: p, Err: err, Took: took}
		}()
	}
	wg.Wait()
	return out
}

// Select keeps the pods of the named nodes, by cluster.
func Select(pods []Pod, nodes map[string][]string) []Pod {
	var out []Pod
	for _, p := range pods {
		for _, n := range nodes[p.Cluster] {
			if n == p.Node {
				out = append(out, p)
			}
		}
	}
	return out
}

// Between pairs every pod with every pod of every other cluster.
func Between(pods []Pod) []Pair {
	var out []Pair
	for _, a := range pods {
		for _, b := range pods {
			if a.Cluster != b.Cluster {
				out = append(out, Pair{From: a, To: b})
			}
		}
	}
	return out
}

// A Matrix is the outcome of a set of probes, by source and target cluster.
type Matrix struct {
	Results []Result
}

// Failed are the pairs without an echo.
func (m Matrix) Failed() []Pair {
	var out []Pair
	for _, r := range m.Results {
		if r.Err != nil {
			out = append(out, r.Pair)
		}
	}
	return out
}

// Passed counts the pairs with an echo.
func (m Matrix) Passed() int { return len(m.Results) - len(m.Failed()) }

// Write prints the matrix: one row per source cluster, one column per
// target cluster, pairs passed of pairs tried; then the totals and every
// pair that failed.
func (m Matrix) Write(w io.Writer) {
	type cell struct{ tried, passed int }
	cells := map[[2]string]*cell{}
	granularity := map[string]string{}
	var clusters []string
	for _, r := range m.Results {
		for _, p := range []Pod{r.From, r.To} {
			if _, ok := granularity[p.Cluster]; !ok {
				granularity[p.Cluster] = p.Granularity
				clusters = append(clusters, p.Cluster)
			}
		}
		k := [2]string{r.From.Cluster, r.To.Cluster}
		if cells[k] == nil {
			cells[k] = &cell{}
		}
		cells[k].tried++
		if r.Err == nil {
			cells[k].passed++
		}
	}
	sort.Strings(clusters)
	label := func(c string) string {
		if g := granularity[c]; g != "" {
			return c + " (" + g + ")"
		}
		return c
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := make([]string, 0, len(clusters)+1)
	head = append(head, "from \\ to")
	for _, c := range clusters {
		head = append(head, label(c))
	}
	fmt.Fprintln(tw, "  "+strings.Join(head, "\t")+"\t")
	for _, from := range clusters {
		row := []string{label(from)}
		for _, to := range clusters {
			c := cells[[2]string{from, to}]
			switch {
			case from == to:
				row = append(row, "-")
			case c == nil:
				row = append(row, "")
			default:
				row = append(row, fmt.Sprintf("%d/%d", c.passed, c.tried))
			}
		}
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "  pairs tried %d, passed %d\n", len(m.Results), m.Passed())
	for _, r := range m.Results {
		if r.Err != nil {
			fmt.Fprintf(w, "  no echo: %s: %v\n", r.Pair, r.Err)
		}
	}
}

// String is Write's text.
func (m Matrix) String() string {
	var b strings.Builder
	m.Write(&b)
	return b.String()
}
