/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

func TestSelector(t *testing.T) {
	const (
		managedBy = meshv1alpha1.LabelManagedBy
		namespace = meshv1alpha1.LabelMeshNamespace
		meshLabel = meshv1alpha1.LabelMesh
	)
	type args struct {
		ns       string
		selector map[string]string
	}
	type want struct {
		selector map[string]string
		err      error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Composed": {
			reason: "The selector the function composes is the effective selector.",
			args:   args{ns: "team-a", selector: map[string]string{managedBy: "kilomesh", namespace: "team-a", meshLabel: "mesh"}},
			want:   want{selector: map[string]string{managedBy: "kilomesh", namespace: "team-a", meshLabel: "mesh"}},
		},
		"Completed": {
			reason: "A selector that names only a mesh (and more labels) gets the managed-by marker and the set's own namespace.",
			args:   args{ns: "team-a", selector: map[string]string{meshLabel: "mesh", "extra": "x"}},
			want:   want{selector: map[string]string{managedBy: "kilomesh", namespace: "team-a", meshLabel: "mesh", "extra": "x"}},
		},
		"ManagedByOnly": {
			reason: "A hand-made set that selects every kilomesh Peer is refused: it would own, and delete, the Peers of every mesh.",
			args:   args{ns: "tenant", selector: map[string]string{managedBy: "kilomesh"}},
			want:   want{err: errors.Errorf(errFmtSelectorMesh, meshLabel)},
		},
		"OtherNamespace": {
			reason: "A set that claims another namespace's mesh is refused.",
			args:   args{ns: "tenant", selector: map[string]string{managedBy: "kilomesh", namespace: "victim", meshLabel: "mesh"}},
			want:   want{err: errors.Errorf(errFmtSelectorNamespace, namespace, "victim", "tenant", namespace, "tenant")},
		},
		"OtherManager": {
			reason: "A set that claims Peers of another manager (a hand-made VPN peer) is refused.",
			args:   args{ns: "tenant", selector: map[string]string{managedBy: "someone-else", meshLabel: "mesh"}},
			want:   want{err: errors.Errorf(errFmtSelectorManagedBy, managedBy, "someone-else", managedBy, "kilomesh")},
		},
		"EmptyMesh": {
			reason: "An empty mesh label names no mesh.",
			args:   args{ns: "tenant", selector: map[string]string{meshLabel: ""}},
			want:   want{err: errors.Errorf(errFmtSelectorMesh, meshLabel)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Selector(tc.args.ns, tc.args.selector)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nSelector(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.selector, got); diff != "" {
				t.Errorf("\n%s\nSelector(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

func TestFieldManager(t *testing.T) {
	long := strings.Repeat("n", 253)
	cases := map[string]struct {
		reason   string
		ns, name string
		want     string
	}{
		"Short": {
			reason: "A set's field manager names its namespace and name.",
			ns:     "team-a", name: "mesh-peerset-b",
			want: "kilomesh/team-a/mesh-peerset-b",
		},
		"Long": {
			reason: "A name too long for the API is cut to 128 characters and ends in a hash of the whole.",
			ns:     "team-a", name: long,
			want: "kilomesh/team-a/" + long[:128-len("kilomesh/team-a/")-9] + "-" + hash8("team-a/"+long),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FieldManager(tc.ns, tc.name)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nFieldManager(...): -want, +got:\n%s", tc.reason, diff)
			}
			if len(got) > 128 {
				t.Errorf("\n%s\nFieldManager(...) is %d characters long", tc.reason, len(got))
			}
		})
	}
	if FieldManager("team-a", long) == FieldManager("team-a", long+"x") {
		t.Error("two long names that share their start have the same field manager")
	}
}
