package mesh

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Defaults of the ClusterMesh spec. The XRD applies them too; the planner
// applies them again so that it gives the same answer for a spec that did
// not pass through an API server (a dry run without --xrd).
const (
	DefaultWireguardPort = 51820
	// RoamingKeepalive is the least keepalive of a Peer without an
	// endpoint: Kilo forgets a learned endpoint at resync when the keepalive
	// is 0.
	RoamingKeepalive = 25
)

// A cidrEntry is one CIDR of the spec with the field path it came from.
type cidrEntry struct {
	path   *field.Path
	prefix netip.Prefix
}

// cluster is a validated member of the mesh.
type cluster struct {
	index     int
	spec      meshv1alpha1.Cluster
	pods      []netip.Prefix
	wireguard netip.Prefix
	anchor    []netip.Prefix // serviceCIDR, then additionalCIDRs
	port      uint16
	keepalive int
	cidrs     []cidrEntry
}

// An InvalidSpecError says which fields of a ClusterMesh spec are malformed.
// It is a user error: the mesh is frozen until it is fixed.
type InvalidSpecError struct {
	Errors field.ErrorList
}

func (e *InvalidSpecError) Error() string {
	return "invalid ClusterMesh spec: " + e.Errors.ToAggregate().Error()
}

// An OverlapError lists the CIDRs of a mesh that overlap each other, or
// overlap those of another ClusterMesh of the namespace. The mesh is frozen
// until it is fixed.
type OverlapError struct {
	Overlaps []string
}

func (e *OverlapError) Error() string {
	return strings.Join(e.Overlaps, "; ")
}

// validateSpec parses every field of the spec the planner reads, and returns
// the members in spec order.
func validateSpec(spec *meshv1alpha1.ClusterMeshSpec) ([]*cluster, field.ErrorList) {
	var errs field.ErrorList
	root := field.NewPath("spec")

	switch spec.Granularity {
	case "", meshv1alpha1.GranularityAuto, meshv1alpha1.GranularityNode, meshv1alpha1.GranularityLocation:
	default:
		errs = append(errs, field.NotSupported(root.Child("granularity"), spec.Granularity,
			[]string{string(meshv1alpha1.GranularityAuto), string(meshv1alpha1.GranularityNode), string(meshv1alpha1.GranularityLocation)}))
	}
	switch spec.Delivery {
	case "", meshv1alpha1.DeliveryObjects, meshv1alpha1.DeliveryPeerSet:
	default:
		errs = append(errs, field.NotSupported(root.Child("delivery"), spec.Delivery,
			[]string{string(meshv1alpha1.DeliveryObjects), string(meshv1alpha1.DeliveryPeerSet)}))
	}

	cp := root.Child("clusters")
	if len(spec.Clusters) < 2 {
		errs = append(errs, field.Invalid(cp, len(spec.Clusters), "a mesh needs at least 2 clusters"))
	}
	seen := make(map[string]bool, len(spec.Clusters))
	out := make([]*cluster, 0, len(spec.Clusters))
	for i := range spec.Clusters {
		c, cerrs := validateCluster(cp.Index(i), i, spec.Clusters[i])
		errs = append(errs, cerrs...)
		if seen[c.spec.Name] {
			errs = append(errs, field.Duplicate(cp.Index(i).Child("name"), c.spec.Name))
		}
		seen[c.spec.Name] = true
		out = append(out, c)
	}
	return out, errs
}

