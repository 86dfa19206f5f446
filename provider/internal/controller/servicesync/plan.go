/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package servicesync

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
// EndpointSlices a ServiceSync writes: the endpointslice controllers of
// the member leave them alone.
const ManagedBy = "services.kilomesh.io"

// ConditionEndpointsRefused is the condition of a ServiceExport whose
// Service has endpoints the mesh cannot route to.
const ConditionEndpointsRefused = "kilomesh.io/EndpointsRefused"

// Reasons of the conditions a ServiceSync writes on ServiceExports.
const (
	ReasonEndpointsRefused = "EndpointsOutsideNetworks"
	ReasonAllRoutable      = "AllRoutable"
	// ReasonInvalidExport: Valid=False, the labels or annotations the
	// ServiceExport exports could not be carried (past their bounds, or
	// keys or values the API server refuses).
	ReasonInvalidExport = "InvalidExportedMetadata"
	// ReasonInvalidService: Valid=False, the Service holds what no Service
	// may, which only a member's own API server could hand out.
	ReasonInvalidService = "InvalidServiceSpec"
	maxRefusedListed     = 3
	maxConflictMessage   = 512
	// maxEndpoints is what one EndpointSlice holds.
	maxEndpoints = 1000
)

// An Exporter is a member of the ClusterSet as one reconcile sees it.
type Exporter struct {
	// Name of the member, and its cluster ID.
	Name, ClusterID string
	// Networks its endpoints may lie in.
	Networks []netip.Prefix
	// Views by namespace; nil while the member cannot be read, when what
	// it exported stays imported as it is.
	Views map[string]*remote.ServiceView
	// foreign are the networks of the other members: an endpoint of this
	// one there is refused, whatever its own networks say.
	foreign []netip.Prefix
}

// Input is what a plan is made of.
type Input struct {
	// Selector holds the labels of every object the ServiceSync owns.
	Selector map[string]string
	// Owner identifies the mesh in derived names: its namespace and name.
	Owner [2]string
	// Manager is the mesh's field manager of the conditions of exports,
	// see StatusManager.
	Manager string
	// Namespaces shared, and the mesh's family (IPv4 or IPv6).
	Namespaces []string
	Family     string
	// Local is the member itself, which exports too; Sources the others.
	Local   Exporter
	Sources []Exporter
	// Seen is when each export was first seen, by Service (namespace/name)
	// and cluster ID, as the ServiceSync's status recorded it; Now is the
	// time of an export seen for the first time.
	Seen map[SeenKey]metav1.Time
	Now  metav1.Time
	// Guarded are addresses of the member itself (its API server's) that
	// no endpoint imported from a source may have.
	Guarded []netip.Addr
}

// SeenKey names one exporter's export of a Service.
type SeenKey struct{ Service, Cluster string }

// An Import is a Service the member imports, with every object behind it.
type Import struct {
	Namespace, Name string
	Import          *mcsv1beta1.ServiceImport
	// Service is the Service without a selector whose ClusterIP becomes the
	// import's IP; nil for a headless import.
	Service *corev1.Service
	Slices  []*discoveryv1.EndpointSlice
	// HaveImport and HaveService are the member's own, if they exist.
	HaveImport  *mcsv1beta1.ServiceImport
	HaveService *corev1.Service
	// HaveSlices are the member's own EndpointSlices of the import, by name.
	HaveSlices map[string]*discoveryv1.EndpointSlice
}

// ExportStatus is a ServiceExport of the member whose conditions change.
type ExportStatus struct {
	Namespace, Name string
	Conditions      []metav1.Condition
}

// A Plan says what one reconcile writes into the member.
type Plan struct {
	Imports        []Import
	DeleteImports  []*mcsv1beta1.ServiceImport
	DeleteServices []*corev1.Service
	DeleteSlices   []*discoveryv1.EndpointSlice
	Exports        []ExportStatus
	Problems       []v1alpha1.ServiceProblem
	// Counts for the status.
	Exported, Refused int
	// Seen is when each export of an imported Service was first seen.
	Seen []v1alpha1.ExportSeen
	// Incomplete says which watches left objects out, past their bounds:
	// the plan then writes and deletes nothing, since what is missing
	// would pass for deleted.
	Incomplete string
}

// candidate is one ServiceExport of one member.
type candidate struct {
	e        *Exporter
	export   *mcsv1beta1.ServiceExport
	svc      *corev1.Service
	valid    metav1.Condition
	conflict metav1.Condition
	typ      mcsv1beta1.ServiceImportType
	ports    []mcsv1beta1.ServicePort
	// labels and annotations the export exports, as an import carries
	// them.
	labels, annotations map[string]string
	// dropped are the ports of the export the ClusterSet does not take.
	dropped []string
	// lost tells whether the ClusterSet left out anything of the export:
	// its type, a port, a property where another export won.
	lost bool
	// endpoints accepted, their ports, and the addresses refused.
	endpoints []discoveryv1.Endpoint
	epPorts   []discoveryv1.EndpointPort
	refused   []string
	excluded  bool
	// writes tells whether the mesh writes the export's conditions.
	writes bool
	// seen is when the export was first seen.
	seen metav1.Time
	// guarded are addresses its endpoints may not have.
	guarded []netip.Addr
}

