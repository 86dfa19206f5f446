package view

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Edges says how the Peers of a mesh are drawn.
type Edges string

// Ways to draw Peers.
const (
	// EdgesAuto draws every Peer in a small mesh, and members in a large
	// one.
	EdgesAuto Edges = "auto"
	// EdgesPeer draws every node, and every Peer as an edge from the node
	// that leads its segment to the member that holds it, labelled with
	// its routes.
	EdgesPeer Edges = "peer"
	// EdgesMember draws every member's segments as one table, and one
	// edge from each member to each other, labelled with how many Peers
	// it holds and the anchor's networks.
	EdgesMember Edges = "member"
)

// A mesh with more Peers or nodes than these is drawn by member in auto.
const (
	autoMaxPeers = 40
	autoMaxNodes = 60
)

// maxLabel cuts any name or message quoted into the picture.
const maxLabel = 120

// maxTableMembers is how many members of a segment a table row names.
const maxTableMembers = 4

// Colours of the picture.
const (
	colourMember  = "#f4f7fb"
	colourInbox   = "#dce8f7"
	colourLeader  = "#fff6d6"
	colourSkipped = "#ececec"
	colourGrey    = "#8a8a8a"
	colourEdge    = "#3b6ea5"
	colourProblem = "#c0392b"
	// colourHandshake marks a Peer whose handshake the target recorded.
	colourHandshake = "#2e7d32"
)

// Resolve picks the way to draw a graph.
func (e Edges) Resolve(g Graph) Edges {
	if e != EdgesAuto && e != "" {
		return e
	}
	nodes := 0
	for _, m := range g.Members {
		nodes += m.Nodes
	}
	if len(g.Peers) > autoMaxPeers || nodes > autoMaxNodes {
		return EdgesMember
	}
	return EdgesPeer
}

// WriteDOT writes the picture of a mesh in Graphviz's DOT language.
func WriteDOT(w io.Writer, g Graph, edges Edges) error {
	d := &dot{w: &errWriter{w: w}, g: g}
	d.write(edges.Resolve(g))
	return d.w.err
}

type dot struct {
	w *errWriter
	g Graph
}

func (d *dot) write(edges Edges) {
	title := fmt.Sprintf("ClusterMesh %s/%s: %s, %s", d.g.Namespace, d.g.Name, plural(len(d.g.Members), "member"), plural(len(d.g.Peers), "Peer"))
	if d.g.Frozen != "" {
		title += "\nfrozen, the Peers shown are those delivered: " + cut(d.g.Frozen, 3*maxLabel)
	}
	d.w.printf("digraph kilomesh {\n")
	// By Peer, members stand side by side and Peers run between them;
	// by member, the members stand in a row, each with its tables below
	// its name, and the edges do not move them.
	layout := "rankdir=LR, compound=true, nodesep=0.3, ranksep=1.6"
	if edges == EdgesMember {
		layout = "rankdir=TB, newrank=true, nodesep=0.6, ranksep=0.4"
	}
	d.w.printf("  graph [label=%s, labelloc=t, fontname=Helvetica, fontsize=14, %s];\n", quote(title), layout)
	d.w.printf("  node [fontname=Helvetica, fontsize=10, shape=box, style=\"rounded,filled\", fillcolor=white];\n")
	d.w.printf("  edge [fontname=Helvetica, fontsize=9, color=%q, fontcolor=%q];\n", colourEdge, colourEdge)
	pairs := d.pairs()
	for i := range d.g.Members {
		m := &d.g.Members[i]
		d.w.printf("  subgraph %s {\n", quote("cluster_"+m.Name))
		d.w.printf("    label=%s; style=\"rounded,filled\"; fillcolor=%q; color=\"#5b6b7b\";\n", quote(m.Name), colourMember)
		if edges == EdgesMember {
			d.w.printf("    %s [label=<%s>, fillcolor=%q, penwidth=1.5];\n", quote(inbox(m.Name)), d.inboxTable(m, pairs), colourInbox)
			d.tables(m)
		} else {
			d.w.printf("    %s [label=%s, fillcolor=%q, penwidth=1.5];\n", quote(inbox(m.Name)), quote(memberLabel(m)), colourInbox)
			d.nodes(m)
		}
		d.conflicts(m)
		d.w.printf("  }\n")
	}
	if edges == EdgesMember {
		d.w.printf("  { rank=same;")
		for _, m := range d.g.Members {
			d.w.printf(" %s;", quote(inbox(m.Name)))
		}
		d.w.printf(" }\n")
		d.memberEdges(pairs)
	} else {
		d.peerEdges()
	}
	d.w.printf("}\n")
}

