package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestValidationOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		schema extv1.JSONSchemaProps
		want   string
	}{
		"None": {
			reason: "A field without rules has no validation.",
			want:   "",
		},
		"EnumAndBounds": {
			reason: "Enums are listed unquoted, bounds with their numbers.",
			schema: extv1.JSONSchemaProps{
				Enum:    []extv1.JSON{{Raw: []byte(`"Auto"`)}, {Raw: []byte(`"Node"`)}},
				Minimum: ptr.To(1.0), Maximum: ptr.To(65535.0), ExclusiveMaximum: true,
			},
			want: "one of `Auto`, `Node`; minimum 1; maximum 65535 (exclusive)",
		},
		"LengthsItemsPattern": {
			reason: "Lengths, item counts and patterns are all given.",
			schema: extv1.JSONSchemaProps{
				MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](63), MinItems: ptr.To[int64](2),
				Pattern: `^[a-z]+$`,
			},
			want: "min length 1; max length 63; min items 2; pattern `^[a-z]+$`",
		},
		"ListMapAndCEL": {
			reason: "A map list names its keys; CEL rules come with their messages.",
			schema: extv1.JSONSchemaProps{
				XListType: ptr.To("map"), XListMapKeys: []string{"name"},
				XValidations: extv1.ValidationRules{{Rule: "self == oldSelf", Message: "immutable"}},
			},
			want: "items unique by `name`; CEL `self == oldSelf`: \"immutable\"",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := validationOf(&tc.schema); got != tc.want {
				t.Errorf("%s\nvalidationOf(...) = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestRun generates the reference from the repository's own XRD and CRDs and
// checks rows that say what the API server enforces.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "reference.md")
	if err := run("../../../package/configuration/xrd.yaml", "../../../package/provider/crds", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"## ClusterMesh\n", "## NodeInventory\n", "## PeerSet\n",
		"| `spec.clusters[].wireguardPort` | integer (int32) | `51820` | minimum 1; maximum 65535 |",
		"| `spec.clusters[].name` | string, required |",
		"| `spec.delivery` | string | `\"PeerSet\"` | one of `Objects`, `PeerSet` |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
	if strings.Contains(got, "| `spec.crossplane") {
		t.Error("the reference documents spec.crossplane, which Crossplane adds and documents")
	}
}
