package view

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/plugin/snapshot"
)

// Severities of findings.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityInfo    = "info"
)

// Checks diagnose runs, in the order findings are listed.
const (
	CheckCrossplane = "crossplane"
	CheckNetworks   = "networks"
	CheckMembers    = "members"
	CheckDelivery   = "delivery"
	CheckNodes      = "nodes"
	CheckRoutes     = "routes"
	CheckClocks     = "clocks"
)

// Checks are every check diagnose runs.
var Checks = []string{CheckCrossplane, CheckNetworks, CheckMembers, CheckDelivery, CheckNodes, CheckRoutes, CheckClocks}

// Clock skews: above skewWarning a timestamp written in the management
// cluster is noticed; above skewError fresh Kilo heartbeats look stale,
// since Kilo refreshes them every 30 s and counts them stale after 60 s.
const (
	skewWarning = 5 * time.Second
	skewError   = 30 * time.Second
	// localSkew is how far this machine's clock may be from the management
	// cluster's before it is mentioned.
	localSkew = time.Minute
)

// freeProposed is how many free ranges a finding proposes.
const freeProposed = 3

// A Finding is one thing an operator should check, and how to fix it.
type Finding struct {
	Severity string `json:"severity"`
	Check    string `json:"check"`
	// Member the finding is about; empty for the whole mesh.
	Member  string `json:"member,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// A Diagnosis is every finding about one mesh.
type Diagnosis struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Findings  []Finding `json:"findings"`
	Checks    []string  `json:"checks"`
}

// Errors counts the findings of severity error.
func (d Diagnosis) Errors() int { return d.count(SeverityError) }

// Warnings counts the findings of severity warning.
func (d Diagnosis) Warnings() int { return d.count(SeverityWarning) }

func (d Diagnosis) count(severity string) int {
	n := 0
	for _, f := range d.Findings {
		if f.Severity == severity {
			n++
		}
	}
	return n
}

// Diagnose checks a mesh as an operator would: Crossplane's own
// conditions, overlapping networks, members that cannot be observed,
// Peers that cannot be delivered, skipped nodes, withheld routes, and
// clocks.
func Diagnose(s *snapshot.Snapshot, m *snapshot.Mesh, p *Planned) Diagnosis {
	d := &diagnosis{s: s, m: m, p: p}
	d.crossplane()
	d.networks()
	d.members()
	d.delivery()
	d.nodes()
	d.routes()
	d.clocks()
	rank := map[string]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}
	check := map[string]int{}
	for i, c := range Checks {
		check[c] = i
	}
	sort.SliceStable(d.out, func(i, j int) bool {
		a, b := d.out[i], d.out[j]
		if rank[a.Severity] != rank[b.Severity] {
			return rank[a.Severity] < rank[b.Severity]
		}
		return check[a.Check] < check[b.Check]
	})
	return Diagnosis{Namespace: m.Namespace, Name: m.Name, Findings: d.out, Checks: Checks}
}

type diagnosis struct {
	s   *snapshot.Snapshot
	m   *snapshot.Mesh
	p   *Planned
	out []Finding
}

func (d *diagnosis) add(severity, check, member, msg, fix string) {
	d.out = append(d.out, Finding{Severity: severity, Check: check, Member: member, Message: msg, Fix: fix})
}

// crossplane reports what Crossplane says of the mesh itself.
func (d *diagnosis) crossplane() {
	if len(d.m.Status.Conditions) == 0 {
		d.add(SeverityWarning, CheckCrossplane, "", "the mesh has no condition: Crossplane has not reconciled it",
			"check that the Configuration is installed and healthy (kubectl get configurations.pkg.crossplane.io) and that Crossplane runs")
		return
	}
	if c, ok := d.m.Condition(snapshot.TypeSynced); ok && c.Status == "False" {
		if c.Reason == "ReconcilePaused" {
			d.add(SeverityWarning, CheckCrossplane, "", "the mesh is paused: "+c.Message,
				fmt.Sprintf("remove the annotation: kubectl -n %s annotate clustermesh %s crossplane.io/paused-", d.m.Namespace, d.m.Name))
		} else {
			d.add(SeverityError, CheckCrossplane, "", "the function refused the mesh, or Crossplane could not apply its result, so nothing changes: "+c.Message,
				"fix what the message names (docs/troubleshooting.md, Fatal errors)")
		}
	}
	if c, ok := d.m.Condition(snapshot.TypeReady); ok && c.Status == "False" {
		d.add(SeverityInfo, CheckCrossplane, "", fmt.Sprintf("the mesh is not Ready (%s): %s", c.Reason, c.Message),
			"composed resources are becoming ready: wait; if it stays, the other findings, or the resources the message names, say why")
	}
	if c, ok := d.m.Condition(snapshot.TypeResponsive); ok && c.Status == "False" {
		d.add(SeverityWarning, CheckCrossplane, "", fmt.Sprintf("Crossplane drops the mesh's watch events (Responsive=False, %s): its status may lag for minutes. %s", c.Reason, c.Message),
			"too many changes at once, usually node churn: changes settle after Crossplane's cool-down; see docs/performance.md for the circuit breaker and its flags")
	}
	for _, c := range d.m.Status.Conditions {
		if c.ObservedGeneration != 0 && d.m.Generation != 0 && c.ObservedGeneration < d.m.Generation {
			d.add(SeverityInfo, CheckCrossplane, "", fmt.Sprintf("the mesh's conditions are of generation %d of its spec, which is at %d: Crossplane has not reconciled the latest change yet", c.ObservedGeneration, d.m.Generation), "")
			break
		}
	}
}

// overlapLine reads the field path and network a line of an overlap names
// first: the one to change.
var overlapLine = regexp.MustCompile(`^spec\.clusters\[(\d+)\]\.(\w+)(?:\[\d+\])? (\S+) overlaps`)

// networks reports overlapping networks, each with free ranges to use
// instead.
func (d *diagnosis) networks() {
	var overlap *mesh.OverlapError
	var invalid *mesh.InvalidSpecError
	switch {
	case errors.As(d.p.Err, &invalid):
		for _, e := range invalid.Errors {
			d.add(SeverityError, CheckNetworks, "", "the spec is invalid, so the mesh is frozen: "+e.Error(), "correct the field; nothing changes until then")
		}
		return
	case !errors.As(d.p.Err, &overlap):
		if c, ok := d.m.Condition(snapshot.TypeNetworksOverlap); ok && c.Status == "True" {
			d.add(SeverityInfo, CheckNetworks, "", "NetworksOverlap is True, but the networks no longer overlap: the condition clears at the next reconcile: "+c.Message, "")
		}
		return
	}
	used := d.usedNetworks()
	for _, line := range overlap.Overlaps {
		d.add(SeverityError, CheckNetworks, d.memberOf(line), "networks overlap, so the mesh is frozen: "+line, d.overlapFix(line, used))
	}
	if overlap.More > 0 {
		d.add(SeverityError, CheckNetworks, "", fmt.Sprintf("%d more overlaps are not listed", overlap.More), "fix those listed first, then run diagnose again")
	}
}

func (d *diagnosis) memberOf(line string) string {
	if m := overlapLine.FindStringSubmatch(line); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil && i < len(d.m.Spec.Clusters) {
			return d.m.Spec.Clusters[i].Name
		}
	}
	return ""
}

func (d *diagnosis) overlapFix(line string, used []netip.Prefix) string {
	if strings.Contains(line, "may share at most one cluster") {
		return "remove the second shared member from one of the meshes: two meshes may share one member (a hub) only"
	}
	m := overlapLine.FindStringSubmatch(line)
	if m == nil {
		return "give one of the two networks a range of its own"
	}
	p, err := netip.ParsePrefix(m[3])
	if err != nil {
		return "give one of the two networks a range of its own"
	}
	field, _, _ := strings.Cut(line, " ")
	if m[2] == "wireguardCIDR" {
		field += " (and the member's Kilo --subnet)"
	}
	free := FreeRanges(p, used, freeProposed)
	if len(free) == 0 {
		return fmt.Sprintf("change %s to a /%d no mesh of namespace %s uses; none is free in private address space", field, p.Bits(), d.m.Namespace)
	}
	strs := make([]string, len(free))
	for i, f := range free {
		strs[i] = f.String()
	}
	return fmt.Sprintf("change %s to a free /%d, used by no mesh of namespace %s: %s", field, p.Bits(), d.m.Namespace, strings.Join(strs, ", "))
}

// usedNetworks lists every network of every mesh of the namespace.
func (d *diagnosis) usedNetworks() []netip.Prefix {
	var out []netip.Prefix
	add := func(c meshv1alpha1.CIDR) {
		if p, err := netip.ParsePrefix(string(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	for _, name := range sortedKeys(d.s.All) {
		for _, c := range d.s.All[name].Spec.Clusters {
			for _, x := range c.PodCIDRs {
				add(x)
			}
			add(c.WireguardCIDR)
			if c.ServiceCIDR != nil {
				add(*c.ServiceCIDR)
			}
			for _, x := range c.AdditionalCIDRs {
				add(x)
			}
			for _, x := range c.NodeCIDRs {
				add(x)
			}
		}
	}
	return out
}

// members reports members that cannot be observed, and why.
func (d *diagnosis) members() {
	for _, c := range d.m.Spec.Clusters {
		inv, ok := d.m.Inventories[c.Name]
		if !ok {
			d.add(SeverityWarning, CheckMembers, c.Name, "no NodeInventory observes the member yet",
				"the function composes one per member: check the mesh's Synced condition, and that provider-kilomesh is installed")
			continue
		}
		if cond, ok := snapshot.InventoryCondition(inv, kubev1alpha1.TypeCredentialsAccepted); ok && cond.Status == "False" {
			d.add(SeverityError, CheckMembers, c.Name, "provider-kilomesh refuses the member's credentials: "+cond.Message,
				"give the member a kubeconfig Secret with a token or client certificate, named by its ProviderConfig (docs/credentials.md); provider-kilomesh's own identity needs a ClusterProviderConfig")
		}
		cond, ok := snapshot.InventoryCondition(inv, snapshot.TypeSynced)
		switch {
		case ok && cond.Status == "False":
			what, fix := explain(cond.Message, c, d.m.Namespace, "read the member's Nodes")
			since := ""
			if !cond.LastTransitionTime.IsZero() {
				since = " since " + cond.LastTransitionTime.UTC().Format(time.RFC3339)
			}
			d.add(SeverityError, CheckMembers, c.Name, fmt.Sprintf("the member cannot be observed%s: %s: %s", since, what, cond.Message), fix)
		case inv.Status.AtProvider.ObservedAt == nil:
			d.add(SeverityInfo, CheckMembers, c.Name, "the member has not been observed yet",
				fmt.Sprintf("wait a few seconds; if it stays, read the NodeInventory's conditions: kubectl -n %s describe nodeinventory %s", d.m.Namespace, inv.Name))
		}
		if why := inv.Status.AtProvider.NodesIncomplete; why != "" {
			d.add(SeverityWarning, CheckMembers, c.Name, "the inventory does not publish every selected node ("+why+")",
				"select fewer nodes with spec.clusters[].nodeSelector, or split the member across meshes")
		}
	}
}

// Kinds of failure a provider reports, read from its message.
var (
	grantRE     = regexp.MustCompile(`(?i)(providerconfigs|clusterproviderconfigs|providerconfigusages)(\.kubernetes\.m\.crossplane\.io)?\b.*forbidden|forbidden.*(providerconfigs|clusterproviderconfigs|providerconfigusages)|cannot record the use of the provider-kubernetes config`)
	notFoundRE  = regexp.MustCompile(`(?i)cannot get (Cluster)?ProviderConfig .*not found`)
	secretRE    = regexp.MustCompile(`(?i)cannot get Secret .*not found|has no key|does not hold a valid kubeconfig`)
	refusedRE   = regexp.MustCompile(`(?i)does not accept the credentials|unauthorized`)
	trustRE     = regexp.MustCompile(`(?i)cannot verify the cluster's serving certificate|x509|certificate signed by unknown authority`)
	crdRE       = regexp.MustCompile(`(?i)Peer CRD not installed|no matches for kind "?Peer"?|the server could not find the requested resource`)
	forbiddenRE = regexp.MustCompile(`(?i)forbidden`)
	networkRE   = regexp.MustCompile(`(?i)connection refused|no such host|i/o timeout|did not answer|has not listed|context deadline exceeded|no route to host|EOF|TLS handshake timeout`)
)

