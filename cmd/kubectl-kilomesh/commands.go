package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
	"github.com/kilomesh/kilomesh/internal/plugin/view"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

const (
	errRead     = "cannot read the meshes"
	errFmtNoOne = "namespace %s holds %d ClusterMeshes (%s): name the one to draw"
	errNoMesh   = "namespace %s holds no ClusterMesh"
	errDot      = "cannot render the graph with Graphviz's dot"
	errEncode   = "cannot encode the output"
)

const hintNoDot = "kubectl kilomesh: Graphviz's dot is not installed, so this is the graph in DOT, not SVG: " +
	"install Graphviz (apt-get install graphviz, brew install graphviz, choco install graphviz), or pipe this into dot -Tsvg\n"

// statusCmd shows, and waits on, the status of meshes.
type statusCmd struct {
	Mesh     string        `arg:"" optional:"" help:"The ClusterMesh; every mesh of the namespace when left out."`
	Wait     bool          `help:"Wait until every mesh converged: Ready, Synced, Converged, PeersDelivered and ClustersReachable True, NetworksOverlap False, every member observed and reachable, and every member holding every Peer meant for it. Exits 0 then, 2 at the timeout."`
	Timeout  time.Duration `help:"How long --wait waits." default:"5m"`
	Interval time.Duration `help:"How often --wait reads the meshes." default:"2s"`
	Output   string        `help:"Output format: table, json or yaml." short:"o" enum:"table,json,yaml" default:"table"`
}

// Run shows the status once, or until every mesh converged.
func (c *statusCmd) Run(ctx context.Context, g *cli, e *env) error {
	r, ns, err := g.reader(e)
	if err != nil {
		return err
	}
	var names []string
	if c.Mesh != "" {
		names = []string{c.Mesh}
	}
	deadline := time.Now().Add(c.Timeout)
	var last []string
	for {
		sts, now, err := c.read(ctx, r, ns, names)
		switch {
		case err != nil && (!c.Wait || isPermanent(err) || time.Now().After(deadline)):
			return err
		case err != nil:
			// The management cluster may be restarting: retry.
			fmt.Fprintf(e.stderr, "kubectl kilomesh: %v; retrying\n", err)
		case !c.Wait || converged(sts):
			return c.print(e.stdout, now, sts)
		case time.Now().After(deadline):
			if err := c.print(e.stdout, now, sts); err != nil {
				return err
			}
			return &codeError{code: exitNotConverged, msg: fmt.Sprintf("timed out after %s: %s", c.Timeout, strings.Join(reasons(sts), "; "))}
		default:
			if w := reasons(sts); strings.Join(w, "\n") != strings.Join(last, "\n") {
				fmt.Fprintf(e.stderr, "waiting: %s\n", strings.Join(w, "; "))
				last = w
			}
		}
		wait := e.sleep
		if wait == nil {
			wait = sleep
		}
		if err := wait(ctx, c.Interval); err != nil {
			return err
		}
	}
}

func (c *statusCmd) read(ctx context.Context, r *snapshot.Reader, ns string, names []string) ([]view.Status, time.Time, error) {
	s, err := r.Read(ctx, ns, names...)
	if err != nil {
		return nil, time.Time{}, errors.Wrap(err, errRead)
	}
	sts := make([]view.Status, 0, len(s.Meshes))
	for _, m := range s.Meshes {
		sts = append(sts, view.MeshStatus(s, m, view.Plan(s, m)))
	}
	if len(sts) == 0 && c.Wait {
		return nil, s.Now, errors.Wrapf(errNoMeshes, errNoMesh, ns)
	}
	return sts, s.Now, nil
}

// errNoMeshes says that there is no ClusterMesh to wait for.
var errNoMeshes = errors.New("nothing to wait for")

// isPermanent tells whether waiting cannot help: the mesh does not exist,
// or the user may not read the meshes.
func isPermanent(err error) bool {
	var nf *snapshot.NotFoundError
	return errors.As(err, &nf) || errors.Is(err, errNoMeshes) || kerrors.IsForbidden(err) || kerrors.IsUnauthorized(err)
}

func converged(sts []view.Status) bool {
	for _, st := range sts {
		if !st.Converged {
			return false
		}
	}
	return true
}

func reasons(sts []view.Status) []string {
	var out []string
	for _, st := range sts {
		for _, w := range st.Waiting {
			out = append(out, st.Name+": "+w)
		}
	}
	return out
}

func (c *statusCmd) print(w io.Writer, now time.Time, sts []view.Status) error {
	if c.Output == "table" {
		return view.WriteStatus(w, now, sts)
	}
	return encode(w, c.Output, struct {
		Meshes []view.Status `json:"meshes"`
	}{Meshes: sts})
}

