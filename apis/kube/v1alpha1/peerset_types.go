package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv1 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// A DesiredPeer is one Kilo Peer a PeerSet keeps in its cluster.
type DesiredPeer struct {
	// Name of the Peer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Labels of the Peer. The set's selector labels are added to them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Spec of the Peer.
	Spec PeerSpec `json:"spec"`
}

// A PeerSpec is the spec of a Kilo Peer as a PeerSet carries it: Kilo's
// fields with their types but without Kilo's value rules. provider-kilomesh
// checks every Peer with Kilo's rules before it applies it, and reports an
// invalid Peer while it applies the others; rules in this schema would
// instead reject the whole set (and, over thousands of Peers, exceed the API
// server's CEL cost budget).
type PeerSpec struct {
	// AllowedIPs are the networks routed to this peer, as CIDRs.
	// +optional
	AllowedIPs []string `json:"allowedIPs"`

	// Endpoint is the initial address of the peer.
	// +optional
	Endpoint *PeerEndpoint `json:"endpoint,omitempty"`

	// PersistentKeepalive is the keepalive interval in seconds.
	// +optional
	PersistentKeepalive int `json:"persistentKeepalive,omitempty"`

	// PresharedKey is an optional symmetric key for the peer.
	// +optional
	PresharedKey string `json:"presharedKey,omitempty"`

	// PublicKey is the WireGuard public key of the peer.
	// +optional
	PublicKey string `json:"publicKey"`
}

// A PeerEndpoint is the address and UDP port of a peer.
type PeerEndpoint struct {
	// DNSOrIP is the host of the endpoint.
	DNSOrIP DNSOrIP `json:"dnsOrIP"`

	// Port is the UDP port of the endpoint.
	// +optional
	Port uint32 `json:"port"`
}

// A DNSOrIP is a DNS name or an IP address.
type DNSOrIP struct {
	// DNS name of the endpoint.
	// +optional
	DNS string `json:"dns,omitempty"`

	// IP address of the endpoint.
	// +optional
	IP string `json:"ip,omitempty"`
}

// Kilo returns the spec as Kilo's Peer spec.
func (s *PeerSpec) Kilo() kilov1alpha1.PeerSpec {
	out := kilov1alpha1.PeerSpec{
		AllowedIPs:          append([]string(nil), s.AllowedIPs...),
		PersistentKeepalive: s.PersistentKeepalive,
		PresharedKey:        s.PresharedKey,
		PublicKey:           s.PublicKey,
	}
	if s.Endpoint != nil {
		out.Endpoint = &kilov1alpha1.PeerEndpoint{
			DNSOrIP: kilov1alpha1.DNSOrIP{DNS: s.Endpoint.DNSOrIP.DNS, IP: s.Endpoint.DNSOrIP.IP},
			Port:    s.Endpoint.Port,
		}
	}
	return out
}

// PeerSetParameters are the Peers a PeerSet keeps in its cluster.
type PeerSetParameters struct {
	// Selector holds the labels that mark the Peers this set owns in the
	// cluster. It must name a mesh (kilomesh.io/mesh); the provider adds
	// app.kubernetes.io/managed-by: kilomesh and kilomesh.io/mesh-namespace:
	// <the set's own namespace>, and refuses a selector that says otherwise.
	// The set creates, corrects and deletes only Peers that carry all of
	// them. It cannot change: Peers labelled with an old selector would no
	// longer be recognised as the set's own.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	Selector map[string]string `json:"selector"`

	// Peers the set keeps in the cluster. A Peer named here replaces the
	// Peer of the same name that a referenced SegmentSet holds.
	// +listType=map
	// +listMapKey=name
	// +optional
	Peers []DesiredPeer `json:"peers,omitempty"`

	// SegmentSetRefs name SegmentSets of the set's own namespace whose
	// Peers the set keeps too, as if they were listed in peers: all of
	// them but those the reference omits and those peers replaces.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	SegmentSetRefs []SegmentSetReference `json:"segmentSetRefs,omitempty"`
}

// A SegmentSetReference names a SegmentSet whose Peers a PeerSet keeps.
type SegmentSetReference struct {
	// Name of a SegmentSet in the PeerSet's own namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Omit names Peers of the SegmentSet that this set does not keep. A
	// name the SegmentSet does not hold omits nothing.
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Omit []string `json:"omit,omitempty"`
}