// inbox is the node that stands for a member as the holder of Peers.
func inbox(member string) string { return member }

func nodeID(member, node string) string { return member + "/" + node }

func memberLabel(m *GraphMember) string {
	state := "reachable"
	switch {
	case !m.Observed && !m.Reachable:
		state = "not observed yet"
	case !m.Reachable:
		state = "unreachable"
	}
	lines := []string{m.Name, fmt.Sprintf("%s, %s, %s", state, plural(m.Nodes, "node"), plural(len(m.Segments), "segment"))}
	in := "holds " + plural(m.Received, "Peer")
	if m.Desired != nil {
		applied := "-"
		if m.Applied != nil {
			applied = strconv.Itoa(*m.Applied)
		}
		in += fmt.Sprintf(" (%s of %d applied)", applied, *m.Desired)
	}
	lines = append(lines, in)
	if len(m.AnchorCIDRs) > 0 {
		lines = append(lines, "anchor networks "+strings.Join(m.AnchorCIDRs, ", "))
	}
	if m.Message != "" {
		lines = append(lines, cut(m.Message, maxLabel))
	}
	return strings.Join(lines, "\n")
}

// nodes draws every node of a member: segments of several nodes in a box of
// their own, leaders in bold, skipped nodes greyed with their reason.
func (d *dot) nodes(m *GraphMember) {
	for _, s := range m.Segments {
		indent := "    "
		if len(s.Nodes) > 1 {
			d.w.printf("    subgraph %s {\n", quote("cluster_"+m.Name+"/"+s.Leader))
			d.w.printf("      label=%s; style=\"dashed,rounded\"; color=\"#7d8a99\";\n", quote(segmentName(s)))
			indent = "      "
		}
		for _, n := range s.Nodes {
			lines := []string{cut(n.Name, maxLabel)}
			attrs := ""
			if n.Leader {
				lines[0] += " (leader)"
				if s.Endpoint != "" {
					lines = append(lines, "endpoint "+s.Endpoint)
				}
				lines = append(lines, wrap("routes ", s.Routes)...)
				attrs = fmt.Sprintf(", fillcolor=%q, penwidth=2", colourLeader)
			} else if len(n.PodCIDRs) > 0 {
				lines = append(lines, "pods "+strings.Join(n.PodCIDRs, ", "))
			}
			d.w.printf("%s%s [label=%s%s];\n", indent, quote(nodeID(m.Name, n.Name)), quote(strings.Join(lines, "\n")), attrs)
		}
		if len(s.Nodes) > 1 {
			d.w.printf("    }\n")
		}
	}
	for _, s := range m.Skipped {
		d.w.printf("    %s [label=%s, tooltip=%s, style=\"rounded,filled,dashed\", fillcolor=%q, color=%q, fontcolor=%q];\n",
			quote(nodeID(m.Name, s.Node)), quote(cut(s.Node, maxLabel)+"\n"+s.Reason), quote(cut(s.Message, 3*maxLabel)), colourSkipped, colourGrey, colourGrey)
	}
	for _, n := range m.Unlisted {
		d.w.printf("    %s [label=%s, style=\"rounded,filled,dashed\", fillcolor=%q, color=%q, fontcolor=%q];\n",
			quote(nodeID(m.Name, n)), quote(cut(n, maxLabel)+"\nin no segment (skipped, not listed)"), colourSkipped, colourGrey, colourGrey)
	}
}