// Owns tells whether an object carries every label of the selector.
func Owns(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// NewPlan decides what the member must hold.
func NewPlan(in Input) Plan {
	var p Plan
	exporters := make([]*Exporter, 0, 1+len(in.Sources))
	exporters = append(exporters, &in.Local)
	for i := range in.Sources {
		exporters = append(exporters, &in.Sources[i])
	}
	for _, e := range exporters {
		e.foreign = nil
		for _, o := range exporters {
			if o != e {
				e.foreign = append(e.foreign, o.Networks...)
			}
		}
	}
	if why := incomplete(exporters, in.Namespaces); why != "" {
		// What the plan would write or delete is unknown: it keeps the
		// member as it is, and when it first saw each export.
		for k, t := range in.Seen {
			p.Seen = append(p.Seen, v1alpha1.ExportSeen{Service: k.Service, Cluster: k.Cluster, Since: t})
		}
		return Plan{Incomplete: why, Seen: sortSeen(p.Seen)}
	}
	kept := map[string]bool{}
	for _, e := range exporters[1:] {
		if e.Views == nil {
			kept[e.ClusterID] = true
		}
	}
	for _, ns := range in.Namespaces {
		planNamespace(&p, in, ns, exporters, kept)
	}
	// A source that cannot be read keeps what it exported, and when.
	have := make(map[SeenKey]bool, len(p.Seen))
	for _, s := range p.Seen {
		have[SeenKey{Service: s.Service, Cluster: s.Cluster}] = true
	}
	for k, t := range in.Seen {
		if kept[k.Cluster] && !have[k] {
			p.Seen = append(p.Seen, v1alpha1.ExportSeen{Service: k.Service, Cluster: k.Cluster, Since: t})
		}
	}
	p.Seen = sortSeen(p.Seen)
	return p
}

// sortSeen sorts the record of exports seen, and bounds it.
func sortSeen(seen []v1alpha1.ExportSeen) []v1alpha1.ExportSeen {
	sort.Slice(seen, func(i, j int) bool {
		if seen[i].Service != seen[j].Service {
			return seen[i].Service < seen[j].Service
		}
		return seen[i].Cluster < seen[j].Cluster
	})
	return seen[:min(len(seen), v1alpha1.MaxFirstSeen)]
}

// incomplete names the watches, of the member or of a source, that left
// objects out past their bounds, or "".
func incomplete(exporters []*Exporter, namespaces []string) string {
	var out []string
	for i, e := range exporters {
		who := "the member"
		if i > 0 {
			who = "source " + e.Name
		}
		for _, ns := range namespaces {
			if v := e.Views[ns]; v != nil && len(v.Incomplete) > 0 {
				out = append(out, fmt.Sprintf("%s, namespace %s: %s", who, ns, strings.Join(v.Incomplete, ", ")))
			}
		}
	}
	return strings.Join(out, "; ")
}

func planNamespace(p *Plan, in Input, ns string, exporters []*Exporter, kept map[string]bool) {
	local := in.Local.Views[ns]
	if local == nil {
		local = &remote.ServiceView{}
	}
	byName, mine := candidatesOf(in, ns, exporters)
	have := indexLocal(in.Selector, local)
	wanted := map[string]bool{}
	wantedSvc := map[string]bool{}
	desiredSlices := map[string]bool{}
	for _, n := range sortedKeys(byName) {
		cands := byName[n]
		for _, c := range cands {
			key := SeenKey{Service: ns + "/" + n, Cluster: c.e.ClusterID}
			c.seen = in.Now
			if t, ok := in.Seen[key]; ok {
				c.seen = t
			}
			p.Seen = append(p.Seen, v1alpha1.ExportSeen{Service: key.Service, Cluster: key.Cluster, Since: c.seen})
		}
		ports := resolve(cands)
		imp, problem := importOf(in, ns, n, cands, ports, kept, have)
		if problem != nil {
			p.Problems = append(p.Problems, *problem)
			continue
		}
		wanted[n] = true
		if imp.Service != nil {
			wantedSvc[imp.Service.Name] = true
		}
		for _, s := range imp.Slices {
			desiredSlices[s.Name] = true
		}
		p.Imports = append(p.Imports, *imp)
	}
	for _, c := range mine {
		countExport(p, c)
	}
	planDeletions(p, in.Selector, local, kept, wanted, wantedSvc, desiredSlices)
}

// candidatesOf returns the valid exports of a namespace by Service name,
// with their endpoints, and every export of the member itself.
func candidatesOf(in Input, ns string, exporters []*Exporter) (map[string][]*candidate, []*candidate) {
	byName := map[string][]*candidate{}
	var mine []*candidate
	for _, e := range exporters {
		v := e.Views[ns]
		if v == nil {
			continue
		}
		services := map[string]*corev1.Service{}
		for _, s := range v.Services {
			services[s.Name] = s
		}
		slices := ownSlices(v)
		for _, x := range v.Exports {
			if x.DeletionTimestamp != nil || !readsExport(in.Owner, x) {
				continue
			}
			c := &candidate{e: e, export: x, svc: services[x.Name]}
			validate(c, in.Selector)
			if e == exporters[0] {
				c.writes = writesConditions(in.Manager, x)
				mine = append(mine, c)
			}
			if c.valid.Status == metav1.ConditionTrue {
				if e != exporters[0] {
					c.guarded = in.Guarded
				}
				endpointsOf(c, slices[x.Name], in.Family)
				byName[x.Name] = append(byName[x.Name], c)
			}
		}
	}
	return byName, mine
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// held is what the member holds in one namespace: its ServiceImports and
// Services by name, and the mesh's EndpointSlices by imported Service.
type held struct {
	imports  map[string]*mcsv1beta1.ServiceImport
	services map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
}

func indexLocal(selector map[string]string, local *remote.ServiceView) held {
	h := held{
		imports:  make(map[string]*mcsv1beta1.ServiceImport, len(local.Imports)),
		services: make(map[string]*corev1.Service, len(local.Services)),
		slices:   map[string][]*discoveryv1.EndpointSlice{},
	}
	for _, i := range local.Imports {
		h.imports[i.Name] = i
	}
	for _, s := range local.Services {
		h.services[s.Name] = s
	}
	for _, s := range local.Slices {
		if Owns(selector, s.Labels) {
			n := s.Labels[mcsv1beta1.LabelServiceName]
			h.slices[n] = append(h.slices[n], s)
		}
	}
	return h
}

// countExport counts one of the member's exports for the status, and
// plans its conditions.
func countExport(p *Plan, c *candidate) {
	valid := c.valid.Status == metav1.ConditionTrue
	if valid && !c.excluded {
		p.Exported++
	}
	if !valid || c.lost || len(c.refused) > 0 {
		p.Refused++
	}
	if !c.writes {
		return
	}
	if st, changed := exportStatus(c); changed {
		p.Exports = append(p.Exports, st)
	}
}

// planDeletions plans the deletion of what the member holds of the mesh
// and no longer wants, except what a source that cannot be read exported.
func planDeletions(p *Plan, selector map[string]string, local *remote.ServiceView, kept, wanted, wantedSvc, desiredSlices map[string]bool) {
	// Names imported from a source that cannot be read stay as they are.
	keptNames := map[string]bool{}
	for _, s := range local.Slices {
		if Owns(selector, s.Labels) && kept[s.Labels[mcsv1beta1.LabelSourceCluster]] {
			keptNames[s.Labels[mcsv1beta1.LabelServiceName]] = true
		}
	}
	for _, i := range local.Imports {
		if Owns(selector, i.Labels) && !wanted[i.Name] && !keptNames[i.Name] {
			p.DeleteImports = append(p.DeleteImports, i)
		}
	}
	for _, s := range local.Services {
		// A Service kilomesh did not make is never its own, labels or not.
		if Owns(selector, s.Labels) && madeByKilomesh(s) && s.Spec.Selector == nil && !wantedSvc[s.Name] && !keptNames[s.Labels[mcsv1beta1.LabelServiceName]] {
			p.DeleteServices = append(p.DeleteServices, s)
		}
	}
	for _, s := range local.Slices {
		if Owns(selector, s.Labels) && !desiredSlices[s.Name] && !kept[s.Labels[mcsv1beta1.LabelSourceCluster]] {
			p.DeleteSlices = append(p.DeleteSlices, s)
		}
	}
}

// validate sets the Valid condition of an export: its Service must exist,
// have a ClusterIP or be headless, and hold what a Service may; the labels
// and annotations it exports must be ones an import can carry.
func validate(c *candidate, selector map[string]string) {
	var (
		left    []string
		badMeta string
	)
	if c.svc != nil {
		c.labels, c.annotations, left, badMeta = exportedMetadata(c.export, selector)
	}
	switch {
	case c.svc == nil:
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, mcsv1beta1.ServiceExportReasonNoService, "the Service "+c.export.Name+" does not exist")
	case c.svc.Spec.Type == corev1.ServiceTypeExternalName:
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, mcsv1beta1.ServiceExportReasonInvalidServiceType, "a Service of type ExternalName cannot be exported")
	case badMeta != "":
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, ReasonInvalidExport, safeMessage(badMeta))
	case invalidService(c.svc) != "":
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, ReasonInvalidService, safeMessage("the Service: "+invalidService(c.svc)))
	default:
		msg := "the Service is exported"
		if len(left) > 0 {
			msg += "; not carried to the imports, as kilomesh and MCS own them: " + strings.Join(left, ", ")
		}
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, true, mcsv1beta1.ServiceExportReasonValid, safeMessage(msg))
		c.typ = mcsv1beta1.ClusterSetIP
		if c.svc.Spec.ClusterIP == corev1.ClusterIPNone {
			c.typ = mcsv1beta1.Headless
		}
		for _, sp := range c.svc.Spec.Ports {
			c.ports = append(c.ports, mcsv1beta1.ServicePort{Name: sp.Name, Protocol: sp.Protocol, Port: sp.Port, AppProtocol: sp.AppProtocol})
		}
	}
	c.conflict = cond(mcsv1beta1.ServiceExportConditionConflict, false, mcsv1beta1.ServiceExportReasonNoConflicts, "no conflict with the other exporters of the Service")
}

