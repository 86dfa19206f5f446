package mesh

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

var hashSuffix = regexp.MustCompile(`-[0-9a-f]{8}$`)

func TestPeerName(t *testing.T) {
	type args struct {
		namespace, mesh, cluster, leader string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string // the readable part, before the hash suffix
	}{
		"Short": {
			reason: "A short name is <mesh>-<cluster>-<leader> and a hash.",
			args:   args{"team-a", "prod", "a", "a1"},
			want:   "prod-a-a1",
		},
		"DottedNode": {
			reason: "Node names with dots are kept: the name is a DNS subdomain, not a label.",
			args:   args{"team-a", "prod", "eu-west", "ip-10-0-0-1.eu-west-1.compute.internal"},
			want:   "prod-eu-west-ip-10-0-0-1.eu-west-1.compute.internal",
		},
		"Long": {
			reason: "A long name is cut so that with its hash it is 253 characters.",
			args:   args{"team-a", strings.Repeat("m", 200), "a", strings.Repeat("n", 100)},
			want:   strings.Repeat("m", 200) + "-a-" + strings.Repeat("n", 41),
		},
		"CutAtDash": {
			reason: "A cut that ends in a dash drops it: no label ends with a dash.",
			args:   args{"team-a", strings.Repeat("m", 241), "a", "node"},
			want:   strings.Repeat("m", 241) + "-a",
		},
		"CutAtDot": {
			reason: "A cut that ends in a dot drops it: no empty label.",
			args:   args{"team-a", strings.Repeat("m", 236), "a", "node.x.example.com"},
			want:   strings.Repeat("m", 236) + "-a-node",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := PeerName(tc.args.namespace, tc.args.mesh, tc.args.cluster, tc.args.leader)
			if !hashSuffix.MatchString(got) {
				t.Fatalf("\n%s\nPeerName(...) = %q: want a suffix of a dash and 8 hex digits", tc.reason, got)
			}
			if diff := cmp.Diff(tc.want, hashSuffix.ReplaceAllString(got, "")); diff != "" {
				t.Errorf("\n%s\nPeerName(...): -want readable part, +got:\n%s", tc.reason, diff)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("\n%s\nPeerName(...) = %q is not a DNS-1123 subdomain: %v", tc.reason, got, errs)
			}
			if again := PeerName(tc.args.namespace, tc.args.mesh, tc.args.cluster, tc.args.leader); again != got {
				t.Errorf("\n%s\nPeerName(...) is not deterministic: %q then %q", tc.reason, got, again)
			}
		})
	}
}

func TestPeerNameDistinct(t *testing.T) {
	long := strings.Repeat("n", 300)
	cases := map[string]struct {
		reason string
		a, b   [4]string
	}{
		"Namespace": {
			reason: "Two meshes of one name in different namespaces never share a Peer name.",
			a:      [4]string{"team-a", "prod", "a", "a1"},
			b:      [4]string{"team-b", "prod", "a", "a1"},
		},
		"DashesShift": {
			reason: "The same readable text from other parts is another identity.",
			a:      [4]string{"team-a", "x", "a-b", "c"},
			b:      [4]string{"team-a", "x", "a", "b-c"},
		},
		"Cluster": {
			reason: "The same leader name in two clusters is two Peers.",
			a:      [4]string{"team-a", "prod", "a", "n1"},
			b:      [4]string{"team-a", "prod", "b", "n1"},
		},
		"CutAlike": {
			reason: "Two long names equal up to the cut still differ by their hash.",
			a:      [4]string{"team-a", "prod", "a", long + "1"},
			b:      [4]string{"team-a", "prod", "a", long + "2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := PeerName(tc.a[0], tc.a[1], tc.a[2], tc.a[3])
			b := PeerName(tc.b[0], tc.b[1], tc.b[2], tc.b[3])
			if a == b {
				t.Errorf("\n%s\nPeerName(%q) == PeerName(%q) == %q", tc.reason, tc.a, tc.b, a)
			}
			for _, n := range []string{a, b} {
				if len(n) > 253 || len(validation.IsDNS1123Subdomain(n)) > 0 {
					t.Errorf("\n%s\nPeerName(...) = %q is not a DNS-1123 subdomain of at most 253 characters", tc.reason, n)
				}
			}
		})
	}
}

func TestPeerLabels(t *testing.T) {
	longMesh := strings.Repeat("m", 80)
	in := twoClusters(meshv1alpha1.GranularityNode, nodeA1())
	in.Name = longMesh
	p, err := Do(in)
	if err != nil {
		t.Fatalf("Do(...): unexpected error: %v", err)
	}
	want := map[string]string{
		"app.kubernetes.io/managed-by": "kilomesh",
		"kilomesh.io/mesh-namespace":   testNamespace,
		"kilomesh.io/mesh":             meshv1alpha1.LabelValue(longMesh),
		"kilomesh.io/source-cluster":   "a",
	}
	if len(p.Peers["b"]) != 1 {
		t.Fatalf("Do(...): want one Peer in b, got %d", len(p.Peers["b"]))
	}
	peer := p.Peers["b"][0]
	if diff := cmp.Diff(want, peer.Labels); diff != "" {
		t.Errorf("Every Peer carries the mesh's namespace and name, its source cluster and the managed-by marker.\n-want, +got:\n%s", diff)
	}
	for k, v := range peer.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("Label %s=%q is not a label value: %v", k, v, errs)
		}
	}
	owned := OwnedLabels(testNamespace, longMesh)
	for k, v := range owned {
		if peer.Labels[k] != v {
			t.Errorf("A Peer carries every owned label of its mesh: %s=%q, want %q", k, peer.Labels[k], v)
		}
	}
	if want := PeerName(testNamespace, longMesh, "a", "a1"); peer.Name != want {
		t.Errorf("A Peer is named after (namespace, mesh, source cluster, leader): got %q, want %q", peer.Name, want)
	}
}

// FuzzIsSubdomain pins isSubdomain to the validation it stands for.
func FuzzIsSubdomain(f *testing.F) {
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "a.b", "a..b", "a.-b", "a-.b", ".a", "a.", "A", "a_b", "é", "a\n",
		"mesh-cluster-a-node-1-0123abcd", strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a.", 126) + "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isSubdomain(s), len(validation.IsDNS1123Subdomain(s)) == 0; got != want {
			t.Errorf("isSubdomain(%q) = %v, validation says %v", s, got, want)
		}
	})
}