func segmentName(s GraphSegment) string {
	if s.Location != "" {
		return "location " + cut(s.Location, maxLabel)
	}
	return "segment of " + cut(s.Leader, maxLabel)
}

// conflicts draws a note of the Peers a member does not hold as planned,
// because a Peer the mesh does not own is in the way.
func (d *dot) conflicts(m *GraphMember) {
	if len(m.Conflicts) == 0 {
		return
	}
	lines := make([]string, 0, len(m.Conflicts)+1)
	lines = append(lines, "in the way in "+m.Name+":")
	for _, c := range m.Conflicts {
		lines = append(lines, c.Reason+": "+cut(c.Peer, maxLabel)+": "+cut(c.Message, maxLabel))
	}
	d.w.printf("    %s [label=%s, shape=note, style=filled, fillcolor=\"#fdecea\", color=%q, fontcolor=%q];\n",
		quote(m.Name+"/conflicts"), quoteLeft(lines), colourProblem, colourProblem)
}

// peerEdges draws every Peer, from the node that leads its segment to the
// member that holds it. The segment's leader lists the routes its Peer
// carries into every member; an edge is labelled with what its Peer
// carries besides (the anchor's networks), what it leaves out, the
// endpoint it uses when another member's side learned a different one, and
// why it cannot be applied.
func (d *dot) peerEdges() {
	common := map[string]map[string]bool{}
	segEndpoint := map[string]string{}
	for _, m := range d.g.Members {
		for _, s := range m.Segments {
			segEndpoint[s.Peer] = s.Endpoint
			common[s.Peer] = map[string]bool{}
			for _, r := range s.Routes {
				common[s.Peer][r] = true
			}
		}
	}
	for _, p := range d.g.Peers {
		from := inbox(p.Source)
		if p.Leader != "" {
			from = nodeID(p.Source, p.Leader)
		}
		label := ""
		if lines := peerLabel(p, common[p.Name], segEndpoint[p.Name]); len(lines) > 0 {
			label = "label=" + quoteLeft(lines) + ", "
		}
		d.w.printf("  %s -> %s [%slhead=%s, tooltip=%s%s];\n", quote(from), quote(inbox(p.Target)), label,
			quote("cluster_"+p.Target), quote(p.Name+" ("+p.State+handshakeNote(p)+")"), edgeStyle(p.State)+handshakeStyle(p))
	}
}

