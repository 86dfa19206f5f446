package main

import (
	"context"
	"strings"
	"testing"
)

// TestPeers expands rendered meshes into the Peers of each member. It reads
// files only: no API server.
func TestPeers(t *testing.T) {
	cases := map[string]renderedCase{
		"SharedForm": {
			reason: "A mesh in the shared form is expanded member by member, SegmentSets resolved, omissions and each member's own forms applied.",
			args:   []string{"peers", "-f", "../../examples/render/shared-segments/expected.yaml"},
			golden: "shared-segments/peers.yaml",
		},
		"OneMember": {
			reason: "--member prints only what one member gets: here node-a1's Peer is left out, its key being taken in cluster-b.",
			args:   []string{"peers", "-f", "../../examples/render/shared-segments/expected.yaml", "--member", "cluster-b"},
			golden: "shared-segments/peers-cluster-b.yaml",
		},
		"Inline": {
			reason: "A mesh whose PeerSets hold their Peers inline is expanded the same way.",
			args:   []string{"peers", "-f", "../../examples/render/delivery-peerset/expected.yaml"},
			golden: "delivery-peerset/peers.yaml",
		},
		"NoSuchMember": {
			reason: "A member that gets no Peer is an error, not an empty output.",
			args:   []string{"peers", "-f", "../../examples/render/shared-segments/expected.yaml", "--member", "cluster-x"},
			code:   exitError,
			stderr: `no Peer into member "cluster-x"`,
		},
		"MissingSegmentSet": {
			reason: "A PeerSet that references a SegmentSet the output does not hold is an error naming the field.",
			args:   []string{"peers"},
			stdin:  "apiVersion: kube.kilomesh.io/v1alpha1\nkind: PeerSet\nspec:\n  providerConfigRef: {name: cluster-a}\n  forProvider:\n    selector: {kilomesh.io/mesh: mesh}\n    segmentSetRefs: [{name: gone}]\n",
			code:   exitError,
			stderr: `spec.forProvider.segmentSetRefs[0].name: Not found: "gone"`,
		},
	}
	runRenderedCases(t, cases)
}

// A renderedCase runs the plugin on rendered documents: a file or stdin.
type renderedCase struct {
	reason string
	args   []string
	stdin  string
	golden string
	code   int
	stderr string
}

func runRenderedCases(t *testing.T, cases map[string]renderedCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errs strings.Builder
			e := &env{stdout: &out, stderr: &errs, stdin: strings.NewReader(tc.stdin)}
			code := run(context.Background(), tc.args, e)
			if code != tc.code {
				t.Fatalf("%s\nexit code %d, want %d; stderr: %s", tc.reason, code, tc.code, errs.String())
			}
			if tc.stderr != "" && !strings.Contains(errs.String(), tc.stderr) {
				t.Errorf("%s\nstderr %q does not say %q", tc.reason, errs.String(), tc.stderr)
			}
			if tc.golden != "" {
				golden(t, tc.golden, out.String())
			}
		})
	}
}
