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
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
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
	maxRefusedListed       = 3
	maxConflictMessage     = 512
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
}

// Input is what a plan is made of.
type Input struct {
	// Selector holds the labels of every object the ServiceSync owns.
	Selector map[string]string
	// Owner identifies the mesh in derived names: its namespace and name.
	Owner [2]string
	// Namespaces shared, and the mesh's family (IPv4 or IPv6).
	Namespaces []string
	Family     string
	// Local is the member itself, which exports too; Sources the others.
	Local   Exporter
	Sources []Exporter
}

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
	// endpoints accepted, their ports, and the addresses refused.
	endpoints []discoveryv1.Endpoint
	epPorts   []discoveryv1.EndpointPort
	refused   []string
	excluded  bool
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

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// DerivedName is the name of the Service behind an import: a DNS-1035
// label unique to the mesh, the namespace and the Service.
func DerivedName(owner [2]string, namespace, name string) string {
	readable := name
	if len(readable) > 50 {
		readable = strings.TrimRight(readable[:50], "-")
	}
	return "mcs-" + readable + "-" + hash(owner[0], owner[1], namespace, name)
}

// SliceName is the name of the EndpointSlice of one exporter of an import.
func SliceName(derived, clusterID string) string {
	return derived + "-" + hash(clusterID)
}

// NewPlan decides what the member must hold.
func NewPlan(in Input) Plan {
	var p Plan
	exporters := make([]*Exporter, 0, 1+len(in.Sources))
	exporters = append(exporters, &in.Local)
	for i := range in.Sources {
		exporters = append(exporters, &in.Sources[i])
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
	return p
}

func planNamespace(p *Plan, in Input, ns string, exporters []*Exporter, kept map[string]bool) {
	local := in.Local.Views[ns]
	if local == nil {
		local = &remote.ServiceView{}
	}
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
		for _, x := range v.Exports {
			if x.DeletionTimestamp != nil {
				continue
			}
			c := &candidate{e: e, export: x, svc: services[x.Name]}
			validate(c)
			if e == exporters[0] {
				mine = append(mine, c)
			}
			if c.valid.Status == metav1.ConditionTrue {
				endpointsOf(c, v, in.Family)
				byName[x.Name] = append(byName[x.Name], c)
			}
		}
	}
	// Names imported from a source that cannot be read stay as they are.
	keptNames := map[string]bool{}
	for _, s := range local.Slices {
		if Owns(in.Selector, s.Labels) && kept[s.Labels[mcsv1beta1.LabelSourceCluster]] {
			keptNames[s.Labels[mcsv1beta1.LabelServiceName]] = true
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)

	imports := map[string]*mcsv1beta1.ServiceImport{}
	for _, i := range local.Imports {
		imports[i.Name] = i
	}
	services := map[string]*corev1.Service{}
	for _, s := range local.Services {
		services[s.Name] = s
	}
	slices := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range local.Slices {
		if Owns(in.Selector, s.Labels) {
			n := s.Labels[mcsv1beta1.LabelServiceName]
			slices[n] = append(slices[n], s)
		}
	}
	wanted := map[string]bool{}
	wantedSvc := map[string]bool{}
	for _, n := range names {
		cands := byName[n]
		resolve(cands)
		imp, problem := importOf(in, ns, n, cands, kept, imports[n], services, slices[n])
		if problem != nil {
			p.Problems = append(p.Problems, *problem)
			continue
		}
		if imp == nil {
			continue
		}
		wanted[n] = true
		if imp.Service != nil {
			wantedSvc[imp.Service.Name] = true
		}
		p.Imports = append(p.Imports, *imp)
	}
	for _, c := range mine {
		if c.valid.Status == metav1.ConditionTrue && !c.excluded {
			p.Exported++
		}
		if c.valid.Status != metav1.ConditionTrue || c.conflict.Status == metav1.ConditionTrue || len(c.refused) > 0 {
			p.Refused++
		}
		if st, changed := exportStatus(c); changed {
			p.Exports = append(p.Exports, st)
		}
	}
	// What the member holds of the mesh's and no longer wants goes, except
	// what a source that cannot be read exported.
	for _, i := range local.Imports {
		if Owns(in.Selector, i.Labels) && !wanted[i.Name] && !keptNames[i.Name] {
			p.DeleteImports = append(p.DeleteImports, i)
		}
	}
	for _, s := range local.Services {
		if Owns(in.Selector, s.Labels) && !wantedSvc[s.Name] && !keptNames[s.Labels[mcsv1beta1.LabelServiceName]] {
			p.DeleteServices = append(p.DeleteServices, s)
		}
	}
	desiredSlices := map[string]bool{}
	for _, imp := range p.Imports {
		if imp.Namespace != ns {
			continue
		}
		for _, s := range imp.Slices {
			desiredSlices[s.Name] = true
		}
	}
	for _, s := range local.Slices {
		if Owns(in.Selector, s.Labels) && !desiredSlices[s.Name] && !kept[s.Labels[mcsv1beta1.LabelSourceCluster]] {
			p.DeleteSlices = append(p.DeleteSlices, s)
		}
	}
}

// validate sets the Valid condition of an export: its Service must exist
// and have a ClusterIP or be headless.
func validate(c *candidate) {
	switch {
	case c.svc == nil:
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, mcsv1beta1.ServiceExportReasonNoService, "the Service "+c.export.Name+" does not exist")
	case c.svc.Spec.Type == corev1.ServiceTypeExternalName:
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, false, mcsv1beta1.ServiceExportReasonInvalidServiceType, "a Service of type ExternalName cannot be exported")
	default:
		c.valid = cond(mcsv1beta1.ServiceExportConditionValid, true, mcsv1beta1.ServiceExportReasonValid, "the Service is exported")
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
// route to: of the mesh's family, inside the exporter's networks. The
// EndpointSlices are those of the Service, never one that is an import
// itself (by any implementation of MCS) or written by kilomesh.
func endpointsOf(c *candidate, v *remote.ServiceView, family string) {
	ports := map[string]discoveryv1.EndpointPort{}
	seen := map[string]bool{}
	for _, s := range v.Slices {
		if s.Labels[discoveryv1.LabelServiceName] != c.export.Name || s.Labels[mcsv1beta1.LabelSourceCluster] != "" ||
			s.Labels["app.kubernetes.io/managed-by"] == "kilomesh" || s.DeletionTimestamp != nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			addr := ep.Addresses[0]
			a, err := netip.ParseAddr(addr)
			if err != nil || string(s.AddressType) != family || (family == "IPv4") != a.Is4() || a.Zone() != "" || !inside(c.e.Networks, a) {
				c.refused = append(c.refused, addr)
				continue
			}
			if seen[addr] {
				continue
			}
			seen[addr] = true
			out := discoveryv1.Endpoint{Addresses: []string{a.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTrue()}}
			if ep.Hostname != nil && *ep.Hostname != "" {
				h := *ep.Hostname
				out.Hostname = &h
			}
			c.endpoints = append(c.endpoints, out)
		}
		for _, pt := range s.Ports {
			k := ""
			if pt.Name != nil {
				k = *pt.Name
			}
			ports[k] = pt
		}
	}
	sort.Slice(c.endpoints, func(i, j int) bool { return c.endpoints[i].Addresses[0] < c.endpoints[j].Addresses[0] })
	if len(c.endpoints) > 1000 {
		c.refused = append(c.refused, fmt.Sprintf("%d endpoints past the 1000 one EndpointSlice holds", len(c.endpoints)-1000))
		c.endpoints = c.endpoints[:1000]
	}
	keys := make([]string, 0, len(ports))
	for k := range ports {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.epPorts = append(c.epPorts, ports[k])
	}
	sort.Strings(c.refused)
}