// explain says what kind of failure a provider's message is, and what to
// fix. doing is what the provider was doing.
func explain(msg string, c meshv1alpha1.Cluster, namespace, doing string) (string, string) {
	ref := c.ProviderConfigRef.Kind
	if ref == "" {
		ref = meshv1alpha1.KindProviderConfig
	}
	ref += " " + c.ProviderConfigRef.Name
	switch {
	case grantRE.MatchString(msg):
		return "provider-kilomesh may not read provider-kubernetes' configs in the management cluster (the control-plane grant is missing)",
			"apply the administrator's grant: kubectl apply -f examples/provider/control-plane-rbac.yaml (docs/install.md, step 1); " +
				"check that its ClusterRoleBinding names the ServiceAccount provider-kilomesh in Crossplane's namespace and that provider-kilomesh runs under it (its DeploymentRuntimeConfig)"
	case notFoundRE.MatchString(msg):
		return "the member's " + ref + " does not exist",
			"create it (docs/install.md, step 4), or correct spec.clusters[].providerConfigRef of " + c.Name
	case secretRE.MatchString(msg):
		return "the kubeconfig Secret of " + ref + " is missing or wrong",
			"create the Secret the config names, with a kubeconfig under the key it names (docs/install.md, step 4)"
	case refusedRE.MatchString(msg):
		return "the member refuses the credentials of " + ref + " (revoked, expired or rotated)",
			"rebuild the kubeconfig Secret from a fresh token of the member's ServiceAccount kube-system/kilomesh (docs/credentials.md)"
	case trustRE.MatchString(msg):
		return "the member's serving certificate does not verify with the CA of " + ref,
			"put the member's CA into the kubeconfig's certificate-authority-data, and check its server address (docs/credentials.md)"
	case crdRE.MatchString(msg):
		return "the member has no Kilo Peer CRD (peers.kilo.squat.ai)",
			fmt.Sprintf("install Kilo in %s (its manifests include the CRD), or remove the member from the mesh; its own nodes are still observed meanwhile", c.Name)
	case forbiddenRE.MatchString(msg):
		return "the member's RBAC does not let kilomesh " + doing,
			fmt.Sprintf("in %s, apply examples/member-rbac.yaml again (ClusterRole kilomesh-member: nodes get/list/watch; peers.kilo.squat.ai get/list/watch/create/update/patch/delete), "+
				"and check that the kubeconfig of %s uses that ServiceAccount's token", c.Name, ref)
	case networkRE.MatchString(msg):
		return "the member's API server does not answer the management cluster",
			fmt.Sprintf("check the network path from the management cluster to the server of the kubeconfig of %s (firewall, DNS, the API server itself); "+
				"meanwhile its last known Peers stay everywhere", ref)
	}
	return "the provider reports an error", fmt.Sprintf("read the resource's events: kubectl -n %s get events --field-selector involvedObject.kind!=ClusterMesh", namespace)
}

