// Command rendertool reads the output of `crossplane composition render` and
// either extracts the Kilo Peers it delivers, as plain Peer documents that
// `crossplane resource validate` can check against Kilo's Peer CRD, or prints
// them per member cluster for people to read.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kilomesh/kilomesh/internal/plugin/rendered"
)

func main() {
	cmds := map[string]func(io.Writer, []doc) error{"peers": writePeers, "show": show, "normalize": normalize}
	cmd, ok := cmds[os.Args[len(os.Args)-1]]
	if len(os.Args) != 2 || !ok {
		fmt.Fprintln(os.Stderr, "usage: rendertool peers|show|normalize < rendered.yaml")
		os.Exit(2)
	}
	docs, err := readDocs(os.Stdin)
	if err == nil {
		err = cmd(os.Stdout, docs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rendertool:", err)
		os.Exit(1)
	}
}

type doc = rendered.Doc

func readDocs(r io.Reader) ([]doc, error) { return rendered.Read(r) }

func get(d any, path ...string) any { return rendered.Get(d, path...) }

func str(d any, path ...string) string { return rendered.Str(d, path...) }

// placement is one Peer delivered into one member cluster.
type placement struct {
	target string
	peer   doc
}

// placements finds the Peers of provider-kubernetes Objects and of PeerSets,
// the SegmentSets these reference resolved. The target is the member's
// provider config name.
func placements(docs []doc) ([]placement, error) {
	ps, err := rendered.Placements(docs)
	if err != nil {
		return nil, err
	}
	out := make([]placement, len(ps))
	for i, p := range ps {
		out[i] = placement{target: p.Target, peer: p.Peer}
	}
	return out, nil
}

// normalize writes the documents in a stable order: the XR first, then the
// composed resources by kind and composition resource name, then the
// results. Crossplane emits some results in map order.
func normalize(w io.Writer, docs []doc) error {
	key := func(d doc) string {
		if str(d, "kind") == "Result" {
			return "2\x00" + str(d, "severity") + "\x00" + str(d, "reason") + "\x00" + str(d, "message")
		}
		return "1\x00" + str(d, "apiVersion") + "\x00" + str(d, "kind") + "\x00" +
			str(d, "metadata", "annotations", "crossplane.io/composition-resource-name") + "\x00" + str(d, "metadata", "name")
	}
	if len(docs) == 0 {
		return errors.New("nothing was rendered")
	}
	rest := append([]doc(nil), docs[1:]...)
	sort.SliceStable(rest, func(i, j int) bool { return key(rest[i]) < key(rest[j]) })
	return writeDocs(w, append([]doc{docs[0]}, rest...))
}

func writeDocs(w io.Writer, docs []doc) error { return rendered.Write(w, docs) }

func writePeers(w io.Writer, docs []doc) error {
	ps, err := placements(docs)
	if err != nil {
		return err
	}
	peers := make([]doc, len(ps))
	for i, p := range ps {
		peers[i] = p.peer
	}
	return writeDocs(w, peers)
}

func show(w io.Writer, docs []doc) error {
	ps, err := placements(docs)
	if err != nil {
		return err
	}
	byTarget := map[string][]doc{}
	var targets []string
	for _, p := range ps {
		if _, ok := byTarget[p.target]; !ok {
			targets = append(targets, p.target)
		}
		byTarget[p.target] = append(byTarget[p.target], p.peer)
	}
	sort.Strings(targets)
	bw := bufio.NewWriter(w)
	for _, t := range targets {
		fmt.Fprintf(bw, "\nPeers in %s:\n", t)
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tSOURCE\tENDPOINT\tKEEPALIVE\tALLOWED IPS")
		peers := byTarget[t]
		sort.Slice(peers, func(i, j int) bool { return str(peers[i], "metadata", "name") < str(peers[j], "metadata", "name") })
		for _, p := range peers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%v\t%s\n", str(p, "metadata", "name"),
				str(p, "metadata", "labels", "kilomesh.io/source-cluster"), endpoint(p), keepalive(p), allowed(p))
		}
		_ = tw.Flush()
	}
	for _, d := range docs {
		if str(d, "kind") == "ClusterMesh" {
			showStatus(bw, d)
		}
	}
	return bw.Flush()
}

func endpoint(p doc) string {
	e := get(p, "spec", "endpoint")
	if e == nil {
		return "(roaming)"
	}
	host := str(e, "dnsOrIP", "ip")
	if host == "" {
		host = str(e, "dnsOrIP", "dns")
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%v", host, get(e, "port"))
}

func keepalive(p doc) any {
	if k := get(p, "spec", "persistentKeepalive"); k != nil {
		return k
	}
	return 0
}

func allowed(p doc) string {
	items, _ := get(p, "spec", "allowedIPs").([]any)
	ss := make([]string, len(items))
	for i, it := range items {
		ss[i], _ = it.(string)
	}
	return strings.Join(ss, ",")
}

func showStatus(w io.Writer, d doc) {
	fmt.Fprintf(w, "\nClusterMesh %s/%s:\n", str(d, "metadata", "namespace"), str(d, "metadata", "name"))
	conds, _ := get(d, "status", "conditions").([]any)
	for _, c := range conds {
		line := fmt.Sprintf("  %-18s %-6s %s", str(c, "type"), str(c, "status"), str(c, "reason"))
		if m := str(c, "message"); m != "" {
			line += ": " + m
		}
		fmt.Fprintln(w, line)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tREACHABLE\tNODES\tSEGMENTS\tPEERS OUT\tSKIPPED")
	clusters, _ := get(d, "status", "clusters").([]any)
	for _, c := range clusters {
		fmt.Fprintf(tw, "  %s\t%v\t%v\t%v\t%v\t%v\n", str(c, "name"), get(c, "reachable"), get(c, "nodes"), get(c, "segments"), get(c, "peers"), get(c, "skippedNodes"))
	}
	_ = tw.Flush()
	for _, c := range clusters {
		skipped, _ := get(c, "skipped").([]any)
		for _, s := range skipped {
			fmt.Fprintf(w, "  skipped %s/%s: %s (%s)\n", str(c, "name"), str(s, "node"), str(s, "reason"), str(s, "message"))
		}
		conflicts, _ := get(c, "conflicts").([]any)
		for _, x := range conflicts {
			fmt.Fprintf(w, "  not written into %s: %s: %s (%s)\n", str(c, "name"), str(x, "peer"), str(x, "reason"), str(x, "message"))
		}
	}
}
