// Package rendered reads what `crossplane composition render` prints for a
// ClusterMesh and finds the Kilo Peers every member gets: those of
// provider-kubernetes Objects, and those of PeerSets, with the SegmentSets
// they reference resolved exactly as provider-kilomesh resolves them.
package rendered

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sort"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// maxInput bounds the rendered stream read: the function's responses are at
// most 3 MiB, and their YAML a few times that.
const maxInput = 64 << 20

const (
	errRead      = "cannot read the rendered documents"
	errTooLarge  = "the rendered documents are larger than 64 MiB"
	errParse     = "cannot parse a rendered document"
	errNoManifst = "an Object has no spec.forProvider.manifest"
	errFmtSet    = "cannot read %s %s"
	errFmtPeers  = "cannot resolve the Peers of PeerSet %s"
)

// A Doc is one rendered document.
type Doc = map[string]any

// Read reads a YAML stream of documents; empty documents are left out.
func Read(r io.Reader) ([]Doc, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, errors.Wrap(err, errRead)
	}
	if len(raw) > maxInput {
		return nil, errors.New(errTooLarge)
	}
	var out []Doc
	// apimachinery's reader splits at separator lines only, not at a
	// "---" inside a block scalar or a string.
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		part, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.Wrap(err, errParse)
		}
		d := Doc{}
		if err := yaml.Unmarshal(part, &d); err != nil {
			return nil, errors.Wrap(err, errParse)
		}
		if len(d) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// Get walks nested objects of a document; nil when a step is missing.
func Get(d any, path ...string) any {
	for _, p := range path {
		m, ok := d.(map[string]any)
		if !ok {
			return nil
		}
		d = m[p]
	}
	return d
}

// Str is the string at a path of a document, "" when there is none.
func Str(d any, path ...string) string {
	s, _ := Get(d, path...).(string)
	return s
}

// A Placement is one Peer delivered into one member.
type Placement struct {
	// Target is the member: the name of the provider config it is
	// reached through.
	Target string
	// Peer is the Kilo Peer, as a document.
	Peer Doc
}

// Placements finds every Peer the documents deliver, by member and name:
// the manifest of every Object, and every Peer a PeerSet keeps once its
// SegmentSets are resolved.
func Placements(docs []Doc) ([]Placement, error) {
	segs := map[string]*kubev1alpha1.SegmentSet{}
	for _, d := range docs {
		if Str(d, "kind") != kubev1alpha1.SegmentSetKind {
			continue
		}
		s := &kubev1alpha1.SegmentSet{}
		if err := convert(d, s); err != nil {
			return nil, errors.Wrapf(err, errFmtSet, kubev1alpha1.SegmentSetKind, Str(d, "metadata", "name"))
		}
		segs[s.Name] = s
	}
	var out []Placement
	for _, d := range docs {
		target := Str(d, "spec", "providerConfigRef", "name")
		switch Str(d, "kind") {
		case "Object":
			m, ok := Get(d, "spec", "forProvider", "manifest").(map[string]any)
			if !ok {
				return nil, errors.New(errNoManifst)
			}
			out = append(out, Placement{Target: target, Peer: m})
		case kubev1alpha1.PeerSetKind:
			ps := &kubev1alpha1.PeerSet{}
			if err := convert(d, ps); err != nil {
				return nil, errors.Wrapf(err, errFmtSet, kubev1alpha1.PeerSetKind, target)
			}
			peers, err := kubev1alpha1.ResolvePeers(&ps.Spec.ForProvider, func(name string) (*kubev1alpha1.SegmentSet, error) {
				return segs[name], nil
			})
			if err != nil {
				return nil, errors.Wrapf(err, errFmtPeers, target)
			}
			for _, p := range peers {
				out = append(out, Placement{Target: target, Peer: peerDoc(p, ps.Spec.ForProvider.Selector)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Target != out[j].Target {
			return out[i].Target < out[j].Target
		}
		return Str(out[i].Peer, "metadata", "name") < Str(out[j].Peer, "metadata", "name")
	})
	return out, nil
}

// peerDoc is a desired Peer as the Kilo Peer document it stands for: its
// own labels and the set's selector, which wins, as provider-kilomesh
// writes it.
func peerDoc(p kubev1alpha1.DesiredPeer, selector map[string]string) Doc {
	spec := Doc{}
	_ = convert(p.Spec, &spec) // a plain struct always converts
	meta := Doc{"name": p.Name}
	if len(p.Labels)+len(selector) > 0 {
		labels := Doc{}
		for k, v := range p.Labels {
			labels[k] = v
		}
		for k, v := range selector {
			labels[k] = v
		}
		meta["labels"] = labels
	}
	return Doc{"apiVersion": "kilo.squat.ai/v1alpha1", "kind": "Peer", "metadata": meta, "spec": spec}
}

// convert converts through JSON.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// Write writes documents as a YAML stream.
func Write(w io.Writer, docs []Doc) error {
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := w.Write(append([]byte("---\n"), b...)); err != nil {
			return err
		}
	}
	return nil
}
