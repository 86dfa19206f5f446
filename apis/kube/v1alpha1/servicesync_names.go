package v1alpha1

import (
	"strings"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// maxReadableService is how much of a Service's name the name of its
// derived Service keeps: "mcs-", 50 characters, "-" and the hash fit a
// DNS-1035 label of 63.
const maxReadableService = 50

// DerivedName is the name of the Service a ServiceSync makes behind the
// import of Service name of namespace, for the mesh owner (its namespace
// and name): a DNS-1035 label unique to the mesh, the namespace and the
// Service. docs/services.md documents it; it never changes.
func DerivedName(owner [2]string, namespace, name string) string {
	readable := name
	if len(readable) > maxReadableService {
		readable = strings.TrimRight(readable[:maxReadableService], "-")
	}
	return "mcs-" + readable + "-" + meshv1alpha1.IdentityHash(owner[0], owner[1], namespace, name)
}

// SliceName is the name of the EndpointSlice of one exporter, by its
// cluster ID, of the import whose derived Service is derived.
func SliceName(derived, clusterID string) string {
	return derived + "-" + meshv1alpha1.IdentityHash(clusterID)
}
