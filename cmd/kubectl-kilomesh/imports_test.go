package main

import (
	"testing"
)

// TestImports prints what each member of a rendered mesh imports. It reads
// files only: no API server.
func TestImports(t *testing.T) {
	cases := map[string]renderedCase{
		"EveryMember": {
			reason: "Each member's ServiceSync gives the members it imports from, their cluster IDs and where their endpoints may lie, and the shared namespaces.",
			args:   []string{"imports", "-f", "../../examples/render/shared-services/expected.yaml"},
			golden: "shared-services/imports.txt",
		},
		"OneMember": {
			reason: "--member prints only what one member imports.",
			args:   []string{"imports", "-f", "../../examples/render/shared-services/expected.yaml", "--member", "cluster-b"},
			golden: "shared-services/imports-cluster-b.txt",
		},
		"NoSharing": {
			reason: "A mesh that does not share Services is said to, not printed as empty.",
			args:   []string{"imports", "-f", "../../examples/render/two-clusters/expected.yaml"},
			code:   exitError,
			stderr: "does not share Services (spec.services)",
		},
		"NoSuchMember": {
			reason: "A member without a ServiceSync is an error.",
			args:   []string{"imports", "-f", "../../examples/render/shared-services/expected.yaml", "--member", "cluster-x"},
			code:   exitError,
			stderr: `no ServiceSync of member "cluster-x"`,
		},
		"BadServiceSync": {
			reason: "A ServiceSync that is not one is an error naming it.",
			args:   []string{"imports"},
			stdin:  "apiVersion: kube.kilomesh.io/v1alpha1\nkind: ServiceSync\nmetadata: {name: odd}\nspec:\n  forProvider:\n    namespaces: shop\n",
			code:   exitError,
			stderr: "cannot read ServiceSync odd",
		},
	}
	runRenderedCases(t, cases)
}
