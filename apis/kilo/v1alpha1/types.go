// Package v1alpha1 mirrors the Peer type of Kilo (kilo.squat.ai/v1alpha1).
//
// Kilo's own module is not a dependency of kilomesh: the five structs below
// follow Kilo's published schema field for field, and Validate applies the
// same rules Kilo's agent applies before it programs a peer. Kilo silently
// ignores a Peer that fails them, so kilomesh never renders one.
//
// +kubebuilder:object:generate=true
// +groupName=kilo.squat.ai
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and kind of Kilo's Peer.
const (
	Group   = "kilo.squat.ai"
	Version = "v1alpha1"
	Kind    = "Peer"
)

// GroupVersion is the API version of Kilo's Peer.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// APIVersion is the apiVersion string of a Peer object.
var APIVersion = GroupVersion.String()

// A Peer is a WireGuard peer outside the Kilo mesh of a cluster that every
// segment leader of that cluster connects to. Peers are cluster-scoped.
//
// The CEL rules below are the checks of Validate, expressed in the schema so
// that a member cluster (and `crossplane resource validate`) rejects what Kilo
// would silently ignore.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=kilo
// +kubebuilder:printcolumn:name="KEY",type="string",JSONPath=".spec.publicKey"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type Peer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PeerSpec `json:"spec"`
}

// A PeerSpec configures the WireGuard side of a Peer.
type PeerSpec struct {
	// AllowedIPs are the networks routed to this peer, as CIDRs.
	// +kubebuilder:validation:MaxItems=4096
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",message="every allowedIPs entry must be a CIDR"
	AllowedIPs []string `json:"allowedIPs"`

	// Endpoint is the initial address of the peer. A Peer without one is
	// roaming: the other side learns its address from the first handshake.
	// +optional
	Endpoint *PeerEndpoint `json:"endpoint,omitempty"`

	// PersistentKeepalive is the interval in seconds at which keepalive
	// packets are sent to the peer; 0 disables them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PersistentKeepalive int `json:"persistentKeepalive,omitempty"`

	// PresharedKey is an optional symmetric key for the peer.
	// +optional
	PresharedKey string `json:"presharedKey,omitempty"`

	// PublicKey is the WireGuard public key of the peer: standard base64 of
	// exactly 32 bytes.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{43}=$`
	PublicKey string `json:"publicKey"`
}

// A PeerEndpoint is the address and UDP port of a peer.
type PeerEndpoint struct {
	// DNSOrIP is the host of the endpoint.
	DNSOrIP DNSOrIP `json:"dnsOrIP"`

	// Port is the UDP port of the endpoint.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port uint32 `json:"port"`
}

// A DNSOrIP is a DNS name or an IP address. When both are set Kilo prefers
// the IP address.
//
// +kubebuilder:validation:XValidation:rule="has(self.ip) || has(self.dns)",message="an endpoint needs ip or dns"
type DNSOrIP struct {
	// DNS is an RFC 1123 subdomain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DNS string `json:"dns,omitempty"`

	// IP is an IPv4 or IPv6 address.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="ip must be an IP address"
	IP string `json:"ip,omitempty"`
}

// +kubebuilder:object:root=true

// A PeerList is a list of Peers.
type PeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Peer `json:"items"`
}
