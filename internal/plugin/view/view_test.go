package view

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestFreeRanges(t *testing.T) {
	type args struct {
		near string
		used []string
		n    int
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []string
	}{
		"AfterTheOverlap": {
			reason: "Free ranges of the same size come first after the network to replace, in its own private block.",
			args:   args{near: "10.2.0.0/16", used: []string{"10.1.0.0/16", "10.2.0.0/15", "10.2.0.0/16"}, n: 3},
			want:   []string{"10.4.0.0/16", "10.5.0.0/16", "10.6.0.0/16"},
		},
		"SkipsEveryUsedRange": {
			reason: "A range inside a used network, or holding one, is never proposed.",
			args:   args{near: "10.1.0.0/16", used: []string{"10.1.0.0/16", "10.2.128.0/24", "10.3.0.0/16", "10.4.0.0/14"}, n: 2},
			want:   []string{"10.8.0.0/16", "10.9.0.0/16"},
		},
		"WrapsToTheStartOfTheBlock": {
			reason: "At the end of its block the search goes on from the block's start.",
			args:   args{near: "192.168.254.0/24", used: []string{"192.168.254.0/24", "192.168.255.0/24", "192.168.0.0/24"}, n: 2},
			want:   []string{"192.168.1.0/24", "192.168.2.0/24"},
		},
		"OtherBlocks": {
			reason: "When its block is full, the other private blocks are searched.",
			args:   args{near: "192.168.0.0/17", used: []string{"192.168.0.0/16"}, n: 2},
			want:   []string{"10.0.0.0/17", "10.0.128.0/17"},
		},
		"OutsidePrivateSpace": {
			reason: "A network outside private space is replaced by one inside it.",
			args:   args{near: "100.64.0.0/16", used: []string{"10.0.0.0/16"}, n: 1},
			want:   []string{"10.1.0.0/16"},
		},
		"IPv6": {
			reason: "An IPv6 network is replaced by one of unique local addresses.",
			args:   args{near: "fd00:10::/32", used: []string{"fd00:10::/32", "fd00:11::/32"}, n: 1},
			want:   []string{"fd00:12::/32"},
		},
		"TooLarge": {
			reason: "No private block holds a network larger than itself.",
			args:   args{near: "10.0.0.0/7", n: 1},
			want:   nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range FreeRanges(netip.MustParsePrefix(tc.args.near), prefixes(tc.args.used...), tc.args.n) {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFreeRanges(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAge(t *testing.T) {
	cases := map[string]struct {
		reason string
		d      time.Duration
		want   string
	}{
		"Seconds":  {reason: "Under a minute counts seconds.", d: 42 * time.Second, want: "42s ago"},
		"Minutes":  {reason: "Under an hour counts minutes.", d: 5*time.Minute + 59*time.Second, want: "5m ago"},
		"Hours":    {reason: "Under two days counts hours.", d: 47 * time.Hour, want: "47h ago"},
		"Days":     {reason: "Past two days counts days.", d: 72 * time.Hour, want: "3d ago"},
		"InFuture": {reason: "A time ahead of the clock is in the future, which diagnose reports as a skew.", d: -2 * time.Minute, want: "in 2m"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Age(tc.d); got != tc.want {
				t.Errorf("%s\nAge(%s): want %q, got %q", tc.reason, tc.d, tc.want, got)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"Plain":      {reason: "Text without specials is quoted as it is.", in: "node-a1", want: `"node-a1"`},
		"Quotes":     {reason: "A quote in a name written by anyone cannot end the DOT string.", in: `a"b`, want: `"a\"b"`},
		"Backslash":  {reason: "A backslash is escaped, so it never forms a DOT escape such as \\l.", in: `a\lb`, want: `"a\\lb"`},
		"LineBreaks": {reason: "Line breaks become DOT's centred breaks.", in: "a\nb", want: `"a\nb"`},
		"Controls": {
			reason: "Control characters from members and nodes are escaped before Graphviz sees them: XML forbids them in SVG, and a terminal acts on them in DOT.",
			in:     "a\x1b[2J\rb\u009b\u202e", want: `"a\\u001b[2J\\u000db\\u009b\\u202e"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := quote(tc.in); got != tc.want {
				t.Errorf("%s\nquote(%q): want %s, got %s", tc.reason, tc.in, tc.want, got)
			}
		})
	}
}

func TestHTML(t *testing.T) {
	got := html(`<b>&"x"</b>`)
	want := "&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;"
	if got != want {
		t.Errorf("html(...): markup in node data must be escaped in HTML-like labels: want %q, got %q", want, got)
	}
	if got, want := html("a\x1b[2J\nb"), `a\u001b[2J b`; got != want {
		t.Errorf("html(...): control characters must be escaped, line breaks made spaces: want %q, got %q", want, got)
	}
}

func TestExplain(t *testing.T) {
	member := meshv1alpha1.Cluster{Name: "cluster-b", ProviderConfigRef: meshv1alpha1.ProviderConfigReference{Name: "cluster-b"}}
	cases := map[string]struct {
		reason string
		msg    string
		// want is part of what the failure is said to be.
		want string
	}{
		"ControlPlaneGrant": {
			reason: "provider-kilomesh forbidden to read a ProviderConfig is the control-plane grant, not the member.",
			msg:    `connect failed: cannot get ProviderConfig "network/cluster-b": providerconfigs.kubernetes.m.crossplane.io "cluster-b" is forbidden: User "system:serviceaccount:crossplane-system:provider-kilomesh" cannot get resource "providerconfigs"`,
			want:   "control-plane grant",
		},
		"UsageForbidden": {
			reason: "provider-kilomesh forbidden to record its use of a config is the control-plane grant too.",
			msg:    `connect failed: cannot record the use of the provider-kubernetes config: providerconfigusages.kubernetes.m.crossplane.io is forbidden`,
			want:   "control-plane grant",
		},
		"ConfigMissing": {
			reason: "A ProviderConfig that does not exist is named.",
			msg:    `connect failed: cannot get ProviderConfig "network/cluster-b": providerconfigs.kubernetes.m.crossplane.io "cluster-b" not found`,
			want:   "does not exist",
		},
		"SecretMissing": {
			reason: "A kubeconfig Secret that does not exist is named.",
			msg:    `connect failed: cannot get Secret network/cluster-b-kubeconfig named by ProviderConfig "network/cluster-b": secrets "cluster-b-kubeconfig" not found`,
			want:   "kubeconfig Secret",
		},
		"MemberForbidden": {
			reason: "A member's own RBAC refusing Nodes is the member's RBAC.",
			msg:    `observe failed: nodes is forbidden: User "system:serviceaccount:kube-system:kilomesh" cannot list resource "nodes"`,
			want:   "member's RBAC",
		},
		"Revoked": {
			reason: "A refused token is a credential to renew.",
			msg:    `the cluster does not accept the credentials of ProviderConfig "network/cluster-b" (revoked or expired?): Unauthorized`,
			want:   "refuses the credentials",
		},
		"NoPeerCRD": {
			reason: "A member without Kilo's CRD needs Kilo.",
			msg:    `no matches for kind "Peer" in version "kilo.squat.ai/v1alpha1"`,
			want:   "no Kilo Peer CRD",
		},
		"Unreachable": {
			reason: "A member that does not answer is a network problem.",
			msg:    `Get "https://10.0.0.3:6443/api/v1/nodes": dial tcp 10.0.0.3:6443: connect: connection refused`,
			want:   "does not answer",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			what, fix := explain(tc.msg, member, "network", "read the member's Nodes")
			if !strings.Contains(what, tc.want) || fix == "" {
				t.Errorf("%s\nexplain(%q): want a failure that says %q with a fix, got %q (fix %q)", tc.reason, tc.msg, tc.want, what, fix)
			}
		})
	}
}

func TestEdgesResolve(t *testing.T) {
	small := Graph{Members: []GraphMember{{Nodes: 3}, {Nodes: 3}}, Peers: make([]GraphPeer, 6)}
	large := Graph{Members: []GraphMember{{Nodes: 50}, {Nodes: 50}}, Peers: make([]GraphPeer, 100)}
	cases := map[string]struct {
		reason string
		edges  Edges
		g      Graph
		want   Edges
	}{
		"SmallByPeer":   {reason: "A small mesh is drawn Peer by Peer.", edges: EdgesAuto, g: small, want: EdgesPeer},
		"LargeByMember": {reason: "A mesh of many Peers is drawn by member, to stay readable.", edges: EdgesAuto, g: large, want: EdgesMember},
		"AsAsked":       {reason: "A way asked for is kept.", edges: EdgesPeer, g: large, want: EdgesPeer},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.edges.Resolve(tc.g); got != tc.want {
				t.Errorf("%s\nResolve(...): want %s, got %s", tc.reason, tc.want, got)
			}
		})
	}
}
