package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

const (
	errNoServiceSync     = "the rendered documents hold no ServiceSync: the mesh does not share Services (spec.services)"
	errFmtNoImporter     = "the rendered documents hold no ServiceSync of member %q"
	errFmtBadServiceSync = "cannot read ServiceSync %s"
)

// importsCmd prints, from a rendered mesh, what each member imports: the
// members whose exports it takes, in which namespaces. It reads no
// cluster. Which Services those are is up to the members' ServiceExports,
// which a dry run does not see.
type importsCmd struct {
	Filename string `help:"The output of crossplane composition render; - reads standard input." short:"f" default:"-" type:"path"`
	Member   string `help:"Print only what this member (the name of its provider config) imports."`
}

// Run prints a table per member of the rendered ServiceSyncs.
func (c *importsCmd) Run(e *env) error {
	docs, err := readRendered(e, c.Filename)
	if err != nil {
		return err
	}
	var syncs []*kubev1alpha1.ServiceSync
	for _, d := range docs {
		if d["kind"] != kubev1alpha1.ServiceSyncKind || d["apiVersion"] != kubev1alpha1.GroupVersion.String() {
			continue
		}
		s := &kubev1alpha1.ServiceSync{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d, s); err != nil {
			meta, _ := d["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			return errors.Wrapf(err, errFmtBadServiceSync, name)
		}
		syncs = append(syncs, s)
	}
	if len(syncs) == 0 {
		return errors.New(errNoServiceSync)
	}
	sort.Slice(syncs, func(i, j int) bool { return member(syncs[i]) < member(syncs[j]) })
	found := false
	for _, s := range syncs {
		if c.Member != "" && member(s) != c.Member {
			continue
		}
		if found {
			if _, err := fmt.Fprintln(e.stdout); err != nil {
				return err
			}
		}
		found = true
		if err := writeImports(e.stdout, s); err != nil {
			return errors.Wrap(err, errEncode)
		}
	}
	if !found {
		return errors.Errorf(errFmtNoImporter, c.Member)
	}
	return nil
}

// member is the member a ServiceSync serves: its provider config's name.
func member(s *kubev1alpha1.ServiceSync) string {
	if r := s.GetProviderConfigReference(); r != nil {
		return r.Name
	}
	return ""
}

// writeImports writes what the member of s imports.
func writeImports(w io.Writer, s *kubev1alpha1.ServiceSync) error {
	p := s.Spec.ForProvider
	if _, err := fmt.Fprintf(w, "# member %s (cluster ID %s) imports the Services exported in namespaces %s by:\n",
		member(s), p.ClusterID, strings.Join(p.Namespaces, ", ")); err != nil {
		return err
	}
	if len(p.Sources) == 0 {
		_, err := fmt.Fprintln(w, "# no member")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if _, err := fmt.Fprintln(tw, "MEMBER\tCLUSTER ID\tENDPOINTS WITHIN"); err != nil {
		return err
	}
	for _, src := range p.Sources {
		if _, err := fmt.Fprintf(tw, "%s\t%s\t%s\n", src.Name, src.ClusterID, strings.Join(src.Networks, ", ")); err != nil {
			return err
		}
	}
	return tw.Flush()
}