// endpointsOf collects the ready endpoints of an export that the mesh can
// route to: of the mesh's family, inside the exporter's networks.
func endpointsOf(c *candidate, slices []*discoveryv1.EndpointSlice, family string) {
	ports := map[string]discoveryv1.EndpointPort{}
	seen := map[string]bool{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			c.accept(ep, s.AddressType, family, seen)
		}
		for _, pt := range s.Ports {
			if validEndpointPort(pt) {
				ports[ptr.Deref(pt.Name, "")] = pt
			}
		}
	}
	sort.Slice(c.endpoints, func(i, j int) bool { return c.endpoints[i].Addresses[0] < c.endpoints[j].Addresses[0] })
	if len(c.endpoints) > maxEndpoints {
		c.refused = append(c.refused, fmt.Sprintf("%d endpoints past the %d one EndpointSlice holds", len(c.endpoints)-maxEndpoints, maxEndpoints))
		c.endpoints = c.endpoints[:maxEndpoints]
	}
	for _, k := range sortedKeys(ports) {
		c.epPorts = append(c.epPorts, ports[k])
	}
	sort.Strings(c.refused)
}

// ownSlices returns a view's EndpointSlices by the Service they are of,
// in the view's order, each a Service's own: never one that is an import
// itself (by any implementation of MCS) or written by kilomesh. Indexed
// once per view, not searched once per export: a member of 1,000 exports
// holds thousands of slices.
func ownSlices(v *remote.ServiceView) map[string][]*discoveryv1.EndpointSlice {
	out := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range v.Slices {
		if s.Labels[mcsv1beta1.LabelSourceCluster] == "" && s.Labels["app.kubernetes.io/managed-by"] != "kilomesh" && s.DeletionTimestamp == nil {
			n := s.Labels[discoveryv1.LabelServiceName]
			out[n] = append(out[n], s)
		}
	}
	return out
}

