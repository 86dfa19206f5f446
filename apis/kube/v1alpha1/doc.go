// Package v1alpha1 holds the managed resources of provider-kilomesh
// (kube.kilomesh.io/v1alpha1), NodeInventory and PeerSet, and SegmentSet,
// the Peers several PeerSets share.
//
// They are the contract between function-kilomesh, which composes them, and
// provider-kilomesh, which reconciles them.
//
// +kubebuilder:object:generate=true
// +groupName=kube.kilomesh.io
// +versionName=v1alpha1
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and version of the provider's managed resources.
const (
	Group   = "kube.kilomesh.io"
	Version = "v1alpha1"
)

// Kinds of the provider's managed resources.
const (
	NodeInventoryKind = "NodeInventory"
	PeerSetKind       = "PeerSet"
	SegmentSetKind    = "SegmentSet"
)

var (
	// GroupVersion is the API version of the provider's managed resources.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers the provider's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the provider's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// GroupVersionKinds of the provider's managed resources.
var (
	NodeInventoryGroupVersionKind = GroupVersion.WithKind(NodeInventoryKind)
	PeerSetGroupVersionKind       = GroupVersion.WithKind(PeerSetKind)
	SegmentSetGroupVersionKind    = GroupVersion.WithKind(SegmentSetKind)
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodeInventory{}, &NodeInventoryList{}, &PeerSet{}, &PeerSetList{}, &SegmentSet{}, &SegmentSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
