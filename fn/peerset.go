package main

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// maxPeerSetBytes is the most the Peers of one PeerSet may take as JSON.
const maxPeerSetBytes = kubev1alpha1.MaxPeersBytes

const (
	errFmtPeerSetTooLarge = "the PeerSet of cluster %s needs %d KiB for its %d Peers, more than the %d KiB one object can hold (etcd refuses objects over 1.5 MiB, and a PeerSet stores its Peers twice): " +
		"use Location granularity, select fewer nodes with spec.clusters[].nodeSelector, or split the mesh"
	errMeasurePeerSet = "cannot measure the PeerSet"
)

// peerSetDelivery composes one provider-kilomesh PeerSet per member, named
// peerset-<target>.
type peerSetDelivery struct{}

// compose writes the PeerSet of one target: its Peers inline, or, in the
// shared form, references to the SegmentSets of the other members with
// what the target holds otherwise. The PeerSet adds its selector labels to
// every Peer; each Peer carries only the label that is its own.
func (peerSetDelivery) compose(cp *composition, c meshv1alpha1.Cluster, peers []*kilov1alpha1.Peer) error {
	params := map[string]*structpb.Value{"selector": cp.owned}
	var measured *structpb.Value
	count := len(peers)
	if cp.shared != nil {
		if !cp.segmentsWritten(c.Name) {
			// A PeerSet that referenced a SegmentSet not written yet would
			// stop in error until it is: it waits for them as it is.
			if r, ok := cp.o.resources[prefixPeerSet+c.Name]; ok {
				cp.put(prefixPeerSet+c.Name, intent(r.GetResource()))
			}
			return nil
		}
		refs, inline := sharedPeerSet(cp, c.Name)
		setList(params, "segmentSetRefs", refs)
		setList(params, "peers", inline)
		measured = object(map[string]*structpb.Value{"peers": inline, "segmentSetRefs": refs})
		count = len(inline.GetListValue().GetValues())
	} else {
		items := make([]*structpb.Value, len(peers))
		for i, peer := range peers {
			items[i] = cp.conv.desiredPeer(peer)
		}
		measured = list(items)
		setList(params, "peers", measured)
	}
	// A PeerSet the API server cannot store would fail on every write.
	b, err := measured.MarshalJSON()
	if err != nil {
		return errors.Wrap(err, errMeasurePeerSet)
	}
	if len(b) > cp.maxPeerSet {
		return errors.Errorf(errFmtPeerSetTooLarge, c.Name, len(b)>>10, count, cp.maxPeerSet>>10)
	}
	set := &structpb.Struct{Fields: map[string]*structpb.Value{
		"apiVersion": str(kubev1alpha1.GroupVersion.String()),
		"kind":       str(kubev1alpha1.PeerSetKind),
		"spec": object(map[string]*structpb.Value{
			"providerConfigRef": providerConfigRef(c.ProviderConfigRef),
			"forProvider":       object(params),
		}),
	}}
	cp.put(prefixPeerSet+c.Name, set)
	return nil
}

// setList sets a list of a PeerSet's parameters, and leaves an empty one
// out: provider-kilomesh writes its PeerSets back (their finalizer) as
// their Go type, which drops an empty list, and Crossplane would then
// write it again, each time a change of the PeerSet's spec and two watch
// events of the mesh.
func setList(params map[string]*structpb.Value, key string, list *structpb.Value) {
	if len(list.GetListValue().GetValues()) > 0 {
		params[key] = list
	}
}

func (peerSetDelivery) target(name string, _ *structpb.Struct) (string, bool) {
	return strings.CutPrefix(name, prefixPeerSet)
}

// composed lists the Peers a PeerSet holds, those of the SegmentSets it
// references included. A SegmentSet that is not observed (deleted by hand)
// adds none: what it held is not delivered.
func (peerSetDelivery) composed(segs map[string]*kubev1alpha1.SegmentSet, name string, s *structpb.Struct) []composedPeer {
	target := strings.TrimPrefix(name, prefixPeerSet)
	fp := get(s, "spec", "forProvider")
	params := kubev1alpha1.PeerSetParameters{}
	labels := sourceLabels{}
	for _, item := range get(fp.GetStructValue(), "peers").GetListValue().GetValues() {
		params.Peers = append(params.Peers, desiredPeerOf(item.GetStructValue(), labels))
	}
	for _, ref := range get(fp.GetStructValue(), "segmentSetRefs").GetListValue().GetValues() {
		r := kubev1alpha1.SegmentSetReference{Name: get(ref.GetStructValue(), "name").GetStringValue()}
		for _, o := range get(ref.GetStructValue(), "omit").GetListValue().GetValues() {
			r.Omit = append(r.Omit, o.GetStringValue())
		}
		params.SegmentSetRefs = append(params.SegmentSetRefs, r)
	}
	resolved, err := kubev1alpha1.ResolvePeers(&params, func(n string) (*kubev1alpha1.SegmentSet, error) {
		if s, ok := segs[n]; ok {
			return s, nil
		}
		return &kubev1alpha1.SegmentSet{}, nil
	})
	if err != nil {
		resolved = params.Peers // two forms of one Peer: only the set's own are certain
	}
	out := make([]composedPeer, 0, len(resolved))
	for i := range resolved {
		out = append(out, composedPeer{
			resource: name,
			target:   target,
			source:   resolved[i].Labels[meshv1alpha1.LabelSourceCluster],
			name:     resolved[i].Name,
			spec:     resolved[i].Spec.Kilo(),
		})
	}
	return out
}

// problems quotes why a PeerSet cannot apply its Peers: it cannot sync, or
// it syncs but some Peers are not applied.
func (peerSetDelivery) problems(o *observed, members map[string]bool, out map[string]string) {
	for _, name := range sortedNames(o, prefixPeerSet) {
		target := strings.TrimPrefix(name, prefixPeerSet)
		if !members[target] {
			continue
		}
		s := o.resources[name].GetResource()
		if c, ok := condition(s, "Synced"); ok && c.status == "False" {
			out[target] = cut(c.message)
		} else if c, ok := condition(s, "Ready"); ok && c.status == "False" {
			out[target] = cut(c.message)
		}
	}
}
