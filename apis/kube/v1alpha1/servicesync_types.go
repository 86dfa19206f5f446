package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	xpv1 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// ServiceSyncKind is the kind of a ServiceSync.
const ServiceSyncKind = "ServiceSync"

// ServiceSyncGroupVersionKind is the GroupVersionKind of a ServiceSync.
var ServiceSyncGroupVersionKind = GroupVersion.WithKind(ServiceSyncKind)

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &ServiceSync{}, &ServiceSyncList{})
		return nil
	})
}

// Bounds of a ServiceSync.
const (
	// MaxServiceNamespaces is the most namespaces a ServiceSync shares.
	MaxServiceNamespaces = 64
	// MaxServiceSources is the most members a ServiceSync imports from.
	MaxServiceSources = 63
	// MaxServiceProblems is the most problems its status lists.
	MaxServiceProblems = 20
)

// A ServiceSource is another member of the ClusterSet, whose exported
// Services a ServiceSync imports.
type ServiceSource struct {
	// Name of the member in its mesh.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// ClusterID is the member's cluster ID in the ClusterSet: the value of
	// the multicluster.kubernetes.io/source-cluster label of the
	// EndpointSlices imported from it, and its name in per-endpoint DNS
	// records.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// ProviderConfigRef names the member's provider-kubernetes config, a
	// ProviderConfig in the ServiceSync's namespace or a
	// ClusterProviderConfig.
	ProviderConfigRef xpv1.ProviderConfigReference `json:"providerConfigRef"`
	// Networks are the member's networks that endpoints may lie in: its pod
	// networks, and its node networks when node addresses are routed. An
	// endpoint elsewhere is not imported.
	// +kubebuilder:validation:MaxItems=136
	// +optional
	Networks []string `json:"networks,omitempty"`
}

// ServiceSyncParameters say what one member shares.
type ServiceSyncParameters struct {
	// Selector holds the labels that mark the objects this ServiceSync owns
	// in its member (ServiceImports, the Services behind them, their
	// EndpointSlices). It must name a mesh (kilomesh.io/mesh); the provider
	// adds app.kubernetes.io/managed-by: kilomesh and
	// kilomesh.io/mesh-namespace: <the ServiceSync's own namespace>.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	Selector map[string]string `json:"selector"`
	// ClusterID is this member's cluster ID in the ClusterSet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterID string `json:"clusterID"`
	// Namespaces that export and import, each a DNS label (an empty one
	// would mean every namespace to a watch).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces"`
	// Networks are this member's networks that the endpoints of its own
	// exports may lie in; see ServiceSource.
	// +kubebuilder:validation:MaxItems=136
	// +optional
	Networks []string `json:"networks,omitempty"`
	// Family is the mesh's address family: IPv4 or IPv6. Endpoints of the
	// other family are not imported.
	// +kubebuilder:validation:Enum=IPv4;IPv6
	Family string `json:"family"`
	// Sources are the other members, whose exports are imported here.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=63
	// +optional
	Sources []ServiceSource `json:"sources,omitempty"`
	// WithdrawAfter is how long the endpoints of a source that cannot be
	// reached stay imported. Unset, they stay until it answers again.
	// +optional
	WithdrawAfter *metav1.Duration `json:"withdrawAfter,omitempty"`
}

// A ServiceProblem is an export that is not imported as it is, or an
// import the ServiceSync cannot write.
type ServiceProblem struct {
	// Service is namespace/name.
	Service string `json:"service"`
	// Reason, e.g. ImportNameConflict.
	Reason string `json:"reason"`
	// Message says what is wrong.
	Message string `json:"message"`
}

// Reasons of a ServiceProblem.
const (
	// ReasonImportNameConflict: an object the ServiceSync does not own
	// holds the name of the ServiceImport, or of the Service behind it.
	ReasonImportNameConflict = "ImportNameConflict"
	// ReasonNoNamespace: the namespace does not exist in this member.
	ReasonNoNamespace = "NamespaceMissing"
	// ReasonImportInvalid: the member's API server refused the import.
	ReasonImportInvalid = "ImportInvalid"
)

// ServiceSyncObservation counts what a ServiceSync shares. It changes when
// exports come and go, never with endpoints.
type ServiceSyncObservation struct {
	// Exports is how many Services this member exports.
	Exports int `json:"exports"`
	// Imports is how many Services are imported into this member.
	Imports int `json:"imports"`
	// Refused counts the exports of this member that are not exported as
	// they are: invalid, losing something in a conflict (their type, a port,
	// a property another export won), or with endpoints that cannot be
	// routed. Each says why in its ServiceExport's conditions.
	Refused int `json:"refused"`
	// Unreachable lists the sources that cannot be read, with since when;
	// their endpoints stay imported (see withdrawAfter).
	// +optional
	Unreachable []UnreachableSource `json:"unreachable,omitempty"`
	// Problems are imports that cannot be written: the first 20.
	// +optional
	Problems []ServiceProblem `json:"problems,omitempty"`
	// FirstSeen records when the provider first saw each export of a
	// Service imported here, by exporter. Exporters of a Service are
	// ordered by it (the first seen wins a conflict), never by a time an
	// exporter claims, such as its ServiceExport's creationTimestamp.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	FirstSeen []ExportSeen `json:"firstSeen,omitempty"`
}

// MaxFirstSeen is the most exports a ServiceSync's status records as
// seen; exporters past it are ordered as first seen at the observation
// that meets them, then by cluster ID.
const MaxFirstSeen = 1024

// ExportSeen is when the provider first saw one exporter's export of a
// Service.
type ExportSeen struct {
	// Service is namespace/name.
	// +kubebuilder:validation:MaxLength=127
	Service string `json:"service"`
	// Cluster is the exporter's cluster ID.
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// Since when the provider has seen the export.
	Since metav1.Time `json:"since"`
}

// An UnreachableSource is a source whose exports cannot be read.
type UnreachableSource struct {
	// Name of the source.
	Name string `json:"name"`
	// Since when it cannot be read.
	Since metav1.Time `json:"since"`
}

// A ServiceSyncSpec defines the desired state of a ServiceSync.
type ServiceSyncSpec struct {
	xpv1.ManagedResourceSpec `json:",inline"`
	ForProvider              ServiceSyncParameters `json:"forProvider"`
}

// A ServiceSyncStatus represents the observed state of a ServiceSync.
type ServiceSyncStatus struct {
	xpv1.ManagedResourceStatus `json:",inline"`
	AtProvider                 ServiceSyncObservation `json:"atProvider,omitempty"`
}

// A ServiceSync keeps one member of a ClusterSet in step with the others,
// by the Multi-Cluster Services API: for every Service exported (with a
// ServiceExport) by another member in a shared namespace, it keeps a
// ServiceImport in this member, a Service without a selector whose
// ClusterIP is the import's ClusterSet IP, and EndpointSlices of the
// exporters' ready endpoints; and it writes the conditions of this
// member's own ServiceExports. It changes only objects that carry its
// selector's labels.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="EXPORTS",type="integer",JSONPath=".status.atProvider.exports"
// +kubebuilder:printcolumn:name="IMPORTS",type="integer",JSONPath=".status.atProvider.imports"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,kilomesh}
type ServiceSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceSyncSpec   `json:"spec"`
	Status ServiceSyncStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// A ServiceSyncList is a list of ServiceSyncs.
type ServiceSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ServiceSync `json:"items"`
}