// accept adds a ready endpoint the mesh routes to, once, and records any
// other ready endpoint as refused.
func (c *candidate) accept(ep discoveryv1.Endpoint, t discoveryv1.AddressType, family string, seen map[string]bool) {
	if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
		return
	}
	addr := ep.Addresses[0]
	a, err := netip.ParseAddr(addr)
	if err != nil || string(t) != family || (family == "IPv4") != a.Is4() || a.Zone() != "" || !inside(c.e.Networks, a) ||
		inside(c.e.foreign, a) || slices.Contains(c.guarded, a.Unmap()) {
		c.refused = append(c.refused, addr)
		return
	}
	if seen[addr] {
		return
	}
	seen[addr] = true
	out := discoveryv1.Endpoint{Addresses: []string{a.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	if h := ptr.Deref(ep.Hostname, ""); h != "" {
		out.Hostname = &h
	}
	c.endpoints = append(c.endpoints, out)
}

func inside(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// resolve applies MCS's conflict rule to the exporters of one Service, and
// returns the ClusterSet's ports. The oldest ServiceExport wins, by when
// the provider first saw it (never the creation time the exporter claims,
// which a member's API server may forge), then by cluster ID. An export of
// another type is left out; the ports are the union of the others', and
// any other property in conflict is the winner's, the export still
// imported. A conflict is reported on every export of the Service, the
// winner's too, as MCS recommends, each naming the clusters that differ.
func resolve(cands []*candidate) []mcsv1beta1.ServicePort {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].seen, cands[j].seen
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return cands[i].e.ClusterID < cands[j].e.ClusterID
	})
	win := cands[0]
	var clashes []clash
	typ := clash{reason: mcsv1beta1.ServiceExportReasonTypeConflict, what: "type"}
	for _, c := range cands[1:] {
		if c.typ != win.typ {
			c.excluded, c.lost = true, true
			typ.others = append(typ.others, c.e.ClusterID)
		}
	}
	if len(typ.others) > 0 {
		clashes = append(clashes, typ)
	}
	ports, portClash := mergePorts(cands)
	if len(portClash.others) > 0 {
		clashes = append(clashes, portClash)
	}
	for _, pr := range properties {
		cl := clash{reason: pr.reason, what: pr.what}
		w := pr.value(win)
		for _, c := range cands[1:] {
			v := pr.value(c)
			if c.excluded || v == w || (pr.onlySet && (v == "" || w == "")) {
				continue
			}
			c.lost = true
			cl.others = append(cl.others, c.e.ClusterID)
		}
		if len(cl.others) > 0 {
			clashes = append(clashes, cl)
		}
	}
	for _, c := range cands {
		c.conflict = conflictOf(c, win, clashes)
	}
	return ports
}

// A clash is one property on which the exports of a Service differ: the
// reason MCS gives it, what it is, and the clusters whose export differs
// from the winner's.
type clash struct {
	reason mcsv1beta1.ServiceExportConditionReason
	what   string
	others []string
}

// A property of an export that every export of a Service must share.
type property struct {
	reason mcsv1beta1.ServiceExportConditionReason
	what   string
	value  func(*candidate) string
	// onlySet compares exports that both set it: a session affinity's
	// timeout is compared only between exports of ClientIP affinity.
	onlySet bool
}

var properties = []property{
	{reason: mcsv1beta1.ServiceExportReasonSessionAffinityConflict, what: "session affinity", value: func(c *candidate) string { return string(affinityOf(c.svc)) }},
	{reason: mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, what: "session affinity timeout", onlySet: true, value: func(c *candidate) string {
		if affinityOf(c.svc) != corev1.ServiceAffinityClientIP {
			return ""
		}
		return fmt.Sprintf("%ds", timeoutOf(c.svc))
	}},
	{reason: mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, what: "internal traffic policy", value: func(c *candidate) string {
		return string(ptr.Deref(c.svc.Spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster))
	}},
	{reason: mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, what: "traffic distribution", value: func(c *candidate) string {
		return ptr.Deref(c.svc.Spec.TrafficDistribution, "")
	}},
	{reason: mcsv1beta1.ServiceExportReasonLabelsConflict, what: "exported labels", value: func(c *candidate) string { return canonical(c.labels) }},
	{reason: mcsv1beta1.ServiceExportReasonAnnotationsConflict, what: "exported annotations", value: func(c *candidate) string { return canonical(c.annotations) }},
}

