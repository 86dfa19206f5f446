package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A SegmentSetSpec holds Peers that several PeerSets keep.
type SegmentSetSpec struct {
	// Peers of the set, in the form most of the PeerSets that reference it
	// keep them.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4000
	// +optional
	Peers []DesiredPeer `json:"peers,omitempty"`
}

// MaxSegmentSetPeers is the most Peers one SegmentSet holds, as its schema
// says (spec.peers maxItems). function-kilomesh spreads a source's Peers
// over as many SegmentSets as keep each under it, and under
// MaxPeersBytes.
const MaxSegmentSetPeers = 4000

// A SegmentSet holds Kilo Peers that several PeerSets of its namespace keep:
// the Peers of one source cluster of a mesh, written once instead of once
// per member that receives them. It is data only: no controller reconciles
// it, it reaches no cluster, and it has no status. provider-kilomesh reads
// it for the PeerSets that reference it, and applies its Peers exactly as
// the PeerSet's own.
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={kilomesh}
type SegmentSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SegmentSetSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// A SegmentSetList is a list of SegmentSets.
type SegmentSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SegmentSet `json:"items"`
}
