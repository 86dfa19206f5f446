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

// compose writes the PeerSet of one target. The PeerSet adds its selector
// labels to every Peer; each Peer carries only the label that is its own.
func (peerSetDelivery) compose(cp *composition, c meshv1alpha1.Cluster, peers []kilov1alpha1.Peer) error {
	items := make([]*structpb.Value, len(peers))
	for i := range peers {
		items[i] = object(map[string]*structpb.Value{
			"name":   str(peers[i].Name),
			"labels": cp.conv.sourceLabel(&peers[i]),
			"spec":   cp.conv.peerSpec(&peers[i].Spec),
		})
	}
	list := structpb.NewListValue(&structpb.ListValue{Values: items})
	// A PeerSet the API server cannot store would fail on every write.
	b, err := list.MarshalJSON()
	if err != nil {
		return errors.Wrap(err, errMeasurePeerSet)
	}
	if len(b) > cp.maxPeerSet {
		return errors.Errorf(errFmtPeerSetTooLarge, c.Name, len(b)>>10, len(items), cp.maxPeerSet>>10)
	}
	set := &structpb.Struct{Fields: map[string]*structpb.Value{
		"apiVersion": str(kubev1alpha1.GroupVersion.String()),
		"kind":       str(kubev1alpha1.PeerSetKind),
		"spec": object(map[string]*structpb.Value{
			"providerConfigRef": providerConfigRef(c.ProviderConfigRef),
			"forProvider": object(map[string]*structpb.Value{
				"selector": cp.owned,
				"peers":    list,
			}),
		}),
	}}
	cp.put(prefixPeerSet+c.Name, set)
	return nil
}

func (peerSetDelivery) target(name string, _ *structpb.Struct) (string, bool) {
	return strings.CutPrefix(name, prefixPeerSet)
}

func (peerSetDelivery) composed(name string, s *structpb.Struct) []composedPeer {
	target := strings.TrimPrefix(name, prefixPeerSet)
	items := get(s, "spec", "forProvider", "peers").GetListValue().GetValues()
	out := make([]composedPeer, 0, len(items))
	for _, item := range items {
		i := item.GetStructValue()
		out = append(out, composedPeer{
			resource: name,
			target:   target,
			source:   get(i, "labels", meshv1alpha1.LabelSourceCluster).GetStringValue(),
			name:     get(i, "name").GetStringValue(),
			spec:     peerSpecOf(get(i, "spec")),
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
