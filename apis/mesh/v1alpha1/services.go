package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// A Namespace is the name of a Kubernetes namespace.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type Namespace string

// Services shares Kubernetes Services between the members of a mesh by the
// Multi-Cluster Services API (KEP-1645, multicluster.x-k8s.io/v1beta1): the
// members form one ClusterSet, a ServiceExport in one member makes its
// Service a ServiceImport in every other member, and each member's
// kube-proxy and CoreDNS answer it. Services are shared only when this is
// set.
type Services struct {
	// Namespaces may export and import Services. A namespace is the same
	// namespace in every member (MCS's namespace sameness): a ServiceExport
	// in any other namespace is not exported, and nothing is imported into
	// any other namespace.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Namespaces []Namespace `json:"namespaces"`

	// WithdrawAfter is how long the endpoints of a member that cannot be
	// reached stay imported into the other members. Unset (the default),
	// they stay until the member answers again, as its Peers do: an API
	// server that does not answer says nothing of the pods behind it, which
	// usually still serve.
	// +optional
	WithdrawAfter *metav1.Duration `json:"withdrawAfter,omitempty"`
}