// MaxPeersBytes is the most bytes the desired Peers of one PeerSet
// (spec.forProvider.peers and segmentSetRefs together), or the Peers of one
// SegmentSet, may take as JSON. etcd refuses objects over
// 1.5 MiB, and a composed PeerSet stores its Peers almost twice, in its
// spec and in its managed fields: a realistic Peer takes about 355 bytes of
// spec and 644 bytes stored. At this limit, about 1,970 Peers, a set takes
// about 1.27 MB with room for its largest status. The function refuses to
// compose a larger set, and the provider to apply one.
const MaxPeersBytes = 700_000

// MaxResolvedPeers is the most Peers one PeerSet may keep, its own and
// those of the SegmentSets it references together: a bound on the memory
// and the writes of one reconcile.
const MaxResolvedPeers = 20_000

// MaxReferencedPeers is the most Peers the SegmentSets one PeerSet
// references may hold together, each counted whole: those a reference
// omits, those the set replaces and those two SegmentSets both hold
// included. It bounds what one reconcile reads, whatever the set keeps in
// the end: a set that omits nearly everything it references still reads it
// all.
const MaxReferencedPeers = 2 * MaxResolvedPeers

// Reasons a desired Peer of a PeerSet is not applied.
const (
	// ReasonPeerNameConflict: a Peer of the same name that the set does not
	// own exists in the cluster.
	ReasonPeerNameConflict = "PeerNameConflict"
	// ReasonPeerKeyConflict: a Peer the set does not own already uses the
	// public key.
	ReasonPeerKeyConflict = "PeerKeyConflict"
	// ReasonPeerInvalid: the Peer breaks Kilo's rules or the API server
	// rejected it.
	ReasonPeerInvalid = "PeerInvalid"
	// ReasonPeerRouteConflict: some routes of the Peer are withheld, since
	// a Peer the set does not own already routes an overlapping prefix, or
	// since the cluster's Peers cannot be read whole; the rest of the Peer
	// is applied, unless no route is left.
	ReasonPeerRouteConflict = "PeerRouteConflict"
)

// A PeerProblem is a desired Peer that the set could not apply.
type PeerProblem struct {
	// Peer is the name of the desired Peer.
	Peer string `json:"peer"`
	// Reason is PeerNameConflict, PeerKeyConflict, PeerRouteConflict or
	// PeerInvalid.
	Reason string `json:"reason"`
	// Message says what is in the way.
	Message string `json:"message"`
}

// PeerSetObservation reports what a PeerSet applied.
type PeerSetObservation struct {
	// Desired is the number of Peers the set keeps: those of
	// spec.forProvider.peers and of the SegmentSets it references.
	Desired int `json:"desired"`
	// Applied is the number of desired Peers that are in the cluster as
	// desired.
	Applied int `json:"applied"`
	// Problems are desired Peers that were not applied, sorted by name: the
	// first 100 of them, each message cut to 1 KiB. The Ready condition
	// counts them all.
	// +optional
	Problems []PeerProblem `json:"problems,omitempty"`
}

// A PeerSetSpec defines the desired state of a PeerSet.
type PeerSetSpec struct {
	xpv1.ManagedResourceSpec `json:",inline"`

	ForProvider PeerSetParameters `json:"forProvider"`
}

// A PeerSetStatus represents the observed state of a PeerSet.
type PeerSetStatus struct {
	xpv1.ManagedResourceStatus `json:",inline"`

	AtProvider PeerSetObservation `json:"atProvider,omitempty"`
}

// A PeerSet keeps a set of Kilo Peers in one member cluster, reached through
// a provider-kubernetes ProviderConfig or ClusterProviderConfig. It creates
// the missing ones, corrects its own with server-side apply and deletes the
// Peers it owns (those with its selector labels) that are no longer in the
// set. It never changes a Peer it does not own.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".status.atProvider.desired"
// +kubebuilder:printcolumn:name="APPLIED",type="integer",JSONPath=".status.atProvider.applied"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,kilomesh}
type PeerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PeerSetSpec   `json:"spec"`
	Status PeerSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// A PeerSetList is a list of PeerSets.
type PeerSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PeerSet `json:"items"`
}
