// Package v1alpha1 holds the ClusterMesh API (kilomesh.io/v1alpha1).
//
// ClusterMesh is a Crossplane composite resource: the schema of its
// CompositeResourceDefinition (package/xrd.yaml) is generated from these types
// by `make generate`.
//
// +kubebuilder:object:generate=true
// +groupName=kilomesh.io
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and kind of the ClusterMesh.
const (
	Group   = "kilomesh.io"
	Version = "v1alpha1"
	Kind    = "ClusterMesh"
)

// GroupVersion is the API version of the ClusterMesh.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// A Granularity says how the nodes of a member cluster map to Kilo Peers.
// +kubebuilder:validation:Enum=Auto;Node;Location
type Granularity string

// Granularities.
const (
	// GranularityAuto reads each cluster's Kilo granularity from its nodes'
	// kilo.squat.ai/granularity annotation.
	GranularityAuto Granularity = "Auto"
	// GranularityNode makes every node its own Peer (Kilo's
	// --mesh-granularity=full).
	GranularityNode Granularity = "Node"
	// GranularityLocation makes every location one Peer, led by the node
	// that carries a WireGuard IP (Kilo's --mesh-granularity=location).
	GranularityLocation Granularity = "Location"
)

// A Delivery says how Peers reach the member clusters.
// +kubebuilder:validation:Enum=Objects;PeerSet
type Delivery string

// Deliveries.
const (
	// DeliveryObjects composes one provider-kubernetes Object per Peer.
	// Every Object's status changes are watch events of the mesh, so it
	// suits small meshes only.
	DeliveryObjects Delivery = "Objects"
	// DeliveryPeerSet composes one provider-kilomesh PeerSet per member
	// cluster, the default.
	DeliveryPeerSet Delivery = "PeerSet"
)

// A CIDR is an IPv4 or IPv6 network in canonical form, e.g. 10.1.0.0/16.
// +kubebuilder:validation:MaxLength=43
// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="must be a network in CIDR form with no host bits set, e.g. 10.1.0.0/16"
type CIDR string

// The kinds of provider-kubernetes config a member may be reached through.
const (
	// KindProviderConfig lives in the mesh's own namespace.
	KindProviderConfig = "ProviderConfig"
	// KindClusterProviderConfig is cluster-scoped, an administrator's
	// object; delivery: Objects takes no other.
	KindClusterProviderConfig = "ClusterProviderConfig"
)

