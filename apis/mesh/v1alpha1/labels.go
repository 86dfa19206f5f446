package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

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
	// AnnotationExportedMetadata is on a ServiceImport that carries the
	// labels and annotations its ServiceExport exports: a hash of them, so
	// that a change, a removal among them, is seen and written.
	AnnotationExportedMetadata = "kilomesh.io/exported-metadata"
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

// HashLen is the length of IdentityHash: the hex of IdentitySum.
const HashLen = 8

// IdentityHash is a short hash of the parts of an identity, separated so
// that ("a-b", "c") and ("a", "b-c") differ. The names and label values
// kilomesh writes end in it, so it never changes.
func IdentityHash(parts ...string) string {
	sum := IdentitySum(parts...)
	return hex.EncodeToString(sum[:])
}

// IdentitySum is IdentityHash before its hex encoding: the first bytes of
// the SHA-256 of the parts, each followed by a NUL byte.
func IdentitySum(parts ...string) [HashLen / 2]byte {
	var buf [256]byte // most identities fit: no allocation
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return [HashLen / 2]byte(sum[:HashLen/2])
}