// conflictOf is the Conflict condition of one export of a Service: True on
// every export when any clash, its reasons joined by commas as MCS allows,
// its message naming the clusters that differ and the one that won.
func conflictOf(c, win *candidate, clashes []clash) metav1.Condition {
	if len(clashes) == 0 {
		return cond(mcsv1beta1.ServiceExportConditionConflict, false, mcsv1beta1.ServiceExportReasonNoConflicts, "no conflict with the other exporters of the Service")
	}
	reasons := make([]string, 0, len(clashes))
	msgs := make([]string, 0, len(clashes)+1)
	for _, cl := range clashes {
		// An export left out for its type shares no other property.
		if c.excluded && cl.reason != mcsv1beta1.ServiceExportReasonTypeConflict {
			continue
		}
		reasons = append(reasons, string(cl.reason))
		var m string
		switch {
		case slices.Contains(cl.others, c.e.ClusterID):
			m = fmt.Sprintf("its %s: not the ClusterSet's", cl.what)
		case c == win:
			m = fmt.Sprintf("the %s of %s: not this export's", cl.what, clusters(cl.others))
		default:
			m = fmt.Sprintf("the %s of %s: not the ClusterSet's", cl.what, clusters(cl.others))
		}
		switch {
		case cl.reason == mcsv1beta1.ServiceExportReasonTypeConflict && c.excluded:
			m = fmt.Sprintf("the Service is %s, the ClusterSet's is %s: its endpoints are not imported", c.typ, win.typ)
		case cl.reason == mcsv1beta1.ServiceExportReasonPortConflict:
			m += " (the ClusterSet has the union of the ports"
			if len(c.dropped) > 0 {
				m += ", without this export's " + strings.Join(c.dropped, "; ")
			}
			m += ")"
		}
		msgs = append(msgs, string(cl.reason)+": "+m)
	}
	if c == win {
		msgs = append(msgs, "this export, seen first, wins")
	} else {
		msgs = append(msgs, "the export seen first, of cluster "+win.e.ClusterID+", wins")
	}
	return cond(mcsv1beta1.ServiceExportConditionConflict, true, mcsv1beta1.ServiceExportConditionReason(strings.Join(reasons, ",")), safeMessage(strings.Join(msgs, "; ")))
}

// clusters names clusters in a message.
func clusters(ids []string) string {
	if len(ids) == 1 {
		return "cluster " + ids[0]
	}
	return "clusters " + strings.Join(ids, ", ")
}

// canonical is a map in one string, sorted, to compare.
func canonical(m map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String()
}

// affinityOf is a Service's session affinity: None unless ClientIP.
func affinityOf(s *corev1.Service) corev1.ServiceAffinity {
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		return corev1.ServiceAffinityClientIP
	}
	return corev1.ServiceAffinityNone
}

// timeoutOf is the timeout of a Service's ClientIP affinity, Kubernetes'
// default when it sets none.
func timeoutOf(s *corev1.Service) int32 {
	if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		return *c.ClientIP.TimeoutSeconds
	}
	return corev1.DefaultClientIPServiceAffinitySeconds
}

// mergePorts merges the ports of the exports of one Service by MCS's
// rule: the union of their ports, merged first by name, then by protocol
// and number, the oldest export's port winning, so that the ports are
// those a Service may have: no two of one name (unnamed included), no two
// of one protocol and number, and a name on each when there are several.
// A port a Service could not carry (a name that is not a DNS label, a
// number out of range, an unknown protocol or appProtocol) is dropped. A
// port dropped is reported on its export; the others are imported. Ports
// that differ among the exports are a clash, named by the clusters whose
// ports differ from the winner's.
func mergePorts(cands []*candidate) ([]mcsv1beta1.ServicePort, clash) {
	var out []mcsv1beta1.ServicePort
	byName := map[string]mcsv1beta1.ServicePort{}
	byNumber := map[string]mcsv1beta1.ServicePort{}
	win := cands[0]
	cl := clash{reason: mcsv1beta1.ServiceExportReasonPortConflict, what: "ports"}
	winPorts := portSet(win.ports)
	for _, c := range cands {
		if c.excluded {
			continue
		}
		for _, pt := range c.ports {
			if why := invalidPort(pt); why != "" {
				c.dropped = append(c.dropped, why)
				continue
			}
			number := fmt.Sprintf("%d/%s", pt.Port, protocol(pt.Protocol))
			have, named := byName[pt.Name]
			other, numbered := byNumber[number]
			switch {
			case named && portString(have) == portString(pt):
				// The same port.
			case named:
				c.dropped = append(c.dropped, fmt.Sprintf("port %q (%s), which is %d/%s in the ClusterSet", pt.Name, portString(pt), have.Port, protocol(have.Protocol)))
			case numbered:
				c.dropped = append(c.dropped, fmt.Sprintf("port %s named %q, which is %q in the ClusterSet", number, pt.Name, other.Name))
			case len(out) > 0 && (pt.Name == "" || unnamed(byName)):
				c.dropped = append(c.dropped, fmt.Sprintf("port %s, unnamed here or in the ClusterSet, which has other ports: a Service of several ports names each", number))
			default:
				byName[pt.Name] = pt
				byNumber[number] = pt
				out = append(out, pt)
			}
		}
		if len(c.dropped) > 0 {
			c.lost = true
		}
		if c != win && (len(c.dropped) > 0 || portSet(c.ports) != winPorts) {
			cl.others = append(cl.others, c.e.ClusterID)
		}
	}
	if len(win.dropped) > 0 && len(cl.others) == 0 {
		// The winner's own port no Service could carry.
		cl.others = []string{win.e.ClusterID}
	}
	return out, cl
}

// portString is a port's number, protocol and appProtocol.
func portString(pt mcsv1beta1.ServicePort) string {
	s := fmt.Sprintf("%d/%s", pt.Port, protocol(pt.Protocol))
	if pt.AppProtocol != nil {
		s += " " + *pt.AppProtocol
	}
	return s
}