// delivery reports members whose Peers cannot be written.
func (d *diagnosis) delivery() {
	for _, c := range d.m.Spec.Clusters {
		if ps, ok := d.m.PeerSets[c.Name]; ok {
			d.peerSet(c, ps)
		}
		for _, o := range d.m.Objects[c.Name] {
			if cond, ok := o.Condition(snapshot.TypeSynced); ok && cond.Status == "False" {
				what, fix := explain(cond.Message, c, d.m.Namespace, "write Peers")
				d.add(SeverityError, CheckDelivery, c.Name, fmt.Sprintf("Object %s cannot write its Peer: %s: %s", o.Name, what, cond.Message), fix)
				break
			}
		}
		if _, ok := d.m.PeerSets[c.Name]; !ok && d.m.Delivery() == meshv1alpha1.DeliveryPeerSet && d.p.Plan != nil {
			d.add(SeverityInfo, CheckDelivery, c.Name, "the member has no PeerSet yet",
				"the function composes it once every member reported, 10 s after the mesh was created at most; check the mesh's Synced condition")
		}
	}
}

func (d *diagnosis) peerSet(c meshv1alpha1.Cluster, ps *kubev1alpha1.PeerSet) {
	if cond, ok := snapshot.PeerSetCondition(ps, snapshot.TypeSynced); ok && cond.Status == "False" {
		what, fix := explain(cond.Message, c, d.m.Namespace, "write Peers")
		d.add(SeverityError, CheckDelivery, c.Name, fmt.Sprintf("its PeerSet cannot write Peers: %s: %s", what, cond.Message), fix)
	}
	byReason := map[string][]string{}
	for _, pr := range ps.Status.AtProvider.Problems {
		byReason[pr.Reason] = append(byReason[pr.Reason], pr.Peer+" ("+pr.Message+")")
	}
	for _, r := range sortedKeys(byReason) {
		fix := "find out whose Peer is in the way: kubectl get peers.kilo.squat.ai NAME -o yaml in " + c.Name + "; kilomesh never overwrites it, delete it if it is stale"
		if r == kubev1alpha1.ReasonPeerInvalid {
			fix = "a Peer the member's API server or Kilo's rules reject is a bug of kilomesh: report it with the message"
		}
		d.add(SeverityError, CheckDelivery, c.Name, fmt.Sprintf("its PeerSet does not apply %s (%s): %s", plural(len(byReason[r]), "Peer"), r, some(byReason[r])), fix)
	}
}