// peerLabel is what an edge says of its Peer besides the routes its
// segment's leader lists (common): the anchor's networks, routes of its
// own, routes it leaves out, another endpoint, and a problem.
func peerLabel(p GraphPeer, common map[string]bool, endpoint string) []string {
	anchor := map[string]bool{}
	for _, a := range p.Anchor {
		anchor[a] = true
	}
	var extra, plain []string
	has := map[string]bool{}
	for _, r := range p.AllowedIPs {
		has[r] = true
		switch {
		case p.Leader == "":
			plain = append(plain, r)
		case anchor[r]:
			extra = append(extra, r)
		case !common[r]:
			plain = append(plain, r)
		}
	}
	var missing []string
	for r := range common {
		if !has[r] {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	var lines []string
	if len(extra) > 0 {
		lines = append(lines, wrap("anchor ", extra)...)
	}
	if len(plain) > 0 {
		lines = append(lines, wrap("routes ", plain)...)
	}
	if len(missing) > 0 {
		lines = append(lines, wrap("without ", missing)...)
	}
	if p.Endpoint != "" && p.Endpoint != endpoint {
		lines = append(lines, "via "+p.Endpoint)
	}
	if p.Problem != "" {
		lines = append(lines, cut(p.Problem, maxLabel))
	}
	return lines
}

// wrap lists items after a heading, three to a line.
func wrap(heading string, items []string) []string {
	var out []string
	for i := 0; i < len(items); i += 3 {
		line := strings.Join(items[i:min(i+3, len(items))], ", ")
		if i == 0 {
			line = heading + line
		} else {
			line = strings.Repeat(" ", len(heading)) + line
		}
		out = append(out, line)
	}
	return out
}

// handshakeNote and handshakeStyle mark a Peer that the target's leaders
// recorded a handshake with: a thick green edge.
func handshakeNote(p GraphPeer) string {
	if p.Handshake {
		return ", handshake recorded"
	}
	return ""
}

func handshakeStyle(p GraphPeer) string {
	if p.Handshake && p.State != PeerProblem {
		return fmt.Sprintf(", penwidth=2.5, color=%q", colourHandshake)
	}
	return ""
}

func edgeStyle(state string) string {
	switch state {
	case PeerPlanned:
		return ", style=dashed"
	case PeerDelivered:
		return ", style=bold"
	case PeerProblem:
		return fmt.Sprintf(", style=dashed, color=%q, fontcolor=%q", colourProblem, colourProblem)
	}
	return ""
}

// tables draws a member's segments, and its skipped nodes, as tables.
func (d *dot) tables(m *GraphMember) {
	if len(m.Segments) > 0 {
		var b strings.Builder
		b.WriteString(`<table border="0" cellborder="1" cellspacing="0" cellpadding="3">`)
		b.WriteString(`<tr><td><b>leader</b></td><td><b>location</b></td><td><b>endpoint</b></td><td><b>members</b></td><td><b>routes</b></td></tr>`)
		for _, s := range m.Segments {
			others := make([]string, 0, len(s.Members))
			for _, n := range s.Members {
				if n != s.Leader {
					others = append(others, n)
				}
			}
			fmt.Fprintf(&b, `<tr><td align="left" bgcolor=%q>%s</td><td>%s</td><td>%s</td><td align="left">%s</td><td align="left">%s</td></tr>`,
				colourLeader, html(s.Leader), html(orDash(s.Location)), html(orDash(s.Endpoint)), html(some(others)), routeLines(s.Routes))
		}
		b.WriteString(`</table>`)
		d.w.printf("    %s [shape=plain, style=\"\", label=<%s>];\n", quote(m.Name+"/segments"), b.String())
		d.w.printf("    %s -> %s [style=invis];\n", quote(inbox(m.Name)), quote(m.Name+"/segments"))
	}
	if len(m.Skipped)+len(m.Unlisted) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, `<table border="0" cellborder="1" cellspacing="0" cellpadding="3" color=%q>`, colourGrey)
		fmt.Fprintf(&b, `<tr><td colspan="2"><font color=%q><b>skipped</b></font></td></tr>`, colourGrey)
		for _, s := range m.Skipped {
			fmt.Fprintf(&b, `<tr><td align="left"><font color=%q>%s</font></td><td align="left"><font color=%q>%s</font></td></tr>`, colourGrey, html(s.Node), colourGrey, html(s.Reason))
		}
		if len(m.Unlisted) > 0 {
			fmt.Fprintf(&b, `<tr><td align="left"><font color=%q>%s</font></td><td align="left"><font color=%q>not listed</font></td></tr>`, colourGrey, html(some(m.Unlisted)), colourGrey)
		}
		b.WriteString(`</table>`)
		d.w.printf("    %s [shape=plain, style=\"\", label=<%s>];\n", quote(m.Name+"/skipped"), b.String())
		above := inbox(m.Name)
		if len(m.Segments) > 0 {
			above = m.Name + "/segments"
		}
		d.w.printf("    %s -> %s [style=invis];\n", quote(above), quote(m.Name+"/skipped"))
	}
}

// A pair sums up the Peers of one member written into another.
type pair struct {
	source, target    string
	peers             int
	pending, problems int
	anchor            []string
	anchorLeader      string
}

// pairs sums up the Peers by source and target member, in that order.
func (d *dot) pairs() []*pair {
	byPair := map[[2]string]*pair{}
	var out []*pair
	for _, p := range d.g.Peers {
		k := [2]string{p.Source, p.Target}
		s, ok := byPair[k]
		if !ok {
			s = &pair{source: p.Source, target: p.Target}
			byPair[k] = s
			out = append(out, s)
		}
		s.peers++
		switch p.State {
		case PeerPlanned:
			s.pending++
		case PeerProblem:
			s.problems++
		}
		if len(p.Anchor) > 0 && s.anchor == nil {
			s.anchor, s.anchorLeader = p.Anchor, p.Leader
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].source != out[j].source {
			return out[i].source < out[j].source
		}
		return out[i].target < out[j].target
	})
	return out
}