func ptrTrue() *bool { t := true; return &t }

func inside(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// resolve applies MCS's conflict rule to the exporters of one Service: the
// oldest ServiceExport (by creation time, then cluster ID) wins. An export
// of another type is left out; a port or session affinity in conflict is
// taken from the winner, and the export is still imported.
func resolve(cands []*candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].export.CreationTimestamp, cands[j].export.CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return cands[i].e.ClusterID < cands[j].e.ClusterID
	})
	win := cands[0]
	byName := map[string]mcsv1beta1.ServicePort{}
	for _, pt := range win.ports {
		byName[pt.Name] = pt
	}
	for _, c := range cands[1:] {
		switch {
		case c.typ != win.typ:
			c.excluded = true
			c.conflict = conflictWith(mcsv1beta1.ServiceExportReasonTypeConflict, win, fmt.Sprintf("the Service is %s, the ClusterSet's is %s", c.typ, win.typ))
		case c.svc.Spec.SessionAffinity != win.svc.Spec.SessionAffinity && c.svc.Spec.SessionAffinity != "" && win.svc.Spec.SessionAffinity != "":
			c.conflict = conflictWith(mcsv1beta1.ServiceExportReasonSessionAffinityConflict, win, "its session affinity "+string(c.svc.Spec.SessionAffinity)+" is not the ClusterSet's "+string(win.svc.Spec.SessionAffinity))
		}
		if c.excluded {
			continue
		}
		for _, pt := range c.ports {
			have, ok := byName[pt.Name]
			if !ok {
				byName[pt.Name] = pt
				continue
			}
			if have.Port != pt.Port || protocol(have.Protocol) != protocol(pt.Protocol) {
				c.conflict = conflictWith(mcsv1beta1.ServiceExportReasonPortConflict, win, fmt.Sprintf("port %q is %d/%s here, %d/%s in the ClusterSet", pt.Name, pt.Port, protocol(pt.Protocol), have.Port, protocol(have.Protocol)))
				break
			}
		}
	}
}