// skipFixes say how to fix each skip reason (docs/troubleshooting.md).
var skipFixes = map[string]string{
	mesh.ReasonNodeNoPodCIDR:         "a new node gets its pod CIDR within seconds; if it stays, the member does not allocate a pod CIDR per node (kube-controller-manager --allocate-node-cidrs), which Kilo needs too; on a dual-stack member check the mesh's address family",
	mesh.ReasonNodePodCIDROutOfRange: "set spec.clusters[].podCIDRs of the member to its real cluster CIDR",
	mesh.ReasonNodePodCIDRTaken:      "the Node is stale or forged: delete it (kubectl delete node NODE in the member); if the earlier node's pod CIDR was reassigned, delete the earlier Node first",
	mesh.ReasonNodeNoWireguardIP:     "Kilo writes kilo.squat.ai/wireguard-ip when it starts, on segment leaders only: check the Kilo pod on the node; a member running Kilo with --mesh-granularity=location needs granularity: Location (or Auto)",
	mesh.ReasonWGIPInvalid:           "remove the annotation and restart Kilo on the node so it writes it again: kubectl annotate node NODE kilo.squat.ai/wireguard-ip-",
	mesh.ReasonWGIPOutOfRange:        "set spec.clusters[].wireguardCIDR of the member to its Kilo --subnet",
	mesh.ReasonWGIPDuplicate:         "remove the annotation from the later node and restart Kilo there: kubectl annotate node NODE kilo.squat.ai/wireguard-ip-",
	mesh.ReasonNodeNoPublicKey:       "Kilo writes kilo.squat.ai/key when it starts: check the Kilo pod on the node",
	mesh.ReasonNodeKeyInvalid:        "remove the annotation and restart Kilo on the node so it writes its key again: kubectl annotate node NODE kilo.squat.ai/key-",
	mesh.ReasonNodeKeyDuplicate:      "two nodes share a private key (a cloned disk image, or a copied key): give the wrong node a new key (remove Kilo's key file there and restart Kilo), and find out who annotated it if it was not cloned",
	mesh.ReasonNodeHeartbeatLost:     "Kilo stopped on the node: start it again, or delete the Node if it is gone for good (kubectl delete node NODE in the member)",
	mesh.ReasonNodeEndpointInvalid:   "correct the endpoint annotation the message names to host:port (IPv6 in brackets), e.g. kubectl annotate --overwrite node NODE kilo.squat.ai/force-endpoint=203.0.113.10:51820 (docs/nodes.md, Endpoints)",
	mesh.ReasonSegmentNoLeader:       "wait while Kilo elects the location's leader, or fix the leader's own reason (the message names it); kilo.squat.ai/leader on a node with a public endpoint makes Kilo prefer it: kubectl annotate node NODE kilo.squat.ai/leader=true",
}

