// Command docgen writes the configuration reference (docs/reference.md) from
// the generated ClusterMesh XRD and the CRDs of provider-kilomesh, so that the
// reference always says what the API server enforces: every field with its
// type, default, validation and description.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const header = `<!-- Generated from package/configuration/xrd.yaml and package/provider/crds by ` + "`make generate`" + `. DO NOT EDIT. -->

# Configuration reference

Every field of kilomesh's APIs, as their schemas define them: the API server
applies the defaults and rejects what breaks a validation rule, before
kilomesh sees the object. Rules a schema cannot express, such as networks
that overlap, are checked by function-kilomesh (see
[how it works](how-it-works.md)).

A field is given as its path in the object; ` + "`[]`" + ` stands for every item of a
list and ` + "`{}`" + ` for every value of a map.
`

// A kind is one API kind to document.
type kind struct {
	group, version, kind, scope string
	schema                      *extv1.JSONSchemaProps
}

// intros introduce each kind, keyed by group/Kind.
var intros = map[string]string{
	"kilomesh.io/ClusterMesh": "The mesh you declare, in the namespace of its members' ProviderConfigs. " +
		"Crossplane adds `spec.crossplane` (the Composition and the composed resources) and " +
		"`status.conditions` to every composite resource; they are left out here.",
	"kube.kilomesh.io/NodeInventory": "A managed resource of provider-kilomesh that function-kilomesh composes, " +
		"one per member: it watches the member's Nodes and publishes what the mesh needs. You do not write it.",
	"kube.kilomesh.io/PeerSet": "A managed resource of provider-kilomesh that function-kilomesh composes, " +
		"one per member, when the mesh has `delivery: PeerSet`: it applies the Peers of that member and prunes " +
		"the ones it owns that are no longer wanted. You do not write it.",
}

func main() {
	xrd := flag.String("xrd", "", "the ClusterMesh CompositeResourceDefinition")
	crds := flag.String("crds", "", "a folder of CustomResourceDefinitions")
	out := flag.String("out", "", "where to write the reference")
	flag.Parse()
	if err := run(*xrd, *crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(xrdPath, crdDir, out string) error {
	if xrdPath == "" || crdDir == "" || out == "" {
		return errors.New("-xrd, -crds and -out are required")
	}
	kinds, err := readXRD(xrdPath)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		k, err := readCRD(f)
		if err != nil {
			return err
		}
		kinds = append(kinds, k...)
	}
	b := &strings.Builder{}
	b.WriteString(header)
	writeContents(b, kinds)
	for _, k := range kinds {
		writeKind(b, k)
	}
	return os.WriteFile(out, []byte(b.String()), 0o644) //nolint:gosec // documentation, world-readable by design
}

// readXRD reads the kinds a CompositeResourceDefinition defines.
func readXRD(path string) ([]kind, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // a path of the build
	if err != nil {
		return nil, err
	}
	xrd := struct {
		Spec struct {
			Group string `json:"group"`
			Scope string `json:"scope"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema *extv1.JSONSchemaProps `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}{}
	// Only the fields above are read; the rest of the XRD is Crossplane's.
	if err := yaml.Unmarshal(raw, &xrd); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", path, err)
	}
	kinds := make([]kind, 0, len(xrd.Spec.Versions))
	for _, v := range xrd.Spec.Versions {
		if v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: version %s has no schema", path, v.Name)
		}
		kinds = append(kinds, kind{group: xrd.Spec.Group, version: v.Name, kind: xrd.Spec.Names.Kind,
			scope: xrd.Spec.Scope, schema: v.Schema.OpenAPIV3Schema})
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("%s defines no version", path)
	}
	return kinds, nil
}

// readCRD reads the kinds a CustomResourceDefinition defines.
func readCRD(path string) ([]kind, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // a path of the build
	if err != nil {
		return nil, err
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", path, err)
	}
	kinds := make([]kind, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: version %s has no schema", path, v.Name)
		}
		kinds = append(kinds, kind{group: crd.Spec.Group, version: v.Name, kind: crd.Spec.Names.Kind,
			scope: string(crd.Spec.Scope), schema: v.Schema.OpenAPIV3Schema})
	}
	return kinds, nil
}

func writeContents(b *strings.Builder, kinds []kind) {
	b.WriteString("\n")
	for _, k := range kinds {
		fmt.Fprintf(b, "- [%s](#%s) (`%s/%s`)\n", k.kind, anchor(k), k.group, k.version)
	}
}

// anchor is the anchor GitHub gives the heading of a kind.
func anchor(k kind) string {
	return strings.ToLower(k.kind)
}

func writeKind(b *strings.Builder, k kind) {
	fmt.Fprintf(b, "\n## %s\n\n", k.kind)
	fmt.Fprintf(b, "`apiVersion: %s/%s`, `kind: %s`, %s.", k.group, k.version, k.kind, strings.ToLower(k.scope))
	if intro := intros[k.group+"/"+k.kind]; intro != "" {
		b.WriteString(" " + intro)
	}
	b.WriteString("\n")
	if d := oneLine(k.schema.Description); d != "" {
		b.WriteString("\n" + d + "\n")
	}
	for _, part := range []string{"spec", "status"} {
		p, ok := k.schema.Properties[part]
		if !ok {
			continue
		}
		fmt.Fprintf(b, "\n### %s `%s`\n\n", k.kind, part)
		b.WriteString("| Field | Type | Default | Validation | Description |\n|---|---|---|---|---|\n")
		for _, r := range rows(part, &p, slices.Contains(k.schema.Required, part)) {
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", r.path, cell(r.typ), cell(r.def), cell(r.validation), cell(r.description))
		}
	}
}

// A row documents one field.
type row struct {
	path, typ, def, validation, description string
}

// rows documents a field and every field below it, depth first, fields of
// an object by name.
func rows(path string, s *extv1.JSONSchemaProps, required bool) []row {
	out := []row{{
		path:        path,
		typ:         typeOf(s, required),
		def:         defaultOf(s),
		validation:  validationOf(s),
		description: oneLine(s.Description),
	}}
	switch {
	case s.Items != nil && s.Items.Schema != nil:
		item := s.Items.Schema
		// An item is a row of its own when it says more than its type.
		if validationOf(item) != "" || (len(item.Properties) == 0 && item.Description != "" && item.Description != s.Description) {
			out = append(out, row{path: path + "[]", typ: typeOf(item, false), def: defaultOf(item),
				validation: validationOf(item), description: oneLine(item.Description)})
		}
		out = append(out, children(path+"[]", item)...)
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		out = append(out, children(path+"{}", s.AdditionalProperties.Schema)...)
	default:
		out = append(out, children(path, s)...)
	}
	return out
}

func children(path string, s *extv1.JSONSchemaProps) []row {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]row, 0, len(names))
	for _, n := range names {
		p := s.Properties[n]
		out = append(out, rows(path+"."+n, &p, slices.Contains(s.Required, n))...)
	}
	return out
}

// typeOf names the type of a field: lists and maps by what they hold.
func typeOf(s *extv1.JSONSchemaProps, required bool) string {
	t := s.Type
	switch {
	case t == "array" && s.Items != nil && s.Items.Schema != nil:
		t = "list of " + typeOf(s.Items.Schema, false)
	case t == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		t = "map of " + typeOf(s.AdditionalProperties.Schema, false)
	case t == "string" && s.Format != "":
		t = "string (" + s.Format + ")"
	case t == "integer" && s.Format != "":
		t = "integer (" + s.Format + ")"
	case t == "":
		t = "any"
	}
	if required {
		t += ", required"
	}
	return t
}

func defaultOf(s *extv1.JSONSchemaProps) string {
	if s.Default == nil {
		return ""
	}
	return "`" + string(s.Default.Raw) + "`"
}

// validationOf lists every rule of a field's schema, in words.
func validationOf(s *extv1.JSONSchemaProps) string {
	var v []string
	if len(s.Enum) > 0 {
		vals := make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			vals = append(vals, "`"+enumValue(e.Raw)+"`")
		}
		v = append(v, "one of "+strings.Join(vals, ", "))
	}
	bound := func(name string, f *float64, exclusive bool) {
		if f == nil {
			return
		}
		n := strconv.FormatFloat(*f, 'f', -1, 64)
		if exclusive {
			v = append(v, name+" "+n+" (exclusive)")
			return
		}
		v = append(v, name+" "+n)
	}
	bound("minimum", s.Minimum, s.ExclusiveMinimum)
	bound("maximum", s.Maximum, s.ExclusiveMaximum)
	count := func(name string, n *int64) {
		if n != nil {
			v = append(v, name+" "+strconv.FormatInt(*n, 10))
		}
	}
	count("min length", s.MinLength)
	count("max length", s.MaxLength)
	count("min items", s.MinItems)
	count("max items", s.MaxItems)
	count("min properties", s.MinProperties)
	count("max properties", s.MaxProperties)
	if s.Pattern != "" {
		v = append(v, "pattern `"+s.Pattern+"`")
	}
	if s.XListType != nil && *s.XListType == "map" && len(s.XListMapKeys) > 0 {
		v = append(v, "items unique by "+strings.Join(quoteAll(s.XListMapKeys), ", "))
	}
	if s.XListType != nil && *s.XListType == "set" {
		v = append(v, "items unique")
	}
	for _, r := range s.XValidations {
		rule := "CEL `" + r.Rule + "`"
		if r.Message != "" {
			rule += ": " + strconv.Quote(r.Message)
		}
		v = append(v, rule)
	}
	return strings.Join(v, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, "`"+s+"`")
	}
	return out
}

// enumValue shows a JSON enum value without the quotes of a string.
func enumValue(raw []byte) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// oneLine joins the lines of a description into one paragraph.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
