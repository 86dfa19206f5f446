package v1alpha1

// Node annotations and labels Kilo reads or writes, and the one this project
// adds. They are the whole interface between a Kilo agent and kilomesh.
const (
	// AnnotationKey is the node's WireGuard public key, written by Kilo.
	AnnotationKey = "kilo.squat.ai/key"
	// AnnotationWireguardIP is the node's address on Kilo's interface, as
	// <ip>/<prefix>, written by Kilo on segment leaders only.
	AnnotationWireguardIP = "kilo.squat.ai/wireguard-ip"
	// AnnotationEndpoint is the endpoint Kilo detected, as host:port.
	AnnotationEndpoint = "kilo.squat.ai/endpoint"
	// AnnotationInternalIP is the node's private address as a CIDR, or
	// empty.
	AnnotationInternalIP = "kilo.squat.ai/internal-ip"
	// AnnotationLastSeen is Kilo's heartbeat (unix seconds, every ~30 s).
	AnnotationLastSeen = "kilo.squat.ai/last-seen"
	// AnnotationGranularity is Kilo's mesh granularity: location or full.
	AnnotationGranularity = "kilo.squat.ai/granularity"
	// AnnotationDiscoveredEndpoints is a JSON map of public key to the
	// endpoint WireGuard learned from handshakes.
	AnnotationDiscoveredEndpoints = "kilo.squat.ai/discovered-endpoints"
	// AnnotationForceEndpoint is a user-set endpoint, host:port.
	AnnotationForceEndpoint = "kilo.squat.ai/force-endpoint"
	// AnnotationLocation is a user-set location (segment) name.
	AnnotationLocation = "kilo.squat.ai/location"
	// AnnotationPersistentKeepalive is a user-set keepalive in seconds.
	AnnotationPersistentKeepalive = "kilo.squat.ai/persistent-keepalive"
	// AnnotationForceInternalIP is a user-set internal address as a CIDR,
	// overriding internal-ip; "-" or an empty value means the node has
	// none.
	AnnotationForceInternalIP = "kilo.squat.ai/force-internal-ip"
	// AnnotationAllowedLocationIPs is a user-set, comma-separated list of
	// CIDRs reachable through the node's location (a printer, a VM network).
	AnnotationAllowedLocationIPs = "kilo.squat.ai/allowed-location-ips"
	// AnnotationLeader asks Kilo to prefer the node as its segment's leader;
	// only its presence counts, not its value.
	AnnotationLeader = "kilo.squat.ai/leader"
	// AnnotationClustermeshEndpoint is a user-set endpoint that only other
	// clusters of a kilomesh ClusterMesh use; Kilo ignores it.
	AnnotationClustermeshEndpoint = "kilo.squat.ai/clustermesh-endpoint"

	// LabelRegion is the well-known label Kilo falls back to for the
	// location of a node.
	LabelRegion = "topology.kubernetes.io/region"

	// GranularityFull is Kilo's granularity of one segment per node.
	GranularityFull = "full"
	// GranularityLocation is Kilo's granularity of one segment per location.
	GranularityLocation = "location"
)