// Fixes of NodeNotReady, by what Kilo misses.
const (
	fixNoEndpoint = "Kilo has no endpoint for the node: check the Kilo pod there (it writes kilo.squat.ai/endpoint), or set one: kubectl annotate node NODE kilo.squat.ai/force-endpoint=<public address>:<port>"
	fixHeartbeat  = "Kilo's heartbeat kilo.squat.ai/last-seen is stale: check the Kilo pod on the node (it writes the heartbeat every 30 s); when every node of a member is stale, compare the clocks of its nodes with the management cluster's"
)

// nodes reports the skipped nodes of every member, by reason.
func (d *diagnosis) nodes() {
	status := d.m.Status.ClusterMeshStatus
	if d.p.Plan != nil {
		status = d.p.Plan.Status
	}
	for _, cs := range status.Clusters {
		type group struct {
			nodes []string
			fix   string
		}
		groups := map[string]*group{}
		var order []string
		for _, sk := range cs.Skipped {
			fix := skipFixes[sk.Reason]
			key := sk.Reason
			if sk.Reason == mesh.ReasonNodeNotReady || sk.Reason == "" {
				fix = fixHeartbeat
				if strings.Contains(sk.Message, "no endpoint") {
					fix, key = fixNoEndpoint, sk.Reason+" (no endpoint)"
				}
			}
			if fix == "" {
				fix = "see docs/troubleshooting.md, Skipped nodes"
			}
			g, ok := groups[key]
			if !ok {
				g = &group{fix: fix}
				groups[key] = g
				order = append(order, key)
			}
			g.nodes = append(g.nodes, sk.Node+": "+sk.Message)
		}
		sort.Strings(order)
		for _, key := range order {
			g := groups[key]
			reason, _, _ := strings.Cut(key, " ")
			severity := SeverityError
			if mesh.Transient(reason) || reason == mesh.ReasonNodeHeartbeatLost {
				severity = SeverityWarning
			}
			d.add(severity, CheckNodes, cs.Name, fmt.Sprintf("%s skipped (%s): %s", plural(len(g.nodes), "node"), key, strings.Join(g.nodes, "; ")), g.fix)
		}
		if cs.MoreSkipped > 0 {
			d.add(SeverityInfo, CheckNodes, cs.Name, fmt.Sprintf("%d more skipped nodes are not listed in the status", cs.MoreSkipped),
				"fix those listed first; the NodeInventory's status.atProvider.nodes holds every node kilomesh sees")
		}
	}
}

