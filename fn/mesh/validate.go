package mesh

import (
	"fmt"
	"net/netip"
	"slices"
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
)

// maxOverlapsListed is how many overlapping pairs an OverlapError names; the
// rest are counted. A spec of 64 clusters with many equal CIDRs has millions
// of pairs.
const maxOverlapsListed = 20

// A family is the IP address family of a mesh: Kilo runs one per cluster,
// the family of its WireGuard subnet.
type family bool

const (
	ipv4 family = false
	ipv6 family = true
)

func familyOf(a netip.Addr) family { return family(a.Is6() && !a.Is4In6()) }

func (f family) of(a netip.Addr) bool { return familyOf(a) == f }

func (f family) String() string {
	if f == ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// A cidrEntry is one CIDR of the spec with the field path it came from.
type cidrEntry struct {
	// cluster is the path of the entry's cluster, field its field, and
	// index its index in a list field (-1 for a single CIDR): the path is
	// built only for a message, since a spec may hold thousands of CIDRs.
	cluster *field.Path
	field   string
	index   int
	prefix  netip.Prefix
}

// path is the field path of the CIDR, e.g. spec.clusters[1].podCIDRs[0].
func (e cidrEntry) path() *field.Path {
	if e.index < 0 {
		return e.cluster.Child(e.field)
	}
	return e.cluster.Child(e.field).Index(e.index)
}

// cluster is a validated member of the mesh.
type cluster struct {
	index      int
	spec       meshv1alpha1.Cluster
	pods       []netip.Prefix
	wireguard  netip.Prefix
	service    []netip.Prefix // zero or one
	additional []netip.Prefix
	nodes      []netip.Prefix // nodeCIDRs
	port       uint16
	keepalive  int
	cidrs      []cidrEntry
	// idx indexes cidrs, built when first needed.
	idx *prefixIndex
}

// cidrIndex indexes the cluster's CIDRs.
func (c *cluster) cidrIndex() *prefixIndex {
	if c.idx == nil {
		ps := make([]netip.Prefix, len(c.cidrs))
		for i, e := range c.cidrs {
			ps[i] = e.prefix
		}
		c.idx = newPrefixIndex(ps)
	}
	return c.idx
}

// KindClusterProviderConfig is provider-kubernetes' cluster-scoped config,
// an administrator's object.
const KindClusterProviderConfig = meshv1alpha1.KindClusterProviderConfig

// errObjectsNamespaced is why delivery: Objects takes ClusterProviderConfigs
// only.
const errObjectsNamespaced = "delivery: Objects hands each member's config to provider-kubernetes, which does not check what a namespaced ProviderConfig may make it do " +
	"(use its own identity, read a token file, run a plugin): name a ClusterProviderConfig, an administrator's object, or use delivery: PeerSet"

// An InvalidSpecError says which fields of a ClusterMesh spec are malformed.
// It is a user error: the mesh is frozen until it is fixed.
type InvalidSpecError struct {
	Errors field.ErrorList
}

func (e *InvalidSpecError) Error() string {
	return "invalid ClusterMesh spec: " + e.Errors.ToAggregate().Error()
}

// An OverlapError lists the CIDRs of a mesh that overlap each other, or
// overlap those of another ClusterMesh of the namespace: the first few, and
// how many more. The mesh is frozen until it is fixed.
type OverlapError struct {
	Overlaps []string
	// More counts the overlaps not listed.
	More int
}

func (e *OverlapError) Error() string {
	s := strings.Join(e.Overlaps, "; ")
	if e.More > 0 {
		s += fmt.Sprintf("; and %d more", e.More)
	}
	return s
}

// validateSpec parses every field of the spec the planner reads, and returns
// the members in spec order and the mesh's address family.
func validateSpec(spec *meshv1alpha1.ClusterMeshSpec) ([]*cluster, family, field.ErrorList) {
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
		if spec.Delivery == meshv1alpha1.DeliveryObjects && c.spec.ProviderConfigRef.Kind != KindClusterProviderConfig {
			errs = append(errs, field.Invalid(cp.Index(i).Child("providerConfigRef", "kind"), kindOrDefault(c.spec.ProviderConfigRef.Kind), errObjectsNamespaced))
		}
		seen[c.spec.Name] = true
		out = append(out, c)
	}
	f, ferrs := checkFamily(cp, out)
	return out, f, append(errs, ferrs...)
}