func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func conflictWith(reason mcsv1beta1.ServiceExportConditionReason, win *candidate, msg string) metav1.Condition {
	m := msg + "; the oldest export, of cluster " + win.e.ClusterID + ", wins"
	if len(m) > maxConflictMessage {
		m = m[:maxConflictMessage]
	}
	return cond(mcsv1beta1.ServiceExportConditionConflict, true, reason, m)
}

// importOf builds what the member holds of one imported Service, or says
// why it cannot.
func importOf(in Input, ns, name string, cands []*candidate, kept map[string]bool, have *mcsv1beta1.ServiceImport, services map[string]*corev1.Service, haveSlices []*discoveryv1.EndpointSlice) (*Import, *v1alpha1.ServiceProblem) {
	id := ns + "/" + name
	if have != nil && !Owns(in.Selector, have.Labels) {
		return nil, &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a ServiceImport of this name that kilomesh does not own for this mesh exists in the member; it is left as it is"}
	}
	derived := DerivedName(in.Owner, ns, name)
	haveSvc := services[derived]
	if haveSvc != nil && !Owns(in.Selector, haveSvc.Labels) {
		return nil, &v1alpha1.ServiceProblem{Service: id, Reason: v1alpha1.ReasonImportNameConflict, Message: "a Service named " + derived + " that kilomesh does not own exists in the member; it is left as it is"}
	}
	win := cands[0]
	imp := &Import{Namespace: ns, Name: name, HaveImport: have, HaveService: haveSvc, HaveSlices: map[string]*discoveryv1.EndpointSlice{}}
	for _, s := range haveSlices {
		imp.HaveSlices[s.Name] = s
	}
	labels := func(extra map[string]string) map[string]string {
		l := map[string]string{}
		for k, v := range in.Selector {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	// Ports of the import: the winner's, then the others' that do not
	// conflict, by name.
	var ports []mcsv1beta1.ServicePort
	seen := map[string]bool{}
	var clusters []string
	for _, c := range cands {
		if c.excluded {
			continue
		}
		clusters = append(clusters, c.e.ClusterID)
		if c.conflict.Status == metav1.ConditionTrue && c.conflict.Reason == string(mcsv1beta1.ServiceExportReasonPortConflict) {
			continue
		}
		for _, pt := range c.ports {
			if !seen[pt.Name] {
				seen[pt.Name] = true
				ports = append(ports, pt)
			}
		}
	}
	for _, s := range haveSlices {
		if id := s.Labels[mcsv1beta1.LabelSourceCluster]; kept[id] {
			clusters = append(clusters, id)
		}
	}
	sort.Strings(clusters)
	fam := corev1.IPFamily(in.Family)
	spec := mcsv1beta1.ServiceImportSpec{Type: win.typ, Ports: ports, IPFamilies: []corev1.IPFamily{fam}}
	if win.svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}
	imp.Import = &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels(nil)},
		Spec:       spec,
	}
	for _, id := range clusters {
		imp.Import.Status.Clusters = append(imp.Import.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: id})
	}
	sliceLabels := map[string]string{
		mcsv1beta1.LabelServiceName: name,
		discoveryv1.LabelManagedBy:  ManagedBy,
	}
	if win.typ == mcsv1beta1.ClusterSetIP {
		single := corev1.IPFamilyPolicySingleStack
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: derived, Labels: labels(map[string]string{mcsv1beta1.LabelServiceName: name})},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{fam}, IPFamilyPolicy: &single,
				SessionAffinity: spec.SessionAffinity,
			},
		}
		if spec.SessionAffinity == "" {
			svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
		}
		for _, pt := range ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: pt.Name, Protocol: protocol(pt.Protocol), Port: pt.Port, AppProtocol: pt.AppProtocol})
		}
		imp.Service = svc
		sliceLabels[discoveryv1.LabelServiceName] = derived
	}
	for _, c := range cands {
		if c.excluded {
			continue
		}
		l := labels(sliceLabels)
		l[mcsv1beta1.LabelSourceCluster] = c.e.ClusterID
		imp.Slices = append(imp.Slices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: SliceName(derived, c.e.ClusterID), Labels: l},
			AddressType: discoveryv1.AddressType(in.Family),
			Endpoints:   c.endpoints,
			Ports:       c.epPorts,
		})
	}
	return imp, nil
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
