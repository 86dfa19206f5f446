package mesh

import (
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

const maxNameLen = 253 // a DNS-1123 subdomain

// PeerName is the name of the Peer of a segment: readable, unique across
// meshes, namespaces and clusters, and a DNS-1123 subdomain of at most 253
// characters. It always ends in a hash of the whole identity, because the
// readable part alone is ambiguous (names contain dashes) and may be cut.
func PeerName(namespace, mesh, cluster, leader string) string {
	sum := meshv1alpha1.IdentitySum(namespace, mesh, cluster, leader)
	var b [1 + meshv1alpha1.HashLen]byte
	b[0] = '-'
	hex.Encode(b[1:], sum[:])
	suffix := string(b[:])
	readable := mesh + "-" + cluster + "-" + leader
	if len(readable) > maxNameLen-len(suffix) {
		readable = readable[:maxNameLen-len(suffix)]
	}
	// A DNS-1123 subdomain has no empty label and no label that starts or
	// ends with a dash; the readable part is made of such names, so only
	// its cut end can break that.
	name := strings.TrimRight(readable, "-.") + suffix
	if !isSubdomain(name) {
		// Only names that never came from an API server get here.
		return "peer" + suffix
	}
	return name
}

// isSubdomain is len(validation.IsDNS1123Subdomain(s)) == 0 without its
// regular expression, which took most of the time of naming a Peer: at most
// 253 characters, in labels of lower-case letters, digits and dashes that
// start and end with a letter or a digit.
func isSubdomain(s string) bool {
	if len(s) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	label := 0 // bytes of the current label so far
	for i := range len(s) {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			label++
		case c == '-' && label > 0:
			label++
		case c == '.' && label > 0 && s[i-1] != '-':
			label = 0
		default:
			return false
		}
	}
	return label > 0 && s[len(s)-1] != '-'
}

// OwnedLabels are the labels that mark the Peers of one mesh in every member
// cluster. The mesh changes and deletes only Peers that carry all of them.
func OwnedLabels(namespace, mesh string) map[string]string {
	return map[string]string{
		meshv1alpha1.LabelManagedBy:     meshv1alpha1.ManagedByValue,
		meshv1alpha1.LabelMeshNamespace: meshv1alpha1.LabelValue(namespace),
		meshv1alpha1.LabelMesh:          meshv1alpha1.LabelValue(mesh),
	}
}

// peerLabels are the labels of every Peer of one source cluster.
func peerLabels(namespace, mesh, cluster string) map[string]string {
	l := OwnedLabels(namespace, mesh)
	l[meshv1alpha1.LabelSourceCluster] = meshv1alpha1.LabelValue(cluster)
	return l
}

// MemberID identifies a member cluster of the meshes of a namespace: the
// same name reached through the same credentials is the same cluster (a
// shared hub), whichever mesh declares it. It is a label value.
func MemberID(namespace string, c meshv1alpha1.Cluster) string {
	return meshv1alpha1.IdentityHash(namespace, kindOrDefault(c.ProviderConfigRef.Kind), c.ProviderConfigRef.Name, c.Name)
}
