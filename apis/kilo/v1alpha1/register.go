package v1alpha1

import "sigs.k8s.io/controller-runtime/pkg/scheme"

var (
	// SchemeBuilder registers Kilo's Peer with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds Kilo's Peer to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Peer{}, &PeerList{})
}
