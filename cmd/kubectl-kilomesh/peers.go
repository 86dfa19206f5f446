package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/internal/plugin/rendered"
)

const (
	errFmtOpen     = "cannot open %s"
	errFmtNoMember = "the rendered documents deliver no Peer into member %q"
)

// peersCmd expands a rendered mesh into the Peers of each member. It reads
// no cluster: only the documents it is given.
type peersCmd struct {
	Filename string `help:"The output of crossplane composition render; - reads standard input." short:"f" default:"-" type:"path"`
	Member   string `help:"Print only the Peers of this member (the name of its provider config), as documents kubectl apply takes."`
}

// readRendered reads the output of crossplane composition render from a
// file, or from standard input when filename is "-".
func readRendered(e *env, filename string) ([]rendered.Doc, error) {
	in := e.stdin
	if in == nil {
		in = os.Stdin
	}
	if filename != "-" {
		f, err := os.Open(filepath.Clean(filename))
		if err != nil {
			return nil, errors.Wrapf(err, errFmtOpen, filename)
		}
		defer f.Close()
		in = f
	}
	return rendered.Read(in)
}

// Run prints, member by member, every Peer the rendered documents deliver.
func (c *peersCmd) Run(e *env) error {
	docs, err := readRendered(e, c.Filename)
	if err != nil {
		return err
	}
	ps, err := rendered.Placements(docs)
	if err != nil {
		return err
	}
	last, found := "", false
	for _, p := range ps {
		if c.Member != "" && p.Target != c.Member {
			continue
		}
		if p.Target != last && c.Member == "" {
			if _, err := fmt.Fprintf(e.stdout, "# Peers of member %s\n", p.Target); err != nil {
				return err
			}
		}
		last, found = p.Target, true
		if err := rendered.Write(e.stdout, []rendered.Doc{p.Peer}); err != nil {
			return errors.Wrap(err, errEncode)
		}
	}
	if c.Member != "" && !found {
		return errors.Errorf(errFmtNoMember, c.Member)
	}
	return nil
}