// inboxTable is the label of a member drawn by member: its state, and a
// row per member whose Peers it holds.
func (d *dot) inboxTable(m *GraphMember, pairs []*pair) string {
	var b strings.Builder
	b.WriteString(`<table border="0" cellborder="0" cellspacing="0" cellpadding="2">`)
	for i, l := range strings.Split(memberLabel(m), "\n") {
		if i == 0 {
			l = "<b>" + html(l) + "</b>"
		} else {
			l = html(l)
		}
		fmt.Fprintf(&b, `<tr><td colspan="3">%s</td></tr>`, l)
	}
	for _, p := range pairs {
		if p.target != m.Name {
			continue
		}
		state := ""
		switch {
		case p.problems > 0:
			state = fmt.Sprintf(`<font color=%q>, %d cannot be applied</font>`, colourProblem, p.problems)
		case p.pending > 0:
			state = fmt.Sprintf(", %d not delivered yet", p.pending)
		}
		anchor := "-"
		if p.anchor != nil {
			anchor = html("anchor " + orDash(p.anchorLeader) + ": " + strings.Join(p.anchor, ", "))
		}
		fmt.Fprintf(&b, `<tr><td align="left">from %s</td><td align="left">%s%s</td><td align="left">%s</td></tr>`,
			html(p.source), html(plural(p.peers, "Peer")), state, anchor)
	}
	b.WriteString(`</table>`)
	return b.String()
}

// memberEdges draws one edge from every member to every other that holds
// Peers of it; the member's own table says how many.
func (d *dot) memberEdges(pairs []*pair) {
	for _, p := range pairs {
		attrs := ""
		switch {
		case p.problems > 0:
			attrs = fmt.Sprintf(", color=%q", colourProblem)
		case p.pending > 0:
			attrs = ", style=dashed"
		}
		d.w.printf("  %s -> %s [tooltip=%s, constraint=false%s];\n", quote(inbox(p.source)), quote(inbox(p.target)),
			quote(fmt.Sprintf("%s of %s in %s", plural(p.peers, "Peer"), p.source, p.target)), attrs)
	}
}

// routeLines lists routes two to a line.
func routeLines(rs []string) string {
	if len(rs) == 0 {
		return "-"
	}
	var lines []string
	for i := 0; i < len(rs); i += 2 {
		lines = append(lines, html(strings.Join(rs[i:min(i+2, len(rs))], ", ")))
	}
	return strings.Join(lines, "<br/>")
}

// some names a few items and counts the rest.
func some(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	if len(items) <= maxTableMembers {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxTableMembers], ", "), len(items)-maxTableMembers)
}

// quote makes a DOT string: backslashes and quotes escaped, line breaks
// as DOT's centred line breaks.
func quote(s string) string {
	return `"` + escape(s, `\n`) + `"`
}

// quoteLeft makes a DOT string of lines aligned to the left.
func quoteLeft(lines []string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, l := range lines {
		b.WriteString(escape(l, " "))
		b.WriteString(`\l`)
	}
	b.WriteByte('"')
	return b.String()
}

// escape escapes the text of a DOT string, its line breaks written as br.
// Control characters are escaped by safetext first: Graphviz would pass
// them into SVG, where XML forbids them, and to a terminal.
func escape(s, br string) string {
	var b strings.Builder
	for _, c := range safetext.SanitizeLines(s) {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(br)
		case '\t':
			b.WriteByte(' ')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// html escapes text for a Graphviz HTML-like label, control characters
// first (see escape).
func html(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(cut(safetext.Sanitize(strings.ReplaceAll(s, "\n", " ")), maxLabel))
}

// cut shortens a text quoted into the picture.
func cut(s string, n int) string {
	return safetext.Truncate(s, n)
}