// graphCmd draws a mesh.
type graphCmd struct {
	Mesh   string `arg:"" optional:"" help:"The ClusterMesh; may be left out when the namespace holds one."`
	Output string `help:"Output format: dot, svg (through Graphviz's dot) or json." short:"o" enum:"dot,svg,json" default:"dot"`
	Edges  string `help:"How Peers are drawn: peer (an edge per Peer with its routes), member (an edge per pair of members, segments as tables) or auto (peer for up to 40 Peers and 60 nodes)." enum:"auto,peer,member" default:"auto"`
}

// Run draws the mesh.
func (c *graphCmd) Run(ctx context.Context, g *cli, e *env) error {
	r, ns, err := g.reader(e)
	if err != nil {
		return err
	}
	var names []string
	if c.Mesh != "" {
		names = []string{c.Mesh}
	}
	s, err := r.Read(ctx, ns, names...)
	if err != nil {
		return errors.Wrap(err, errRead)
	}
	switch len(s.Meshes) {
	case 0:
		return errors.Errorf(errNoMesh, ns)
	case 1:
	default:
		all := make([]string, len(s.Meshes))
		for i, m := range s.Meshes {
			all[i] = m.Name
		}
		return errors.Errorf(errFmtNoOne, ns, len(all), strings.Join(all, ", "))
	}
	m := s.Meshes[0]
	graph := view.MeshGraph(m, view.Plan(s, m))
	if c.Output == "json" {
		return encode(e.stdout, "json", graph)
	}
	var dot bytes.Buffer
	if err := view.WriteDOT(&dot, graph, view.Edges(c.Edges)); err != nil {
		return err
	}
	if c.Output == "dot" {
		_, err := e.stdout.Write(dot.Bytes())
		return err
	}
	return svg(ctx, e, dot.Bytes())
}

// svg renders DOT with Graphviz's dot; without it, it writes the DOT and a
// hint.
func svg(ctx context.Context, e *env, dot []byte) error {
	look := e.lookPath
	if look == nil {
		look = lookPath
	}
	bin, err := look("dot")
	if err != nil {
		if _, err := io.WriteString(e.stderr, hintNoDot); err != nil {
			return err
		}
		_, err = e.stdout.Write(dot)
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-Tsvg") //nolint:gosec // G204: Graphviz's dot as found on PATH, with a fixed argument.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(dot), e.stdout, &stderr
	if err := cmd.Run(); err != nil {
		return errors.Wrapf(err, "%s: %s", errDot, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func lookPath(name string) (string, error) { return exec.LookPath(name) }

// diagnoseCmd checks meshes.
type diagnoseCmd struct {
	Mesh   string `arg:"" optional:"" help:"The ClusterMesh; every mesh of the namespace when left out."`
	Output string `help:"Output format: text, json or yaml." short:"o" enum:"text,json,yaml" default:"text"`
}

// Run diagnoses the meshes; it exits 2 when it finds an error.
func (c *diagnoseCmd) Run(ctx context.Context, g *cli, e *env) error {
	r, ns, err := g.reader(e)
	if err != nil {
		return err
	}
	var names []string
	if c.Mesh != "" {
		names = []string{c.Mesh}
	}
	s, err := r.Read(ctx, ns, names...)
	if err != nil {
		return errors.Wrap(err, errRead)
	}
	if len(s.Meshes) == 0 {
		return errors.Errorf(errNoMesh, ns)
	}
	ds := make([]view.Diagnosis, 0, len(s.Meshes))
	failed := false
	for _, m := range s.Meshes {
		d := view.Diagnose(s, m, view.Plan(s, m))
		failed = failed || d.Errors() > 0
		ds = append(ds, d)
	}
	if c.Output == "text" {
		err = view.WriteDiagnosis(e.stdout, ds)
	} else {
		err = encode(e.stdout, c.Output, struct {
			Meshes []view.Diagnosis `json:"meshes"`
		}{Meshes: ds})
	}
	if err != nil {
		return err
	}
	if failed {
		return &codeError{code: exitNotConverged}
	}
	return nil
}

// encode writes a value as JSON or YAML. encoding/json leaves DEL, C1 and
// the bidirectional controls raw, which a YAML parser refuses and a
// terminal acts on: they are escaped as JSON escapes them, which YAML reads
// too.
func encode(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrap(err, errEncode)
	}
	b = []byte(safetext.SanitizeLines(string(b)))
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return errors.Wrap(err, errEncode)
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}