// portSet is the ports of an export in one string, to compare.
func portSet(ports []mcsv1beta1.ServicePort) string {
	out := make([]string, 0, len(ports))
	for _, pt := range ports {
		out = append(out, pt.Name+"="+portString(pt))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// exportedMetadata returns the labels and annotations an export exports
// as an import carries them, the keys it leaves out (kilomesh's own and
// MCS's, the mesh's selector's), and why they cannot be carried at all, or
// "": keys and values the API server would refuse, or past kilomesh's
// bounds (see remote.MaxExportedEntries), named by their field path.
func exportedMetadata(x *mcsv1beta1.ServiceExport, selector map[string]string) (labels, annotations map[string]string, left []string, why string) {
	if r := x.Annotations[remote.AnnotationSlimRefused]; r != "" {
		return nil, nil, nil, r
	}
	spec := field.NewPath("spec")
	total := 0
	check := func(name string, m map[string]string, value func(string) []string) (map[string]string, string) {
		path := spec.Child(name)
		if len(m) > remote.MaxExportedEntries {
			return nil, field.TooMany(path, len(m), remote.MaxExportedEntries).Error()
		}
		var out map[string]string
		for _, k := range sortedKeys(m) {
			v := m[k]
			total += len(k) + len(v)
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return nil, field.Invalid(path.Key(k), k, strings.Join(msgs, "; ")).Error()
			}
			if msgs := value(v); len(msgs) > 0 {
				return nil, field.Invalid(path.Key(k), v, strings.Join(msgs, "; ")).Error()
			}
			if reservedKey(k, selector) {
				left = append(left, path.Key(k).String())
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
		return out, ""
	}
	labels, why = check("exportedLabels", x.Spec.ExportedLabels, validation.IsValidLabelValue)
	if why != "" {
		return nil, nil, nil, why
	}
	annotations, why = check("exportedAnnotations", x.Spec.ExportedAnnotations, func(string) []string { return nil })
	if why != "" {
		return nil, nil, nil, why
	}
	if total > remote.MaxExportedBytes {
		return nil, nil, nil, fmt.Sprintf("spec.exportedLabels and spec.exportedAnnotations: Too long: %d bytes of keys and values, more than the %d an import carries", total, remote.MaxExportedBytes)
	}
	return labels, annotations, left, ""
}

// reservedKey tells whether a label or annotation key is kilomesh's own or
// MCS's, or one of the mesh's selector: an exported one of these would
// take over or disown the import, or forge what kilomesh or MCS say of it.
func reservedKey(k string, selector map[string]string) bool {
	if _, ok := selector[k]; ok || k == meshv1alpha1.LabelManagedBy {
		return true
	}
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	for _, own := range []string{"kilomesh.io", "multicluster.kubernetes.io"} {
		if prefix == own || strings.HasSuffix(prefix, "."+own) {
			return true
		}
	}
	return false
}

// invalidService says what of a Service no Service may hold, as only a
// member's own API server could hand it out, with its field path, or "".
func invalidService(s *corev1.Service) string {
	spec := field.NewPath("spec")
	switch s.Spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		return field.NotSupported(spec.Child("sessionAffinity"), s.Spec.SessionAffinity, []string{string(corev1.ServiceAffinityClientIP), string(corev1.ServiceAffinityNone)}).Error()
	}
	if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxAffinitySeconds {
			return field.Invalid(spec.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t, fmt.Sprintf("must be in the range 1-%d", maxAffinitySeconds)).Error()
		}
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil && *p != corev1.ServiceInternalTrafficPolicyCluster && *p != corev1.ServiceInternalTrafficPolicyLocal {
		return field.NotSupported(spec.Child("internalTrafficPolicy"), *p, []string{string(corev1.ServiceInternalTrafficPolicyCluster), string(corev1.ServiceInternalTrafficPolicyLocal)}).Error()
	}
	if d := s.Spec.TrafficDistribution; d != nil {
		if msgs := validation.IsQualifiedName(*d); len(msgs) > 0 {
			return field.Invalid(spec.Child("trafficDistribution"), *d, strings.Join(msgs, "; ")).Error()
		}
	}
	return ""
}

// maxAffinitySeconds is the longest ClientIP affinity a Service may have.
const maxAffinitySeconds = 86400

// invalidPort says why a Service could not carry a port, or "".
func invalidPort(pt mcsv1beta1.ServicePort) string {
	switch {
	case pt.Name != "" && len(validation.IsDNS1123Label(pt.Name)) > 0:
		return fmt.Sprintf("port %d: its name %q is not a DNS label", pt.Port, pt.Name)
	case len(validation.IsValidPortNum(int(pt.Port))) > 0:
		return fmt.Sprintf("port %d is out of range 1-65535", pt.Port)
	case !knownProtocol(pt.Protocol):
		return fmt.Sprintf("port %d: protocol %q is none of TCP, UDP and SCTP", pt.Port, pt.Protocol)
	case pt.AppProtocol != nil && len(validation.IsQualifiedName(*pt.AppProtocol)) > 0:
		return fmt.Sprintf("port %d: its appProtocol %q is not a qualified name", pt.Port, *pt.AppProtocol)
	}
	return ""
}

func unnamed(byName map[string]mcsv1beta1.ServicePort) bool {
	_, ok := byName[""]
	return ok
}

func knownProtocol(p corev1.Protocol) bool {
	switch protocol(p) {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return true
	}
	return false
}

// safeMessage cuts a condition's message to its bound.
func safeMessage(m string) string {
	if len(m) > maxConflictMessage {
		m = safetext.Cut(m, maxConflictMessage)
	}
	return m
}

func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// importOf builds what the member holds of one imported Service, or says
// why it cannot.
func importOf(in Input, ns, name string, cands []*candidate, ports []mcsv1beta1.ServicePort, kept map[string]bool, have held) (*Import, *v1alpha1.ServiceProblem) {
	derived := v1alpha1.DerivedName(in.Owner, ns, name)
	if problem := nameTaken(in.Selector, ns+"/"+name, derived, have.imports[name], have.services[derived]); problem != nil {
		return nil, problem
	}
	win := cands[0]
	imp := &Import{Namespace: ns, Name: name, HaveImport: have.imports[name], HaveService: have.services[derived], HaveSlices: map[string]*discoveryv1.EndpointSlice{}}
	for _, s := range have.slices[name] {
		imp.HaveSlices[s.Name] = s
	}
	exporters := clustersOf(cands, kept, have.slices[name])
	fam := corev1.IPFamily(in.Family)
	imp.Import = &mcsv1beta1.ServiceImport{
		// The selector's labels come last: an exported label never takes
		// them over.
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: withLabels(win.labels, in.Selector), Annotations: carriedAnnotations(win)},
		Spec:       importSpec(win, ports, fam),
	}
	for _, id := range exporters {
		imp.Import.Status.Clusters = append(imp.Import.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: id})
	}
	sliceLabels := map[string]string{
		mcsv1beta1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:  ManagedBy,
	}
	if win.typ == mcsv1beta1.ClusterSetIP {
		imp.Service = derivedService(in.Selector, ns, name, derived, fam, imp.Import.Spec)
		sliceLabels[discoveryv1.LabelServiceName] = derived
	}
	for _, c := range cands {
		if c.excluded {
			continue
		}
		l := withLabels(in.Selector, sliceLabels)
		l[mcsv1beta1.LabelSourceCluster] = c.e.ClusterID
		imp.Slices = append(imp.Slices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.SliceName(derived, c.e.ClusterID), Labels: l},
			AddressType: discoveryv1.AddressType(in.Family),
			Endpoints:   c.endpoints,
			Ports:       c.epPorts,
		})
	}
	return imp, nil
}

