package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv1 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// The condition a NodeInventory sets on whether provider-kilomesh accepts
// the credentials of its cluster: False (reason CredentialsRefused) when its
// config names what provider-kilomesh refuses to use (the provider's own
// identity from a namespaced ProviderConfig, a token file, an exec plugin,
// an insecure or proxied transport...), True once it accepted them. The
// owner of the inventory hands nothing to any provider for that cluster
// while it is False: the same credentials would deliver its Peers.
const (
	TypeCredentialsAccepted   = "CredentialsAccepted"
	ReasonCredentialsRefused  = "CredentialsRefused"
	ReasonCredentialsAccepted = "CredentialsAccepted"
)

// NodeInventoryParameters select what a NodeInventory observes.
type NodeInventoryParameters struct {
	// NodeSelector limits the observed nodes. Empty selects every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// OwnedPeerLabels mark the Peers that the owner of this inventory
	// manages in the cluster. Every other Peer of the cluster is reported in
	// status.atProvider.foreignPeers, so the owner can avoid a Peer in its
	// way. Empty reports no Peers.
	// +optional
	OwnedPeerLabels map[string]string `json:"ownedPeerLabels,omitempty"`
}

// KiloAnnotations are the values of the Kilo annotations of a Node, copied
// verbatim but cut to a bounded length (never inside a UTF-8 character). An
// annotation that is unset or empty is left out.
type KiloAnnotations struct {
	// Key is kilo.squat.ai/key, the node's WireGuard public key.
	// +optional
	Key string `json:"key,omitempty"`
	// WireguardIP is kilo.squat.ai/wireguard-ip.
	// +optional
	WireguardIP string `json:"wireguardIP,omitempty"`
	// Endpoint is kilo.squat.ai/endpoint, the endpoint Kilo detected.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// InternalIP is kilo.squat.ai/internal-ip.
	// +optional
	InternalIP string `json:"internalIP,omitempty"`
	// ForceEndpoint is kilo.squat.ai/force-endpoint.
	// +optional
	ForceEndpoint string `json:"forceEndpoint,omitempty"`
	// ClustermeshEndpoint is kilo.squat.ai/clustermesh-endpoint, the
	// endpoint other clusters use.
	// +optional
	ClustermeshEndpoint string `json:"clustermeshEndpoint,omitempty"`
	// Granularity is kilo.squat.ai/granularity.
	// +optional
	Granularity string `json:"granularity,omitempty"`
	// PersistentKeepalive is kilo.squat.ai/persistent-keepalive.
	// +optional
	PersistentKeepalive string `json:"persistentKeepalive,omitempty"`
	// DiscoveredEndpoints is kilo.squat.ai/discovered-endpoints, raw JSON.
	// +optional
	DiscoveredEndpoints string `json:"discoveredEndpoints,omitempty"`
	// ForceInternalIP is kilo.squat.ai/force-internal-ip. An annotation
	// that is present with an empty value (Kilo's "no internal IP") is
	// published as "-".
	// +optional
	ForceInternalIP string `json:"forceInternalIP,omitempty"`
	// AllowedLocationIPs is kilo.squat.ai/allowed-location-ips, raw.
	// +optional
	AllowedLocationIPs string `json:"allowedLocationIPs,omitempty"`
	// Leader is "true" when kilo.squat.ai/leader is present, whatever its
	// value: Kilo reads only its presence.
	// +optional
	Leader string `json:"leader,omitempty"`
}