// routeFixes say how to fix each problem the planner warns about.
var routeFixes = map[string]string{
	mesh.ReasonNodeIPConflict:              "usually nothing: members on one network reach each other's nodes directly; to route no node address at all, set advertiseNodeIPs: false",
	mesh.ReasonNodeIPOutOfRange:            "add the node network to spec.clusters[].nodeCIDRs; if the address is not a node network of the member, find out who annotated the node",
	mesh.ReasonNodePodCIDRConflict:         "one of the Nodes is stale or forged: delete it in the member",
	mesh.ReasonAllowedLocationIPOutOfRange: "add the network to spec.clusters[].additionalCIDRs, or correct kilo.squat.ai/allowed-location-ips",
	mesh.ReasonAllowedLocationIPConflict:   "give each range of kilo.squat.ai/allowed-location-ips to one location",
	mesh.ReasonNodeNotLeader:               "transient while Kilo moves leadership; if it stays, the annotation kilo.squat.ai/wireguard-ip is stale or forged: remove it",
	mesh.ReasonAnnotationInvalid:           "correct or remove the annotation",
	mesh.ReasonNATWithoutKeepalive:         "annotate the leader: kubectl annotate node NODE kilo.squat.ai/persistent-keepalive=25 (docs/nodes.md, NAT)",
	mesh.ReasonForeignPeersIncomplete:      "remove stale Peers from the member (kubectl get peers.kilo.squat.ai), or keep other meshes' members apart",
	mesh.ReasonPeerNameConflict:            "find out whose the Peer is (kubectl get peers.kilo.squat.ai NAME -o yaml in the member); kilomesh never overwrites it: delete or rename it if it is stale",
	mesh.ReasonPeerKeyConflict:             "typical while migrating: delete the old Peer once it is no longer needed, and the mesh's Peer replaces it (docs/migrating.md)",
	mesh.ReasonPeerRouteConflict:           "remove or narrow the other Peer, or change the networks of one of the meshes",
	mesh.ReasonDiscoveredEndpointsDisagree: "usually nothing: it clears once the leaders agree; if it stays, compare what each leader said with where the segment is: one leader's Node may be forged",
}