// checkFamily finds the mesh's address family, the family of its clusters'
// wireguardCIDRs, and reports every CIDR of the other family: Kilo runs one
// family, and the receiving Kilo refuses a route of the other (netlink: "not
// the same IP family"), which stalls its route sync.
func checkFamily(cp *field.Path, clusters []*cluster) (family, field.ErrorList) {
	var errs field.ErrorList
	var f family
	var first *cluster
	for _, c := range clusters {
		if !c.wireguard.IsValid() {
			continue
		}
		if first == nil {
			first, f = c, familyOf(c.wireguard.Addr())
			continue
		}
		if g := familyOf(c.wireguard.Addr()); g != f {
			errs = append(errs, field.Invalid(cp.Index(c.index).Child("wireguardCIDR"), c.wireguard.String(),
				fmt.Sprintf("is %s but %s is %s: a mesh runs one address family, the family of its wireguardCIDRs",
					g, cp.Index(first.index).Child("wireguardCIDR"), f)))
		}
	}
	if first == nil {
		return f, errs
	}
	for _, c := range clusters {
		for _, e := range c.cidrs {
			// A wireguardCIDR of the other family is reported above.
			if e.prefix != c.wireguard && !f.of(e.prefix.Addr()) {
				errs = append(errs, field.Invalid(e.path(), e.prefix.String(),
					fmt.Sprintf("is %s, but the mesh is %s (the family of its wireguardCIDRs): Kilo runs one address family", familyOf(e.prefix.Addr()), f)))
			}
		}
	}
	return f, errs
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

	c.cidrs = make([]cidrEntry, 0, len(spec.PodCIDRs)+len(spec.AdditionalCIDRs)+len(spec.NodeCIDRs)+2)
	parse := func(name string, j int, s meshv1alpha1.CIDR) (netip.Prefix, bool) {
		e := cidrEntry{cluster: p, field: name, index: j}
		pr, err := ParseCIDR(string(s))
		if err != nil {
			errs = append(errs, field.Invalid(e.path(), string(s), "must be a network in CIDR form with no host bits set: "+err.Error()))
			return pr, false
		}
		e.prefix = pr
		c.cidrs = append(c.cidrs, e)
		return pr, true
	}
	list := func(name string, ss []meshv1alpha1.CIDR) []netip.Prefix {
		out := make([]netip.Prefix, 0, len(ss))
		for j, s := range ss {
			if pr, ok := parse(name, j, s); ok {
				out = append(out, pr)
			}
		}
		return out
	}

	if len(spec.PodCIDRs) == 0 {
		errs = append(errs, field.Required(p.Child("podCIDRs"), "a cluster has at least one pod CIDR"))
	}
	c.pods = list("podCIDRs", spec.PodCIDRs)
	if spec.WireguardCIDR == "" {
		errs = append(errs, field.Required(p.Child("wireguardCIDR"), "the network of the cluster's Kilo interface (Kilo's --subnet)"))
	} else if pr, ok := parse("wireguardCIDR", -1, spec.WireguardCIDR); ok {
		c.wireguard = pr
	}
	if spec.ServiceCIDR != nil {
		if pr, ok := parse("serviceCIDR", -1, *spec.ServiceCIDR); ok {
			c.service = []netip.Prefix{pr}
		}
	}
	c.additional = list("additionalCIDRs", spec.AdditionalCIDRs)
	c.nodes = list("nodeCIDRs", spec.NodeCIDRs)
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

// anchor lists the CIDRs routed through one Peer of the cluster: the
// serviceCIDR, then the additionalCIDRs.
func (c *cluster) anchor() []netip.Prefix {
	return append(append([]netip.Prefix(nil), c.service...), c.additional...)
}

// overlapReport collects overlaps up to maxOverlapsListed and counts the
// rest.
type overlapReport struct {
	listed []string
	more   int
}

func (r *overlapReport) add(s string) {
	if len(r.listed) < maxOverlapsListed {
		r.listed = append(r.listed, s)
		return
	}
	r.more++
}

func (r *overlapReport) err() error {
	if len(r.listed) == 0 {
		return nil
	}
	return &OverlapError{Overlaps: r.listed, More: r.more}
}

// overlaps reports the overlapping pairs of CIDRs within the mesh, in spec
// order of the later field, the later field first.
func overlaps(clusters []*cluster, r *overlapReport) {
	var all []cidrEntry
	for _, c := range clusters {
		all = append(all, c.cidrs...)
	}
	prefixes := make([]netip.Prefix, len(all))
	for i, e := range all {
		prefixes[i] = e.prefix
	}
	idx := newPrefixIndex(prefixes)
	listed := 0
	for j := 0; j < len(all) && listed < maxOverlapsListed; j++ {
		for _, i := range idx.overlapping(all[j].prefix) {
			if i >= j || listed == maxOverlapsListed {
				break
			}
			r.add(fmt.Sprintf("%s %s overlaps %s %s", all[j].path(), all[j].prefix, all[i].path(), all[i].prefix))
			listed++
		}
	}
	r.more += idx.countPairs() - listed
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

// crossMeshOverlaps reports the CIDRs of the mesh that overlap those of
// other meshes of the namespace. A cluster that both meshes contain (a
// shared hub) may of course overlap itself, but two meshes may share at most
// one cluster: with two, both would write the same Peers into the same
// cluster and Kilo keeps one Peer per key.
func crossMeshOverlaps(clusters []*cluster, others []OtherMesh, r *overlapReport) {
	sorted := append([]OtherMesh(nil), others...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var mine []cidrEntry
	owner := []*cluster{}
	for _, c := range clusters {
		for _, e := range c.cidrs {
			mine = append(mine, e)
			owner = append(owner, c)
		}
	}
	prefixes := make([]netip.Prefix, len(mine))
	for i, e := range mine {
		prefixes[i] = e.prefix
	}
	idx := newPrefixIndex(prefixes)

	for _, o := range sorted {
		theirs, _, _ := validateSpec(&o.Spec) // their own function reports their errors
		var shared []string
		for _, d := range theirs {
			var hubs []*cluster
			for _, c := range clusters {
				if sameCluster(c.spec, d.spec) {
					shared = append(shared, c.spec.Name)
					hubs = append(hubs, c)
				}
			}
			// Equal CIDRs of one entry give equal counts: each distinct
			// prefix is counted once.
			counted := map[netip.Prefix]int{}
			count := func(b netip.Prefix) int {
				if n, ok := counted[b]; ok {
					return n
				}
				n := idx.count(b)
				for _, c := range hubs {
					n -= c.cidrIndex().count(b)
				}
				counted[b] = n
				return n
			}
			for _, b := range d.cidrs {
				reportOverlapsWith(r, idx, mine, owner, hubs, o.Name, b, count(b.prefix))
			}
		}
		if len(shared) > 1 {
			r.add(fmt.Sprintf("ClusterMesh %s also joins clusters %s: two meshes may share at most one cluster", o.Name, strings.Join(shared, ", ")))
		}
	}
}

// reportOverlapsWith reports the CIDRs of this mesh (mine, indexed, each of
// the cluster owner[i]) that overlap b, a CIDR of ClusterMesh other; n of
// them do, not counting those of a shared hub, which of course overlap its
// own entry in the other mesh.
func reportOverlapsWith(r *overlapReport, idx *prefixIndex, mine []cidrEntry, owner, hubs []*cluster, other string, b cidrEntry, n int) {
	if n == 0 {
		return
	}
	if len(r.listed) == maxOverlapsListed {
		r.more += n
		return
	}
	for _, i := range idx.overlapping(b.prefix) {
		if !slices.Contains(hubs, owner[i]) {
			r.add(fmt.Sprintf("%s %s overlaps ClusterMesh %s %s %s", mine[i].path(), mine[i].prefix, other, b.path(), b.prefix))
		}
	}
}