// nameTaken reports a ServiceImport, or a Service of the derived name,
// that the mesh does not own: it is left as it is.
func nameTaken(selector map[string]string, id, derived string, imp *mcsv1beta1.ServiceImport, svc *corev1.Service) *v1alpha1.ServiceProblem {
	switch {
	case imp != nil && !Owns(selector, imp.Labels):
		return &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a ServiceImport of this name that kilomesh does not own for this mesh exists in the member; it is left as it is"}
	case svc != nil && !Owns(selector, svc.Labels):
		return &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a Service named " + derived + " that kilomesh does not own exists in the member; it is left as it is"}
	case svc != nil && svc.Spec.Selector != nil:
		return &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a Service named " + derived + " with the mesh's labels has a selector: kilomesh never makes one, so it is not adopted (its pods would join the ClusterSet IP); it is left as it is"}
	case svc != nil && !madeByKilomesh(svc):
		return &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a Service named " + derived + " with the mesh's labels was not made by kilomesh (no field manager " + remote.ServicesFieldManager + "); it is left as it is"}
	}
	return nil
}

// madeByKilomesh tells whether kilomesh created or applied the Service:
// its managed fields name kilomesh's field manager.
func madeByKilomesh(svc *corev1.Service) bool {
	for _, m := range svc.ManagedFields {
		if m.Manager == remote.ServicesFieldManager {
			return true
		}
	}
	return false
}

// clustersOf returns the cluster IDs of the exporters of an import, with
// those of sources that cannot be read whose EndpointSlices the member
// keeps.
func clustersOf(cands []*candidate, kept map[string]bool, haveSlices []*discoveryv1.EndpointSlice) []string {
	var clusters []string
	for _, c := range cands {
		if !c.excluded {
			clusters = append(clusters, c.e.ClusterID)
		}
	}
	for _, s := range haveSlices {
		if id := s.Labels[mcsv1beta1.LabelSourceCluster]; kept[id] {
			clusters = append(clusters, id)
		}
	}
	sort.Strings(clusters)
	return clusters
}

// importSpec is the spec of an import: the ClusterSet's type and ports,
// the mesh's family, and what the winner's Service says of session
// affinity, internal traffic policy and traffic distribution.
func importSpec(win *candidate, ports []mcsv1beta1.ServicePort, fam corev1.IPFamily) mcsv1beta1.ServiceImportSpec {
	spec := mcsv1beta1.ServiceImportSpec{
		Type: win.typ, Ports: ports, IPFamilies: []corev1.IPFamily{fam},
		SessionAffinity:       affinityOf(win.svc),
		InternalTrafficPolicy: copyPtr(win.svc.Spec.InternalTrafficPolicy),
		TrafficDistribution:   copyPtr(win.svc.Spec.TrafficDistribution),
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeoutOf(win.svc))}}
	}
	return spec
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// carriedAnnotations are the annotations an import carries: those the
// winner's ServiceExport exports and, when there are labels or
// annotations, a hash of them all, so that a change is seen.
func carriedAnnotations(win *candidate) map[string]string {
	if len(win.labels)+len(win.annotations) == 0 {
		return nil
	}
	out := make(map[string]string, len(win.annotations)+1)
	for k, v := range win.annotations {
		out[k] = v
	}
	sum := sha256.Sum256([]byte(canonical(win.labels) + "\x00" + canonical(win.annotations)))
	out[meshv1alpha1.AnnotationExportedMetadata] = hex.EncodeToString(sum[:])
	return out
}

// derivedService is the Service without a selector behind a ClusterSetIP
// import. It carries the import's session affinity; not its internal
// traffic policy, since no imported endpoint is on a node of the member
// (Local would drop every packet), nor its traffic distribution, a hint
// the member's kube-proxy would read on EndpointSlices that hold no zone.
func derivedService(selector map[string]string, ns, name, derived string, fam corev1.IPFamily, spec mcsv1beta1.ServiceImportSpec) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: derived, Labels: withLabels(selector, map[string]string{mcsv1beta1.LabelServiceName: name})},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{fam}, IPFamilyPolicy: &single,
			SessionAffinity: spec.SessionAffinity, SessionAffinityConfig: spec.SessionAffinityConfig.DeepCopy(),
		},
	}
	for _, pt := range spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: pt.Name, Protocol: protocol(pt.Protocol), Port: pt.Port, AppProtocol: pt.AppProtocol})
	}
	return svc
}