// An ObservedNode is what the mesh needs to know of one Node.
type ObservedNode struct {
	// Name of the Node.
	Name string `json:"name"`
	// PodCIDRs is the Node's spec.podCIDRs.
	// +optional
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// InternalIPs are the Node's InternalIP addresses, in API order.
	// +optional
	InternalIPs []string `json:"internalIPs,omitempty"`
	// ExternalIPs are the Node's ExternalIP addresses, in API order.
	// +optional
	ExternalIPs []string `json:"externalIPs,omitempty"`
	// Location is the kilo.squat.ai/location annotation when it is present,
	// even empty, else the topology.kubernetes.io/region label: Kilo's rule.
	// +optional
	Location string `json:"location,omitempty"`
	// Ready is the status of the Node's Ready condition.
	Ready bool `json:"ready"`
	// Kilo holds the Node's Kilo annotations. Absent when it has none.
	// +optional
	Kilo *KiloAnnotations `json:"kilo,omitempty"`
	// Stale is true while the node's Kilo heartbeat
	// (kilo.squat.ai/last-seen) is missing or older than Kilo's limit of
	// two check-in periods: Kilo leaves such a node out of its topology.
	// Only its transitions are published, never the heartbeats.
	// +optional
	Stale bool `json:"stale,omitempty"`
	// StaleSince is when the node turned stale: its last heartbeat plus
	// Kilo's limit, or, for a node that never wrote a heartbeat, its
	// creation plus that limit. It is set with Stale and does not move
	// while the node stays stale.
	// +optional
	StaleSince *metav1.Time `json:"staleSince,omitempty"`
}

// A ForeignPeer is a Peer in the cluster that the inventory's owner does not
// manage.
type ForeignPeer struct {
	// Name of the Peer.
	Name string `json:"name"`
	// PublicKey of the Peer, verbatim.
	// +optional
	PublicKey string `json:"publicKey,omitempty"`
	// AllowedIPs of the Peer, verbatim, so that the owner never routes a
	// prefix that another Peer of the cluster already routes.
	// +optional
	AllowedIPs []string `json:"allowedIPs,omitempty"`
}

// NodeInventoryObservation is what a NodeInventory publishes. It changes only
// when a published field of a Node changes, never on Kilo's heartbeats.
type NodeInventoryObservation struct {
	// ObservedAt is the time of the last successful observation. It is kept
	// while the cluster cannot be reached.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// NodeCount is the number of selected Nodes.
	// +optional
	NodeCount int `json:"nodeCount,omitempty"`
	// Nodes are the selected Nodes, sorted by name.
	// +optional
	Nodes []ObservedNode `json:"nodes,omitempty"`
	// ForeignPeers are the Peers of the cluster without the owned labels,
	// sorted by name.
	// +optional
	ForeignPeers []ForeignPeer `json:"foreignPeers,omitempty"`
	// ForeignPeersIncomplete names the bound of the provider that was
	// reached while reading the cluster's foreign Peers (how many Peers,
	// or how many of their routes), e.g. "more than 16384 routes". Empty
	// when every foreign Peer is published whole. While it is set, the
	// cluster's foreign routes and keys are partly unknown: the owner must
	// not write a route into the cluster that it has not written before.
	// +optional
	ForeignPeersIncomplete string `json:"foreignPeersIncomplete,omitempty"`
	// NodesIncomplete names the bound of the provider that was reached
	// while reading the cluster's Nodes (how many Nodes, the bytes of one
	// Node, or the size of a list), e.g. "more than 5000 nodes". Empty when
	// every selected Node is published.
	// +optional
	NodesIncomplete string `json:"nodesIncomplete,omitempty"`
}

// A NodeInventorySpec defines the desired state of a NodeInventory.
type NodeInventorySpec struct {
	xpv1.ManagedResourceSpec `json:",inline"`

	ForProvider NodeInventoryParameters `json:"forProvider,omitempty"`
}

// A NodeInventoryStatus represents the observed state of a NodeInventory.
type NodeInventoryStatus struct {
	xpv1.ManagedResourceStatus `json:",inline"`

	AtProvider NodeInventoryObservation `json:"atProvider,omitempty"`
}

// A NodeInventory observes the Nodes of one member cluster, reached through
// a provider-kubernetes ProviderConfig or ClusterProviderConfig, and
// publishes the fields the mesh needs. It never changes the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="NODES",type="integer",JSONPath=".status.atProvider.nodeCount"
// +kubebuilder:printcolumn:name="OBSERVED",type="date",JSONPath=".status.atProvider.observedAt"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,kilomesh}
type NodeInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeInventorySpec   `json:"spec"`
	Status NodeInventoryStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// A NodeInventoryList is a list of NodeInventories.
type NodeInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeInventory `json:"items"`
}
