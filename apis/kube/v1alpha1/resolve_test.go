package v1alpha1

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func peer(name, key string) DesiredPeer {
	return DesiredPeer{Name: name, Labels: map[string]string{"kilomesh.io/source-cluster": "a"}, Spec: PeerSpec{PublicKey: key, AllowedIPs: []string{"10.1.0.0/24"}}}
}

func segment(name string, peers ...DesiredPeer) *SegmentSet {
	return &SegmentSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: SegmentSetSpec{Peers: peers}}
}

func TestResolvePeers(t *testing.T) {
	segments := map[string]*SegmentSet{
		"a-0": segment("a-0", peer("p1", "k1"), peer("p2", "k2"), peer("p3", "k3")),
		"b-0": segment("b-0", peer("q1", "j1")),
		"a-1": segment("a-1", peer("p3", "k3")),
		"x-0": segment("x-0", peer("p3", "other")),
	}
	get := func(name string) (*SegmentSet, error) {
		if name == "broken" {
			return nil, errors.New("cache not synced")
		}
		if name == "foreign" {
			return nil, &SegmentSetRefusedError{Detail: "controlled by ClusterMesh other"}
		}
		return segments[name], nil
	}
	cases := map[string]struct {
		reason  string
		params  PeerSetParameters
		want    []string // name/key
		wantErr string
	}{
		"InlineOnly": {
			reason: "A PeerSet without references keeps exactly its own Peers, sorted by name.",
			params: PeerSetParameters{Peers: []DesiredPeer{peer("z", "kz"), peer("p1", "k1")}},
			want:   []string{"p1/k1", "z/kz"},
		},
		"References": {
			reason: "The Peers of every referenced SegmentSet are kept, with the set's own.",
			params: PeerSetParameters{Peers: []DesiredPeer{peer("z", "kz")}, SegmentSetRefs: []SegmentSetReference{{Name: "a-0"}, {Name: "b-0"}}},
			want:   []string{"p1/k1", "p2/k2", "p3/k3", "q1/j1", "z/kz"},
		},
		"OmitAndReplace": {
			reason: "A reference omits the Peers it names, and an own Peer replaces the SegmentSet's of the same name.",
			params: PeerSetParameters{Peers: []DesiredPeer{peer("p2", "replaced")}, SegmentSetRefs: []SegmentSetReference{{Name: "a-0", Omit: []string{"p1", "absent"}}}},
			want:   []string{"p2/replaced", "p3/k3"},
		},
		"SameFormTwice": {
			reason: "A Peer held by two SegmentSets in the same form (moving from one to the other) is kept once.",
			params: PeerSetParameters{SegmentSetRefs: []SegmentSetReference{{Name: "a-0"}, {Name: "a-1"}}},
			want:   []string{"p1/k1", "p2/k2", "p3/k3"},
		},
		"TwoForms": {
			reason:  "A Peer held by two SegmentSets in two forms resolves nothing: the set cannot tell which to keep.",
			params:  PeerSetParameters{SegmentSetRefs: []SegmentSetReference{{Name: "a-0"}, {Name: "x-0"}}},
			wantErr: `spec.forProvider.segmentSetRefs[1].name: Duplicate value: "SegmentSets a-0 and x-0 hold Peer p3 in two forms"`,
		},
		"Missing": {
			reason:  "A reference to a SegmentSet that does not exist resolves nothing, and names the field.",
			params:  PeerSetParameters{Peers: []DesiredPeer{peer("z", "kz")}, SegmentSetRefs: []SegmentSetReference{{Name: "a-0"}, {Name: "gone"}}},
			wantErr: `spec.forProvider.segmentSetRefs[1].name: Not found: "gone"`,
		},
		"Refused": {
			reason:  "A SegmentSet the getter refuses resolves nothing, and names the reference.",
			params:  PeerSetParameters{SegmentSetRefs: []SegmentSetReference{{Name: "a-0"}, {Name: "foreign"}}},
			wantErr: "spec.forProvider.segmentSetRefs[1].name: Forbidden: controlled by ClusterMesh other",
		},
		"CannotRead": {
			reason:  "A SegmentSet that cannot be read resolves nothing.",
			params:  PeerSetParameters{SegmentSetRefs: []SegmentSetReference{{Name: "broken"}}},
			wantErr: "spec.forProvider.segmentSetRefs[0].name: Internal error: cache not synced",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ResolvePeers(&tc.params, get)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nResolvePeers(...): want error %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nResolvePeers(...): %v", tc.reason, err)
			}
			names := make([]string, len(got))
			for i, p := range got {
				names[i] = p.Name + "/" + p.Spec.PublicKey
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s\nResolvePeers(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestResolvePeersBound(t *testing.T) {
	big := &SegmentSet{}
	for i := range MaxResolvedPeers + 1 {
		big.Spec.Peers = append(big.Spec.Peers, DesiredPeer{Name: "p" + strconv.Itoa(i)})
	}
	_, err := ResolvePeers(&PeerSetParameters{SegmentSetRefs: []SegmentSetReference{{Name: "big"}}}, func(string) (*SegmentSet, error) { return big, nil })
	if err == nil || !strings.Contains(err.Error(), "spec.forProvider.segmentSetRefs: Too many") {
		t.Errorf("A PeerSet that would keep more than MaxResolvedPeers Peers must resolve nothing; got %v", err)
	}
}

// TestResolvePeersReadBound pins the bound on what one reconcile reads: a
// set that omits every Peer of the SegmentSets it references keeps nothing,
// but reads them all, and must stop once they hold more than
// MaxReferencedPeers.
func TestResolvePeersReadBound(t *testing.T) {
	segments := map[string]*SegmentSet{}
	refs := []SegmentSetReference{}
	for k := range MaxReferencedPeers/MaxSegmentSetPeers + 1 {
		name := "s-" + strconv.Itoa(k)
		s := &SegmentSet{}
		omit := make([]string, 0, MaxSegmentSetPeers)
		for i := range MaxSegmentSetPeers {
			p := name + "-" + strconv.Itoa(i)
			s.Spec.Peers = append(s.Spec.Peers, DesiredPeer{Name: p})
			omit = append(omit, p)
		}
		segments[name] = s
		refs = append(refs, SegmentSetReference{Name: name, Omit: omit})
	}
	_, err := ResolvePeers(&PeerSetParameters{SegmentSetRefs: refs}, func(n string) (*SegmentSet, error) { return segments[n], nil })
	if err == nil || !strings.Contains(err.Error(), "Too many") {
		t.Errorf("References whose SegmentSets hold more than MaxReferencedPeers Peers must resolve nothing, even when every Peer is omitted; got %v", err)
	}
}
