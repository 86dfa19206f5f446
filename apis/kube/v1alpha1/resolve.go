package v1alpha1

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// +kubebuilder:object:generate=false

// A SegmentGetter returns the SegmentSet of a PeerSet's namespace with the
// given name, nil when there is none, or an error when it cannot tell.
type SegmentGetter func(name string) (*SegmentSet, error)

// ResolvePeers returns every Peer a PeerSet keeps, sorted by name: the
// Peers of the SegmentSets it references, less those a reference omits,
// and then its own peers, each replacing a Peer of the same name. Two
// SegmentSets may hold the same Peer only in the same form (a Peer moving
// from one to another is briefly in both). A reference to a SegmentSet
// that does not exist, two forms of one Peer, or more than
// MaxResolvedPeers Peers is an error naming the field, and nothing is
// resolved: a PeerSet that cannot tell what it keeps must change nothing.
func ResolvePeers(params *PeerSetParameters, segment SegmentGetter) ([]DesiredPeer, error) {
	if len(params.SegmentSetRefs) == 0 {
		out := append([]DesiredPeer(nil), params.Peers...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	refs := field.NewPath("spec", "forProvider", "segmentSetRefs")
	own := make(map[string]bool, len(params.Peers))
	for _, p := range params.Peers {
		own[p.Name] = true
	}
	byName := map[string]DesiredPeer{}
	from := map[string]string{}
	for i, ref := range params.SegmentSetRefs {
		s, err := segment(ref.Name)
		if err != nil {
			return nil, field.InternalError(refs.Index(i).Child("name"), err)
		}
		if s == nil {
			return nil, field.NotFound(refs.Index(i).Child("name"), ref.Name)
		}
		omit := make(map[string]bool, len(ref.Omit))
		for _, n := range ref.Omit {
			omit[n] = true
		}
		for _, p := range s.Spec.Peers {
			if omit[p.Name] || own[p.Name] {
				continue
			}
			if prev, ok := byName[p.Name]; ok {
				if !reflect.DeepEqual(prev, p) {
					return nil, field.Duplicate(refs.Index(i).Child("name"), "SegmentSets "+from[p.Name]+" and "+ref.Name+" hold Peer "+p.Name+" in two forms")
				}
				continue
			}
			if len(byName)+len(params.Peers) >= MaxResolvedPeers {
				return nil, field.TooMany(refs, len(byName)+len(params.Peers)+1, MaxResolvedPeers)
			}
			byName[p.Name] = p
			from[p.Name] = ref.Name
		}
	}
	out := make([]DesiredPeer, 0, len(byName)+len(params.Peers))
	for _, p := range byName {
		out = append(out, p)
	}
	out = append(out, params.Peers...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
