package v1alpha1

import "strings"

// Labels on every Peer kilomesh writes. The project changes or deletes only
// Peers that carry the managed-by label and the labels of their mesh.
const (
	// LabelManagedBy marks a Peer as written by kilomesh.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "kilomesh"
	// LabelMeshNamespace is the namespace of the ClusterMesh.
	LabelMeshNamespace = "kilomesh.io/mesh-namespace"
	// LabelMesh is the name of the ClusterMesh, or a hashed form of it when
	// longer than a label value may be.
	LabelMesh = "kilomesh.io/mesh"
	// LabelSourceCluster is the member cluster the Peer stands for.
	LabelSourceCluster = "kilomesh.io/source-cluster"
	// LabelMember marks a composed NodeInventory with the member cluster it
	// observes (a hash of its name and credentials), so that meshes sharing
	// a member find each other.
	LabelMember = "kilomesh.io/member"
	// AnnotationMeshName is the name of the ClusterMesh that composed a
	// NodeInventory.
	AnnotationMeshName = "kilomesh.io/mesh-name"
)

// maxLabelValueLen is the longest label value Kubernetes accepts.
const maxLabelValueLen = 63

// LabelValue fits a name into a label value: names of up to 63 characters
// are kept, longer ones are cut and end in a hash of the whole name.
func LabelValue(s string) string {
	if len(s) <= maxLabelValueLen {
		return s
	}
	suffix := "-" + IdentityHash(s)
	return strings.TrimRight(s[:maxLabelValueLen-len(suffix)], "-.") + suffix
}
