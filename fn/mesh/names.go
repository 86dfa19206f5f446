package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

const (
	maxNameLen       = 253 // a DNS-1123 subdomain
	maxLabelValueLen = 63
	hashLen          = 8
)

// identityHash is a short hash of the parts of an identity, separated so
// that ("a-b", "c") and ("a", "b-c") differ.
func identityHash(parts ...string) string {
	sum := identitySum(parts...)
	return hex.EncodeToString(sum[:])
}

// identitySum is identityHash before its hex encoding: the first bytes of
// the SHA-256 of the parts, each followed by a NUL byte.
func identitySum(parts ...string) [hashLen / 2]byte {
	var buf [256]byte // most identities fit: no allocation
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return [hashLen / 2]byte(sum[:hashLen/2])
}

// PeerName is the name of the Peer of a segment: readable, unique across
// meshes, namespaces and clusters, and a DNS-1123 subdomain of at most 253
// characters. It always ends in a hash of the whole identity, because the
// readable part alone is ambiguous (names contain dashes) and may be cut.
func PeerName(namespace, mesh, cluster, leader string) string {
	sum := identitySum(namespace, mesh, cluster, leader)
	var b [1 + hashLen]byte
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

// LabelValue fits a name into a label value: names of up to 63 characters
// are kept, longer ones are cut and end in a hash of the whole name.
func LabelValue(s string) string {
	if len(s) <= maxLabelValueLen {
		return s
	}
	suffix := "-" + identityHash(s)
	return strings.TrimRight(s[:maxLabelValueLen-len(suffix)], "-.") + suffix
}

// OwnedLabels are the labels that mark the Peers of one mesh in every member
// cluster. The mesh changes and deletes only Peers that carry all of them.
func OwnedLabels(namespace, mesh string) map[string]string {
	return map[string]string{
		meshv1alpha1.LabelManagedBy:     meshv1alpha1.ManagedByValue,
		meshv1alpha1.LabelMeshNamespace: LabelValue(namespace),
		meshv1alpha1.LabelMesh:          LabelValue(mesh),
	}
}

// peerLabels are the labels of every Peer of one source cluster.
func peerLabels(namespace, mesh, cluster string) map[string]string {
	l := OwnedLabels(namespace, mesh)
	l[meshv1alpha1.LabelSourceCluster] = LabelValue(cluster)
	return l
}

// MemberID identifies a member cluster of the meshes of a namespace: the
// same name reached through the same credentials is the same cluster (a
// shared hub), whichever mesh declares it. It is a label value.
func MemberID(namespace string, c meshv1alpha1.Cluster) string {
	return identityHash(namespace, kindOrDefault(c.ProviderConfigRef.Kind), c.ProviderConfigRef.Name, c.Name)
}
