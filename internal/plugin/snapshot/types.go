// Package snapshot reads what kilomesh publishes in a management cluster:
// the ClusterMeshes of a namespace, the NodeInventories that observe their
// members, and the PeerSets or provider-kubernetes Objects that deliver their
// Peers. It reads with one list call per kind, whatever the number of meshes
// and members, and never reaches a member cluster itself.
package snapshot

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Names of the composed resources of a mesh (the annotation
// crossplane.io/composition-resource-name): inventory-<cluster>,
// peerset-<target> and peer-<target>-<peer>.
const (
	AnnotationCompositionResourceName = "crossplane.io/composition-resource-name"
	PrefixInventory                   = "inventory-"
	PrefixPeerSet                     = "peerset-"
	PrefixPeer                        = "peer-"
)

// LabelComposite is the label Crossplane puts on every resource a composite
// resource composes: the composite's name.
const LabelComposite = "crossplane.io/composite"

// LabelTargetCluster is the label of a composed Object: the member its Peer
// is written into.
const LabelTargetCluster = "kilomesh.io/target-cluster"

// Condition types a ClusterMesh carries: the function's, and Crossplane's.
const (
	TypeNetworksOverlap   xpv2.ConditionType = "NetworksOverlap"
	TypeClustersReachable xpv2.ConditionType = "ClustersReachable"
	TypePeersDelivered    xpv2.ConditionType = "PeersDelivered"
	TypeConverged         xpv2.ConditionType = "Converged"
	TypeReady             xpv2.ConditionType = "Ready"
	TypeSynced            xpv2.ConditionType = "Synced"
	TypeResponsive        xpv2.ConditionType = "Responsive"
)

// ConditionOrder is the order in which a mesh's conditions are shown.
var ConditionOrder = []xpv2.ConditionType{
	TypeReady, TypeSynced, TypeResponsive, TypeNetworksOverlap, TypeClustersReachable, TypePeersDelivered, TypeConverged,
}

// A ClusterMesh is the composite resource with the conditions Crossplane
// and the function set on it.
type ClusterMesh struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MeshSpec   `json:"spec"`
	Status MeshStatus `json:"status,omitempty"`
}

// MeshSpec is the spec of a ClusterMesh, with the references Crossplane
// keeps to the resources it composed.
type MeshSpec struct {
	meshv1alpha1.ClusterMeshSpec `json:",inline"`

	Crossplane struct {
		ResourceRefs []ResourceRef `json:"resourceRefs,omitempty"`
	} `json:"crossplane,omitempty"`
}

// A ResourceRef names a resource a composite resource composed.
type ResourceRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
}

// MeshStatus is the status of a ClusterMesh.
type MeshStatus struct {
	meshv1alpha1.ClusterMeshStatus `json:",inline"`

	Conditions []xpv2.Condition `json:"conditions,omitempty"`
}

// Condition returns the condition of a type, and false when it is not set.
func (m *ClusterMesh) Condition(t xpv2.ConditionType) (xpv2.Condition, bool) {
	return find(m.Status.Conditions, t)
}

// Delivery is the mesh's delivery, PeerSet when unset.
func (m *ClusterMesh) Delivery() meshv1alpha1.Delivery {
	if m.Spec.Delivery == "" {
		return meshv1alpha1.DeliveryPeerSet
	}
	return m.Spec.Delivery
}

func find(cs []xpv2.Condition, t xpv2.ConditionType) (xpv2.Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return xpv2.Condition{}, false
}

// InventoryCondition returns a condition of a NodeInventory.
func InventoryCondition(i *kubev1alpha1.NodeInventory, t xpv2.ConditionType) (xpv2.Condition, bool) {
	return find(i.Status.Conditions, t)
}

// PeerSetCondition returns a condition of a PeerSet.
func PeerSetCondition(p *kubev1alpha1.PeerSet, t xpv2.ConditionType) (xpv2.Condition, bool) {
	return find(p.Status.Conditions, t)
}

// An Object is a provider-kubernetes Object (kubernetes.m.crossplane.io)
// that holds one Peer. Its Go module is not a dependency of kilomesh: only
// the fields read here are declared.
type Object struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec struct {
		ForProvider struct {
			Manifest kilov1alpha1.Peer `json:"manifest"`
		} `json:"forProvider"`
	} `json:"spec"`
	Status struct {
		Conditions []xpv2.Condition `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

// Condition returns a condition of the Object.
func (o *Object) Condition(t xpv2.ConditionType) (xpv2.Condition, bool) {
	return find(o.Status.Conditions, t)
}

// A Mesh is one ClusterMesh with the resources it composed.
type Mesh struct {
	ClusterMesh

	// Inventories by member name.
	Inventories map[string]*kubev1alpha1.NodeInventory
	// PeerSets by target member name.
	PeerSets map[string]*kubev1alpha1.PeerSet
	// SegmentSets by object name: the Peers the PeerSets of a mesh in the
	// shared form reference.
	SegmentSets map[string]*kubev1alpha1.SegmentSet
	// Objects by target member name, sorted by name.
	Objects map[string][]*Object
}

// A Snapshot is what one read of a namespace found.
type Snapshot struct {
	// Namespace that was read.
	Namespace string
	// Now is the management cluster's clock when it answered (its Date
	// header), or the injected clock.
	Now time.Time
	// LocalNow is this machine's clock when the answer came.
	LocalNow time.Time
	// Meshes are the ClusterMeshes asked for, sorted by name.
	Meshes []*Mesh
	// All holds every ClusterMesh of the namespace, by name.
	All map[string]*ClusterMesh
	// Inventories are every NodeInventory of the namespace: the function
	// finds the meshes that share a member through their labels.
	Inventories []*kubev1alpha1.NodeInventory
}

// Keeps counts the Peers a PeerSet of the mesh keeps: its own, and those of
// the SegmentSets it references. A reference that cannot be resolved
// counts the set's own Peers only.
func (m *Mesh) Keeps(ps *kubev1alpha1.PeerSet) int {
	peers, err := kubev1alpha1.ResolvePeers(&ps.Spec.ForProvider, func(name string) (*kubev1alpha1.SegmentSet, error) {
		return m.SegmentSets[name], nil
	})
	if err != nil {
		return len(ps.Spec.ForProvider.Peers)
	}
	return len(peers)
}