// withLabels returns the selector's labels and the extra ones.
func withLabels(selector, extra map[string]string) map[string]string {
	l := make(map[string]string, len(selector)+len(extra))
	for k, v := range selector {
		l[k] = v
	}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func cond(t mcsv1beta1.ServiceExportConditionType, ok bool, reason mcsv1beta1.ServiceExportConditionReason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: msg}
}

// exportStatus returns the conditions of one of the member's exports, and
// whether they differ from those it has.
func exportStatus(c *candidate) (ExportStatus, bool) {
	ready := cond(mcsv1beta1.ServiceExportConditionReady, true, mcsv1beta1.ServiceExportReasonExported, "the Service is exported to the ClusterSet")
	switch {
	case c.valid.Status != metav1.ConditionTrue:
		ready = cond(mcsv1beta1.ServiceExportConditionReady, false, mcsv1beta1.ServiceExportReasonFailed, c.valid.Message)
	case c.excluded:
		ready = cond(mcsv1beta1.ServiceExportConditionReady, false, mcsv1beta1.ServiceExportReasonFailed, c.conflict.Message)
	}
	refused := metav1.Condition{Type: ConditionEndpointsRefused, Status: metav1.ConditionFalse, Reason: ReasonAllRoutable, Message: "every ready endpoint lies in the member's networks"}
	if len(c.refused) > 0 {
		listed := c.refused
		if len(listed) > maxRefusedListed {
			listed = listed[:maxRefusedListed]
		}
		nets := make([]string, 0, len(c.e.Networks))
		for _, n := range c.e.Networks {
			nets = append(nets, n.String())
		}
		refused = metav1.Condition{Type: ConditionEndpointsRefused, Status: metav1.ConditionTrue, Reason: ReasonEndpointsRefused,
			Message: fmt.Sprintf("%d endpoints are not exported: the mesh routes only the member's networks of its family (%s): %s", len(c.refused), strings.Join(nets, ", "), strings.Join(listed, ", "))}
	}
	want := []metav1.Condition{c.valid, ready, c.conflict, refused}
	have := map[string]metav1.Condition{}
	for _, h := range c.export.Status.Conditions {
		have[h.Type] = h
	}
	changed := false
	for i, w := range want {
		h, ok := have[w.Type]
		if ok && h.Status == w.Status && h.Reason == w.Reason && h.Message == w.Message && h.ObservedGeneration == c.export.Generation {
			want[i].LastTransitionTime = h.LastTransitionTime
			continue
		}
		if ok && h.Status == w.Status {
			want[i].LastTransitionTime = h.LastTransitionTime
		}
		changed = true
	}
	for i := range want {
		want[i].ObservedGeneration = c.export.Generation
	}
	return ExportStatus{Namespace: c.export.Namespace, Name: c.export.Name, Conditions: want}, changed
}

// readsExport tells whether the mesh (its namespace and name) reads an
// export: every mesh that shares its namespace reads one without the
// label kilomesh.io/mesh; one with it is read by the mesh it names only
// (of the namespace kilomesh.io/mesh-namespace names, if it does).
func readsExport(owner [2]string, x *mcsv1beta1.ServiceExport) bool {
	m, ok := x.Labels[meshv1alpha1.LabelMesh]
	if !ok {
		return true
	}
	ns, ok := x.Labels[meshv1alpha1.LabelMeshNamespace]
	return m == owner[1] && (!ok || ns == owner[0])
}

// StatusManager is the field manager with which a mesh writes the
// conditions of exports: one per mesh, at most 128 bytes.
func StatusManager(owner [2]string) string {
	m := remote.ServicesFieldManager + "/" + owner[0] + "/" + owner[1]
	if len(m) > 128 {
		m = remote.ServicesFieldManager + "/" + meshv1alpha1.IdentityHash(owner[0], owner[1])
	}
	return m
}

// writesConditions tells whether the mesh of the field manager writes the
// conditions of an export it reads: one that names it by label, or one
// whose conditions no other mesh holds. When several meshes hold them
// (their first writes crossed), the one of the smallest field manager
// keeps writing, and takes them over; the others stop. A mesh never
// writes over the conditions of a mesh that held them first, which
// releases them when it stops reading the export. The field manager of
// kilomesh before there was one per mesh is no mesh's.
func writesConditions(manager string, x *mcsv1beta1.ServiceExport) bool {
	if _, ok := x.Labels[meshv1alpha1.LabelMesh]; ok {
		return true
	}
	held, smallest := false, true
	others := false
	for _, m := range x.ManagedFields {
		if m.Subresource != "status" || !strings.HasPrefix(m.Manager, remote.ServicesFieldManager+"/") {
			continue
		}
		if m.Manager == manager {
			held = true
			continue
		}
		others = true
		if m.Manager < manager {
			smallest = false
		}
	}
	return !others || (held && smallest)
}

// validEndpointPort tells whether an EndpointSlice may carry the port: a
// hostile member's API server may send any. It is checked as a Service's
// port (invalidPort); a slice port without a number stands for every port,
// and one without a protocol is TCP.
func validEndpointPort(pt discoveryv1.EndpointPort) bool {
	return invalidPort(mcsv1beta1.ServicePort{
		Name:        ptr.Deref(pt.Name, ""),
		Port:        ptr.Deref(pt.Port, 1),
		Protocol:    ptr.Deref(pt.Protocol, ""),
		AppProtocol: pt.AppProtocol,
	}) == ""
}