// routes reports what the planner warns about, besides skipped nodes:
// routes withheld, annotations ignored, Peers in the way.
func (d *diagnosis) routes() {
	if d.p.Plan == nil {
		return
	}
	for _, w := range d.p.Plan.Warnings {
		fix, ok := routeFixes[w.Reason]
		if !ok {
			continue // skip reasons: reported by node
		}
		severity := SeverityWarning
		switch w.Reason {
		case mesh.ReasonPeerNameConflict, mesh.ReasonPeerKeyConflict:
			severity = SeverityError
		case mesh.ReasonNodeIPConflict:
			severity = SeverityInfo
		}
		d.add(severity, CheckRoutes, w.Cluster, w.Message, fix)
	}
}

// clocks compares the times the providers and Crossplane wrote with the
// management cluster's clock, and looks for members whose every node looks
// stale.
func (d *diagnosis) clocks() {
	ahead, who := d.ahead()
	switch {
	case ahead > skewError:
		d.add(SeverityError, CheckClocks, "", fmt.Sprintf("%s wrote a time %s ahead of the management cluster's clock: with a skew over 30 s, Kilo heartbeats written every 30 s look stale (Kilo's limit is 60 s), and nodes drop out of the mesh", who, ahead.Round(time.Second)),
			"synchronise the clocks of the management cluster's nodes (NTP), where Crossplane and its providers run")
	case ahead > skewWarning:
		d.add(SeverityWarning, CheckClocks, "", fmt.Sprintf("%s wrote a time %s ahead of the management cluster's clock", who, ahead.Round(time.Second)),
			"synchronise the clocks of the management cluster's nodes (NTP); over 30 s, fresh Kilo heartbeats look stale")
	}
	for _, c := range d.m.Spec.Clusters {
		if n := allStale(d.m.Inventories[c.Name]); n > 0 {
			d.add(SeverityWarning, CheckClocks, c.Name, fmt.Sprintf("every one of the member's %d nodes has a stale Kilo heartbeat", n),
				"Kilo does not run there, or the clocks of its nodes and of the management cluster differ by more than a minute: check the Kilo pods, and compare `date -u` on a node with the management cluster")
		}
	}
	if skew := d.s.LocalNow.Sub(d.s.Now); skew > localSkew || skew < -localSkew {
		d.add(SeverityInfo, CheckClocks, "", fmt.Sprintf("this machine's clock is %s off the management cluster's; ages shown are counted on the cluster's clock", skew.Round(time.Second)), "")
	}
}

// ahead finds the time furthest ahead of the management cluster's clock
// that a provider, Crossplane or the function wrote, and who wrote it.
func (d *diagnosis) ahead() (time.Duration, string) {
	var ahead time.Duration
	var who string
	see := func(t time.Time, what string) {
		if skew := t.Sub(d.s.Now); !t.IsZero() && skew > ahead {
			ahead, who = skew, what
		}
	}
	conds := func(cs []xpv2.Condition, what string) {
		for _, c := range cs {
			see(c.LastTransitionTime.Time, what)
		}
	}
	for _, name := range sortedKeys(d.m.Inventories) {
		inv := d.m.Inventories[name]
		what := "provider-kilomesh (NodeInventory " + inv.Name + ")"
		if at := inv.Status.AtProvider.ObservedAt; at != nil {
			see(at.Time, what)
		}
		conds(inv.Status.Conditions, what)
	}
	for _, name := range sortedKeys(d.m.PeerSets) {
		conds(d.m.PeerSets[name].Status.Conditions, "provider-kilomesh (PeerSet "+d.m.PeerSets[name].Name+")")
	}
	for _, name := range sortedKeys(d.m.Objects) {
		for _, o := range d.m.Objects[name] {
			conds(o.Status.Conditions, "provider-kubernetes (Object "+o.Name+")")
		}
	}
	conds(d.m.Status.Conditions, "Crossplane or the function (the ClusterMesh)")
	return ahead, who
}

// allStale counts the nodes of a reachable member when every one of them
// (two at least) has a stale heartbeat, and is 0 otherwise.
func allStale(inv *kubev1alpha1.NodeInventory) int {
	if inv == nil || len(inv.Status.AtProvider.Nodes) < 2 {
		return 0
	}
	if c, ok := snapshot.InventoryCondition(inv, snapshot.TypeSynced); ok && c.Status == "False" {
		return 0
	}
	for _, n := range inv.Status.AtProvider.Nodes {
		if !n.Stale {
			return 0
		}
	}
	return len(inv.Status.AtProvider.Nodes)
}