func validateCluster(p *field.Path, i int, spec meshv1alpha1.Cluster) (*cluster, field.ErrorList) {
	var errs field.ErrorList
	c := &cluster{index: i, spec: spec, port: DefaultWireguardPort}

	for _, msg := range validation.IsDNS1123Label(spec.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), spec.Name, msg))
	}
	switch spec.ProviderConfigRef.Kind {
	case "", "ProviderConfig", "ClusterProviderConfig":
	default:
		errs = append(errs, field.NotSupported(p.Child("providerConfigRef", "kind"), spec.ProviderConfigRef.Kind,
			[]string{"ProviderConfig", "ClusterProviderConfig"}))
	}
	if spec.ProviderConfigRef.Name == "" {
		errs = append(errs, field.Required(p.Child("providerConfigRef", "name"), "names the provider-kubernetes config of the cluster"))
	}

	parse := func(fp *field.Path, s meshv1alpha1.CIDR) (netip.Prefix, bool) {
		pr, err := ParseCIDR(string(s))
		if err != nil {
			errs = append(errs, field.Invalid(fp, string(s), "must be a network in CIDR form with no host bits set: "+err.Error()))
			return pr, false
		}
		c.cidrs = append(c.cidrs, cidrEntry{path: fp, prefix: pr})
		return pr, true
	}

	if len(spec.PodCIDRs) == 0 {
		errs = append(errs, field.Required(p.Child("podCIDRs"), "a cluster has at least one pod CIDR"))
	}
	for j, s := range spec.PodCIDRs {
		if pr, ok := parse(p.Child("podCIDRs").Index(j), s); ok {
			c.pods = append(c.pods, pr)
		}
	}
	if spec.WireguardCIDR == "" {
		errs = append(errs, field.Required(p.Child("wireguardCIDR"), "the network of the cluster's Kilo interface (Kilo's --subnet)"))
	} else if pr, ok := parse(p.Child("wireguardCIDR"), spec.WireguardCIDR); ok {
		c.wireguard = pr
	}
	if spec.ServiceCIDR != nil {
		if pr, ok := parse(p.Child("serviceCIDR"), *spec.ServiceCIDR); ok {
			c.anchor = append(c.anchor, pr)
		}
	}
	for j, s := range spec.AdditionalCIDRs {
		if pr, ok := parse(p.Child("additionalCIDRs").Index(j), s); ok {
			c.anchor = append(c.anchor, pr)
		}
	}
	if spec.WireguardPort != nil {
		if *spec.WireguardPort < 1 || *spec.WireguardPort > 65535 {
			errs = append(errs, field.Invalid(p.Child("wireguardPort"), *spec.WireguardPort, "must be a UDP port, 1-65535"))
		} else {
			c.port = uint16(*spec.WireguardPort)
		}
	}
	if spec.PersistentKeepalive != nil {
		if *spec.PersistentKeepalive < 0 || *spec.PersistentKeepalive > 65535 {
			errs = append(errs, field.Invalid(p.Child("persistentKeepalive"), *spec.PersistentKeepalive, "must be 0-65535 seconds"))
		} else {
			c.keepalive = int(*spec.PersistentKeepalive)
		}
	}
	return c, errs
}

// overlaps lists every pair of overlapping CIDRs within the mesh, the later
// field first.
func overlaps(clusters []*cluster) []string {
	var all []cidrEntry
	for _, c := range clusters {
		all = append(all, c.cidrs...)
	}
	var out []string
	for j := range all {
		for i := range j {
			if all[i].prefix.Overlaps(all[j].prefix) {
				out = append(out, fmt.Sprintf("%s %s overlaps %s %s", all[j].path, all[j].prefix, all[i].path, all[i].prefix))
			}
		}
	}
	return out
}

// An OtherMesh is another ClusterMesh of the same namespace.
type OtherMesh struct {
	Name string
	Spec meshv1alpha1.ClusterMeshSpec
}

// sameCluster tells whether two entries describe the same cluster: the same
// name and the same credentials.
func sameCluster(a, b meshv1alpha1.Cluster) bool {
	return a.Name == b.Name && a.ProviderConfigRef.Name == b.ProviderConfigRef.Name &&
		kindOrDefault(a.ProviderConfigRef.Kind) == kindOrDefault(b.ProviderConfigRef.Kind)
}

func kindOrDefault(k string) string {
	if k == "" {
		return "ProviderConfig"
	}
	return k
}

// crossMeshOverlaps lists the CIDRs of the mesh that overlap those of other
// meshes of the namespace. A cluster that both meshes contain (a shared hub)
// may of course overlap itself, but two meshes may share at most one
// cluster: with two, both would write the same Peers into the same cluster
// and Kilo keeps one Peer per key.
func crossMeshOverlaps(clusters []*cluster, others []OtherMesh) []string {
	sorted := append([]OtherMesh(nil), others...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var out []string
	for _, o := range sorted {
		theirs, _ := validateSpec(&o.Spec) // their own function reports their errors
		var shared []string
		for _, c := range clusters {
			for _, d := range theirs {
				if sameCluster(c.spec, d.spec) {
					shared = append(shared, c.spec.Name)
					continue
				}
				for _, a := range c.cidrs {
					for _, b := range d.cidrs {
						if a.prefix.Overlaps(b.prefix) {
							out = append(out, fmt.Sprintf("%s %s overlaps ClusterMesh %s %s %s", a.path, a.prefix, o.Name, b.path, b.prefix))
						}
					}
				}
			}
		}
		if len(shared) > 1 {
			out = append(out, fmt.Sprintf("ClusterMesh %s also joins clusters %s: two meshes may share at most one cluster", o.Name, strings.Join(shared, ", ")))
		}
	}
	return out
}