// A ProviderConfigReference names the provider-kubernetes ProviderConfig
// (in the mesh's namespace) or ClusterProviderConfig that holds the
// credentials of a member cluster. provider-kubernetes uses it to write
// Peers, provider-kilomesh to watch Nodes.
type ProviderConfigReference struct {
	// Kind of the config. A ProviderConfig lives in the mesh's own
	// namespace; a ClusterProviderConfig can be named from any namespace, so
	// an administrator should limit who may name it (docs/security.md).
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	// +kubebuilder:default=ProviderConfig
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the config.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// A Cluster is one member of the mesh: a Kubernetes cluster running Kilo.
type Cluster struct {
	// Name identifies the cluster within the mesh. It appears in Peer names
	// and labels, so it is a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ProviderConfigRef names the credentials of the cluster.
	ProviderConfigRef ProviderConfigReference `json:"providerConfigRef"`

	// PodCIDRs are the cluster's pod networks (two for dual-stack). Every
	// node's pod CIDRs must lie inside them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	PodCIDRs []CIDR `json:"podCIDRs"`

	// WireguardCIDR is the network of the cluster's Kilo interface (Kilo's
	// --subnet, 10.4.0.0/16 by default). Every leader's WireGuard IP must lie
	// inside it.
	WireguardCIDR CIDR `json:"wireguardCIDR"`

	// WireguardPort is the UDP port Kilo listens on, used to build endpoints
	// from node ExternalIPs.
	// +kubebuilder:default=51820
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	WireguardPort *int32 `json:"wireguardPort,omitempty"`

	// ServiceCIDR is the cluster's Service network. It is routed through one
	// Peer of the cluster, the anchor.
	// +optional
	ServiceCIDR *CIDR `json:"serviceCIDR,omitempty"`

	// AdditionalCIDRs are further networks reachable through the cluster,
	// routed through the anchor Peer like the ServiceCIDR. A node's
	// kilo.squat.ai/allowed-location-ips are routed to its location only
	// inside them.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	AdditionalCIDRs []CIDR `json:"additionalCIDRs,omitempty"`

	// NodeCIDRs are the networks the cluster's nodes have their internal
	// addresses in. A node's internal address (Kilo's internal-ip) is routed
	// to the other clusters only inside them; with none declared, no node
	// address is routed.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	NodeCIDRs []CIDR `json:"nodeCIDRs,omitempty"`

	// PersistentKeepalive, in seconds, is written into the
	// persistentKeepalive of every Peer of the mesh (the largest value of
	// any member applies). With Kilo, a Peer's keepalive sends no packet: it
	// lets the receiving nodes keep the address they learned from the
	// Peer's handshakes (roaming) instead of going back to the Peer's
	// endpoint at every resync, which a member behind NAT needs. What keeps
	// a NAT mapping open is the kilo.squat.ai/persistent-keepalive
	// annotation on that member's own leaders: Kilo sends keepalives from a
	// node at the interval its own annotation says.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	PersistentKeepalive *int32 `json:"persistentKeepalive,omitempty"`

	// NodeSelector limits the nodes of the cluster that join the mesh. Empty
	// selects every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// A ClusterMeshSpec declares the member clusters of a mesh.
// +kubebuilder:validation:XValidation:rule="!has(self.delivery) || self.delivery != 'Objects' || self.clusters.all(c, has(c.providerConfigRef.kind) && c.providerConfigRef.kind == 'ClusterProviderConfig')",message="delivery: Objects hands each member's config to provider-kubernetes, which does not check what a namespaced ProviderConfig may make it do: name ClusterProviderConfigs, or use delivery: PeerSet"
type ClusterMeshSpec struct {
	// Clusters are the members of the mesh. Every member receives a Peer for
	// every segment of every other member.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d.name == c.name))",message="every cluster needs a name of its own"
	Clusters []Cluster `json:"clusters"`

	// Granularity maps nodes to Peers: Node (one Peer per node), Location
	// (one Peer per location, led by its leader) or Auto (per cluster, from
	// its nodes' kilo.squat.ai/granularity annotation).
	// +kubebuilder:default=Auto
	// +optional
	Granularity Granularity `json:"granularity,omitempty"`

	// Delivery says how Peers reach member clusters: PeerSet (one
	// provider-kilomesh PeerSet per member, the default) or Objects (one
	// provider-kubernetes Object per Peer, for small meshes, with every
	// member reached through a ClusterProviderConfig: provider-kubernetes
	// does not check what a tenant's ProviderConfig asks of it). It can be
	// changed on a live mesh: the new delivery takes the Peers over and none
	// is deleted on the way.
	// +kubebuilder:default=PeerSet
	// +optional
	Delivery Delivery `json:"delivery,omitempty"`

	// AdvertiseNodeIPs routes every node's internal address (Kilo's
	// internal-ip, when inside the cluster's nodeCIDRs) through the mesh, as
	// a host route, besides its pod CIDRs.
	// +kubebuilder:default=true
	// +optional
	AdvertiseNodeIPs *bool `json:"advertiseNodeIPs,omitempty"`

	// Services shares Services between the members by the Multi-Cluster
	// Services API, in the namespaces it names. Unset, nothing is shared.
	// +optional
	Services *Services `json:"services,omitempty"`
}

// A SkippedNode is a node left out of the mesh, and why.
type SkippedNode struct {
	// Node is the name of the node.
	Node string `json:"node"`
	// Reason is one of the skip reasons of the troubleshooting guide, e.g.
	// NodeNoPublicKey.
	Reason string `json:"reason"`
	// Message says what is wrong in words.
	Message string `json:"message"`
}

// A PeerConflict is a Peer of the mesh that was not written into a member
// cluster because a Peer kilomesh does not own is in the way.
type PeerConflict struct {
	// Peer is the name of the Peer the mesh would have written.
	Peer string `json:"peer"`
	// Reason is PeerNameConflict, PeerKeyConflict or PeerRouteConflict.
	Reason string `json:"reason"`
	// Message names the Peer in the way.
	Message string `json:"message"`
}

// A ClusterStatus reports one member of the mesh.
type ClusterStatus struct {
	// Name of the member.
	Name string `json:"name"`
	// Reachable is true while the member's nodes are observed.
	Reachable bool `json:"reachable"`
	// LastObserved is when the member's nodes were last observed.
	// +optional
	LastObserved *metav1.Time `json:"lastObserved,omitempty"`
	// UnreachableSince is when the member stopped answering. The mesh keeps
	// using its last observed nodes meanwhile.
	// +optional
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
	// Nodes observed in the member.
	Nodes int `json:"nodes"`
	// Segments of the member: WireGuard identities that become Peers.
	Segments int `json:"segments"`
	// Peers of this member written into the other members, counted per
	// member they are written into.
	Peers int `json:"peers"`
	// SkippedNodes counts the nodes of the member left out of the mesh.
	SkippedNodes int `json:"skippedNodes"`
	// Skipped lists up to 20 skipped nodes; MoreSkipped counts the rest.
	// +optional
	Skipped []SkippedNode `json:"skipped,omitempty"`
	// MoreSkipped counts the skipped nodes not listed in Skipped.
	// +optional
	MoreSkipped int `json:"moreSkipped,omitempty"`
	// Conflicts lists up to 20 Peers not written into this member as
	// planned because a Peer the mesh does not own is in the way;
	// MoreConflicts counts the rest.
	// +optional
	Conflicts []PeerConflict `json:"conflicts,omitempty"`
	// MoreConflicts counts the conflicts not listed in Conflicts.
	// +optional
	MoreConflicts int `json:"moreConflicts,omitempty"`
	// Message says why the member cannot be observed, or why its Peers
	// cannot be written into it.
	// +optional
	Message string `json:"message,omitempty"`
	// Handshakes says how many of the Peers written into this member its
	// segment leaders have completed a WireGuard handshake with, as Kilo
	// records them (kilo.squat.ai/discovered-endpoints). Kilo records only
	// Peers with a keepalive, so a Peer without one is never counted; a
	// handshake recorded once stays recorded, so this is evidence that the
	// tunnel worked, not that it works now. Absent while the member's
	// leaders record no handshake at all.
	// +optional
	Handshakes *Handshakes `json:"handshakes,omitempty"`
}

// Handshakes counts the Peers of a member that WireGuard shook hands with.
type Handshakes struct {
	// Seen is how many Peers written into the member its leaders recorded
	// a handshake with.
	Seen int `json:"seen"`
	// Peers is how many Peers with a keepalive are written into the
	// member: those Kilo would record.
	Peers int `json:"peers"`
}

// A ClusterMeshStatus reports what the mesh produced.
type ClusterMeshStatus struct {
	// ClusterCount is the number of members.
	ClusterCount int `json:"clusterCount,omitempty"`
	// PeerCount is the number of Peers written across all members.
	PeerCount int `json:"peerCount,omitempty"`
	// SkippedNodeCount is the number of nodes left out across all members.
	SkippedNodeCount int `json:"skippedNodeCount,omitempty"`
	// Clusters reports every member, in the order of spec.clusters.
	// +optional
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// A ClusterMesh joins the Kilo WireGuard networks of several Kubernetes
// clusters into one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=kilomesh
// +kubebuilder:printcolumn:name="CLUSTERS",type="integer",JSONPath=".status.clusterCount"
// +kubebuilder:printcolumn:name="PEERS",type="integer",JSONPath=".status.peerCount"
// +kubebuilder:printcolumn:name="SKIPPED",type="integer",JSONPath=".status.skippedNodeCount"
// +kubebuilder:subresource:status
type ClusterMesh struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterMeshSpec   `json:"spec"`
	Status ClusterMeshStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// A ClusterMeshList is a list of ClusterMeshes.
type ClusterMeshList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterMesh `json:"items"`
}
