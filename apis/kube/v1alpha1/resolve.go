package v1alpha1

import (
	"errors"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// +kubebuilder:object:generate=false

// A SegmentSetRefusedError is the error a SegmentGetter returns for a
// SegmentSet that exists but that the PeerSet may not keep; ResolvePeers
// reports it as the reference's Forbidden error.
type SegmentSetRefusedError struct {
	// Detail says why, without naming anything of the SegmentSet's
	// content.
	Detail string
}

// Error returns the detail.
func (r *SegmentSetRefusedError) Error() string { return r.Detail }

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
// So is a SegmentSet the getter refuses (SegmentSetRefusedError), and
// referenced SegmentSets that hold more than MaxReferencedPeers Peers
// together, counted before anything is omitted or replaced.
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
	read := 0
	for i, ref := range params.SegmentSetRefs {
		s, err := segment(ref.Name)
		var refused *SegmentSetRefusedError
		switch {
		case errors.As(err, &refused):
			return nil, field.Forbidden(refs.Index(i).Child("name"), refused.Detail)
		case err != nil:
			return nil, field.InternalError(refs.Index(i).Child("name"), err)
		case s == nil:
			return nil, field.NotFound(refs.Index(i).Child("name"), ref.Name)
		}
		// Counted before any is looked at: what a reference omits is read
		// all the same.
		if read += len(s.Spec.Peers); read > MaxReferencedPeers {
			return nil, field.TooMany(refs.Index(i).Child("name"), read, MaxReferencedPeers)
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
