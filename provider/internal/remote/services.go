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

package remote

import (
	"context"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Bounds of the watches of one kind of object in one namespace of a
// member: a hostile member cannot make the provider hold more.
const (
	// MaxServiceObjects is the most objects of one kind a namespace's
	// watch keeps.
	MaxServiceObjects = 20_000
	// maxServiceBytes is the most memory they take.
	maxServiceBytes = 64 << 20
	// servicePageSize is how many objects a page of a list holds.
	servicePageSize = 500
	// maxSliceEndpoints is the most endpoints kept of one EndpointSlice:
	// the API server's own limit.
	maxSliceEndpoints = 1000
	// maxKeptPorts is the most ports kept of a Service, an EndpointSlice
	// or a ServiceImport.
	maxKeptPorts = 256
	// maxKeptConditions is the most conditions kept of a ServiceExport.
	maxKeptConditions = 16
	// maxKeptClusters is the most clusters kept of a ServiceImport's
	// status.
	maxKeptClusters = 1024
	// maxKeptManagers is the most field managers of kilomesh kept of a
	// ServiceExport's status: which meshes wrote its conditions.
	maxKeptManagers = 8
	// maxFieldManagerBytes is a field manager's limit.
	maxFieldManagerBytes = 128
	// MaxExportedEntries is the most labels, and the most annotations, a
	// ServiceExport may export (spec.exportedLabels and
	// spec.exportedAnnotations): an import carries them into every member.
	MaxExportedEntries = 64
	// MaxExportedBytes is the most bytes of their keys and values
	// together.
	MaxExportedBytes = 32 << 10
)

// AnnotationSlimRefused is set on a slim ServiceExport, never on a
// member's object, when the labels or annotations it exports are past
// their bounds: they are not kept, and the annotation says where, for the
// export's conditions. A member's own annotations are never kept, so it
// cannot set it.
const AnnotationSlimRefused = "kilomesh.io/slim-refused"

// The longest value of each string a slim object keeps: the API server's
// own limit, so that a member's API server, which may send anything, gets
// no more memory than an honest one could take. A kept string is a copy
// of no more than its limit (see safetext.Cut), and what is kept is weighed
// byte for byte (see weighSlim).
const (
	// maxLabelBytes is a DNS label's, a label value's, a namespace's, an
	// endpoint's host name's and a port name's limit.
	maxLabelBytes = 63
	// maxSubdomainBytes is a DNS subdomain's limit: an object's name.
	maxSubdomainBytes = 253
	// maxQualifiedBytes is a qualified name's limit (a DNS subdomain, a
	// slash, a label): a condition's type, an appProtocol.
	maxQualifiedBytes = 317
	// maxWordBytes bounds what the API holds to a few words: a protocol, a
	// type, an IP family, a session affinity, a condition's status.
	maxWordBytes = 64
	// maxAddressBytes bounds an IP address (45 bytes at most) and a UID or
	// resource version.
	maxAddressBytes = 64
	// maxReasonBytes is a condition's reason's limit.
	maxReasonBytes = 1024
	// maxMessageBytes is what is kept of a condition's message.
	maxMessageBytes = 1024
)

const errFmtServiceKind = "cannot read %s in namespace %s"

// ServicesFieldManager is the field manager of the objects a ServiceSync
// creates in its member. A slim Service keeps one entry of its managed
// fields, with this manager only, when the Service has it: whether
// kilomesh made it.
const ServicesFieldManager = "kilomesh-services"

// Kinds of the namespaced watches of a ServiceSync.
const (
	KindServiceExport = "ServiceExports"
	KindService       = "Services"
	KindEndpointSlice = "EndpointSlices"
	KindServiceImport = "ServiceImports"
)

// serviceFeedKey names one namespaced watch.
type serviceFeedKey struct{ kind, namespace string }

// keptLabels are the labels a slim object keeps: those that say what an
// EndpointSlice belongs to and who owns an object.
var keptLabels = []string{
	discoveryv1.LabelServiceName,
	discoveryv1.LabelManagedBy,
	mcsv1beta1.LabelServiceName,
	mcsv1beta1.LabelSourceCluster,
	"app.kubernetes.io/managed-by",
	meshv1alpha1.LabelMeshNamespace,
	meshv1alpha1.LabelMesh,
}

func addServiceKinds(s *runtime.Scheme) {
	if err := mcsv1beta1.Install(s); err != nil {
		panic(err)
	}
	if err := discoveryv1.AddToScheme(s); err != nil {
		panic(err)
	}
}

func addServiceMappings(m *meta.DefaultRESTMapper) {
	m.AddSpecific(mcsv1beta1.SchemeGroupVersion.WithKind("ServiceExport"),
		mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports"), mcsv1beta1.SchemeGroupVersion.WithResource("serviceexport"), meta.RESTScopeNamespace)
	m.AddSpecific(mcsv1beta1.SchemeGroupVersion.WithKind("ServiceImport"),
		mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports"), mcsv1beta1.SchemeGroupVersion.WithResource("serviceimport"), meta.RESTScopeNamespace)
	m.Add(discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
}

// A ServiceView is what a member holds in one namespace, slim: its
// ServiceExports, Services, EndpointSlices and ServiceImports.
type ServiceView struct {
	Exports  []*mcsv1beta1.ServiceExport
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Imports  []*mcsv1beta1.ServiceImport
	// Incomplete names the kinds whose watch left objects out, past its
	// bounds, and the bounds; empty when the view holds everything.
	Incomplete []string
}

// ServiceObjects returns what the cluster holds in the namespace, starting
// its watches on first use. It fails while any of them cannot be read (an
// unreachable cluster, a missing grant, the MCS CRDs not installed), and
// returns ErrPending until each has first listed.
func (c *Cluster) ServiceObjects(_ context.Context, namespace string) (*ServiceView, error) {
	v := &ServiceView{}
	for _, kind := range []string{KindServiceExport, KindService, KindEndpointSlice, KindServiceImport} {
		f, err := c.serviceFeed(kind, namespace)
		if err != nil {
			return nil, err
		}
		items, err := f.items()
		if err != nil {
			return nil, errors.Wrapf(err, errFmtServiceKind, kind, namespace)
		}
		if why := f.incomplete(); why != "" {
			v.Incomplete = append(v.Incomplete, kind+" ("+why+")")
		}
		for _, o := range items {
			switch t := o.(type) {
			case *mcsv1beta1.ServiceExport:
				v.Exports = append(v.Exports, t)
			case *corev1.Service:
				v.Services = append(v.Services, t)
			case *discoveryv1.EndpointSlice:
				v.Slices = append(v.Slices, t)
			case *mcsv1beta1.ServiceImport:
				v.Imports = append(v.Imports, t)
			}
		}
	}
	return v, nil
}

// ServerAddr returns the address of the cluster's API server, when its
// host is an IP address.
func (c *Cluster) ServerAddr() (netip.Addr, bool) {
	u, err := url.Parse(c.cfg.Host)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(u.Hostname())
	return a.Unmap(), err == nil
}

// UseServices records the namespaces u reads of the cluster, and stops
// the watches of every namespace that no user reads any longer. The
// watches of a namespace are shared by count: two ServiceSyncs on one
// cluster (two meshes, or two tenants behind one ClusterProviderConfig)
// each keep the namespaces they read, whatever the other reads.
func (c *Cluster) UseServices(u User, namespaces []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serviceUsers == nil {
		c.serviceUsers = map[User]map[string]bool{}
	}
	ns := make(map[string]bool, len(namespaces))
	for _, n := range namespaces {
		ns[n] = true
	}
	c.serviceUsers[u] = ns
	c.stopUnusedServicesLocked()
}

// releaseServices records that u reads no namespace of the cluster.
func (c *Cluster) releaseServices(u User) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.serviceUsers[u]; !ok {
		return
	}
	delete(c.serviceUsers, u)
	c.stopUnusedServicesLocked()
}

func (c *Cluster) stopUnusedServicesLocked() {
	for k, f := range c.services {
		used := false
		for _, ns := range c.serviceUsers {
			if ns[k.namespace] {
				used = true
				break
			}
		}
		if !used {
			f.stop()
			delete(c.services, k)
		}
	}
}

// ServiceNamespaces returns the namespaces the cluster watches, sorted.
func (c *Cluster) ServiceNamespaces() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for k := range c.services {
		if !seen[k.namespace] {
			seen[k.namespace] = true
			out = append(out, k.namespace)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Cluster) serviceFeed(kind, namespace string) (*feed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := serviceFeedKey{kind: kind, namespace: namespace}
	if f, ok := c.services[key]; ok {
		return f, nil
	}
	hc, _, err := c.httpLocked()
	if err != nil {
		return nil, err
	}
	kc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: Scheme, Mapper: restMapper, HTTPClient: hc})
	if err != nil {
		return nil, errors.Wrap(err, errNewClient)
	}
	var (
		list func() client.ObjectList
		obj  runtime.Object
		slim func(runtime.Object) runtime.Object
	)
	switch kind {
	case KindServiceExport:
		list, obj, slim = func() client.ObjectList { return &mcsv1beta1.ServiceExportList{} }, &mcsv1beta1.ServiceExport{}, slimExport
	case KindService:
		list, obj, slim = func() client.ObjectList { return &corev1.ServiceList{} }, &corev1.Service{}, slimService
	case KindEndpointSlice:
		list, obj, slim = func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }, &discoveryv1.EndpointSlice{}, slimSlice
	default:
		list, obj, slim = func() client.ObjectList { return &mcsv1beta1.ServiceImportList{} }, &mcsv1beta1.ServiceImport{}, slimImport
	}
	c.started.Add(1)
	f := startFeed(c.ctx, feedConfig{
		what: kind,
		lw: lister{
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				l := list()
				return l, kc.List(ctx, l, &client.ListOptions{Namespace: namespace, Raw: &o, Limit: o.Limit, Continue: o.Continue})
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return kc.Watch(ctx, list(), &client.ListOptions{Namespace: namespace, Raw: &o})
			},
		},
		obj:       obj,
		transform: func(o any) (any, error) { return slimAny(o, slim), nil },
		limits: &Limits{
			Items:    MaxServiceObjects,
			Bytes:    maxServiceBytes,
			PageSize: servicePageSize,
			Slim:     slim,
			Weigh:    weighSlim,
		},
		differ:  changedBeyondVersion,
		changed: func() { c.wake(kubev1alpha1.ServiceSyncKind) },
		gone:    func() {},
		timeout: c.timeout,
	})
	if c.services == nil {
		c.services = map[serviceFeedKey]*feed{}
	}
	c.services[key] = f
	return f, nil
}

func slimAny(o any, slim func(runtime.Object) runtime.Object) any {
	if r, ok := o.(runtime.Object); ok {
		return slim(r)
	}
	return o
}

// slimMeta keeps the identity of an object and the labels of keptLabels.
// Like every slim function it shares nothing with the object it reads: a
// kept string is whole, or a copy of its start, a kept pointer points to
// a copy, a kept slice is a new one. Whatever the object held is free once
// it is slim.
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: cut(m.Name, maxSubdomainBytes), Namespace: cut(m.Namespace, maxLabelBytes),
		UID: types.UID(cut(string(m.UID), maxAddressBytes)), ResourceVersion: cut(m.ResourceVersion, maxAddressBytes),
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp,
	}
	if m.DeletionTimestamp != nil {
		out.DeletionTimestamp = m.DeletionTimestamp.DeepCopy()
	}
	for _, k := range keptLabels {
		if v, ok := m.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = cut(v, maxLabelBytes)
		}
	}
	return out
}

// cut keeps at most n bytes of s, see safetext.Cut.
func cut(s string, n int) string { return safetext.Cut(s, n) }

// cutPtr keeps at most n bytes of what p points to, in a string of its own.
func cutPtr(p *string, n int) *string {
	if p == nil {
		return nil
	}
	v := cut(*p, n)
	return &v
}

// copyPtr is a pointer to a copy of what p points to.
func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cutStrings keeps at most max strings of s, each cut to n bytes.
func cutStrings[S ~string](s []S, maxItems, n int) []S {
	if s == nil {
		return nil
	}
	out := make([]S, 0, min(len(s), maxItems))
	for _, x := range s[:min(len(s), maxItems)] {
		out = append(out, S(cut(string(x), n)))
	}
	return out
}

// KeepsLabel tells whether a slim object keeps the label.
func KeepsLabel(k string) bool { return slices.Contains(keptLabels, k) }

// slimExport keeps a ServiceExport's identity, age, conditions, and the
// labels and annotations it exports, within their bounds.
func slimExport(obj runtime.Object) runtime.Object {
	e, ok := obj.(*mcsv1beta1.ServiceExport)
	if !ok {
		return obj
	}
	out := &mcsv1beta1.ServiceExport{ObjectMeta: slimMeta(e.ObjectMeta)}
	if why := exportedPastBounds(&e.Spec); why != "" {
		out.Annotations = map[string]string{AnnotationSlimRefused: why}
	} else {
		out.Spec.ExportedLabels = copyMap(e.Spec.ExportedLabels)
		out.Spec.ExportedAnnotations = copyMap(e.Spec.ExportedAnnotations)
	}
	for _, m := range e.ManagedFields {
		if len(out.ManagedFields) == maxKeptManagers {
			break
		}
		if m.Subresource == "status" && strings.HasPrefix(m.Manager, ServicesFieldManager) && len(m.Manager) <= maxFieldManagerBytes {
			out.ManagedFields = append(out.ManagedFields, metav1.ManagedFieldsEntry{Manager: cut(m.Manager, maxFieldManagerBytes), Subresource: "status"})
		}
	}
	for _, c := range e.Status.Conditions[:min(len(e.Status.Conditions), maxKeptConditions)] {
		out.Status.Conditions = append(out.Status.Conditions, metav1.Condition{
			Type: cut(c.Type, maxQualifiedBytes), Status: metav1.ConditionStatus(cut(string(c.Status), maxWordBytes)),
			ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime,
			Reason: cut(c.Reason, maxReasonBytes), Message: cut(c.Message, maxMessageBytes),
		})
	}
	return out
}

// exportedPastBounds says which of the labels and annotations an export
// exports are past the bounds kilomesh carries, with the field path, or
// "". Nothing is cut: a cut label would be carried as another one.
func exportedPastBounds(spec *mcsv1beta1.ServiceExportSpec) string {
	path := field.NewPath("spec")
	total := 0
	for _, m := range []struct {
		name string
		m    map[string]string
	}{{"exportedLabels", spec.ExportedLabels}, {"exportedAnnotations", spec.ExportedAnnotations}} {
		if len(m.m) > MaxExportedEntries {
			return field.TooMany(path.Child(m.name), len(m.m), MaxExportedEntries).Error()
		}
		for k, v := range m.m {
			total += len(k) + len(v)
		}
	}
	if total > MaxExportedBytes {
		return field.TooLong(path.Child("exportedLabels"), "", MaxExportedBytes).Error() + " (with spec.exportedAnnotations: " + strconv.Itoa(total) + " bytes)"
	}
	return ""
}

// copyMap copies a map whose strings are within bounds, sharing nothing.
func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.Clone(k)] = strings.Clone(v)
	}
	return out
}

// slimService keeps what an export and an import read of a Service.
func slimService(obj runtime.Object) runtime.Object {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj
	}
	out := &corev1.Service{ObjectMeta: slimMeta(s.ObjectMeta), Spec: corev1.ServiceSpec{
		Type:                corev1.ServiceType(cut(string(s.Spec.Type), maxWordBytes)),
		ClusterIP:           cut(s.Spec.ClusterIP, maxAddressBytes),
		ClusterIPs:          cutStrings(s.Spec.ClusterIPs, 2, maxAddressBytes),
		SessionAffinity:     corev1.ServiceAffinity(cut(string(s.Spec.SessionAffinity), maxWordBytes)),
		IPFamilies:          cutStrings(s.Spec.IPFamilies, 2, maxWordBytes),
		TrafficDistribution: cutPtr(s.Spec.TrafficDistribution, maxQualifiedBytes),
	}}
	if p := s.Spec.InternalTrafficPolicy; p != nil {
		v := corev1.ServiceInternalTrafficPolicy(cut(string(*p), maxWordBytes))
		out.Spec.InternalTrafficPolicy = &v
	}
	out.Spec.SessionAffinityConfig = slimAffinityConfig(s.Spec.SessionAffinityConfig)
	if len(s.Spec.Selector) > 0 {
		out.Spec.Selector = map[string]string{"": ""}
	}
	for _, m := range s.ManagedFields {
		if m.Manager == ServicesFieldManager {
			out.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: ServicesFieldManager}}
			break
		}
	}
	for _, p := range s.Spec.Ports[:min(len(s.Spec.Ports), maxKeptPorts)] {
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{
			Name: cut(p.Name, maxLabelBytes), Protocol: corev1.Protocol(cut(string(p.Protocol), maxWordBytes)),
			Port: p.Port, AppProtocol: cutPtr(p.AppProtocol, maxQualifiedBytes),
		})
	}
	return out
}

// slimSlice keeps the addresses, readiness and host names of an
// EndpointSlice's endpoints, and its ports.
func slimSlice(obj runtime.Object) runtime.Object {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj
	}
	out := &discoveryv1.EndpointSlice{ObjectMeta: slimMeta(s.ObjectMeta), AddressType: discoveryv1.AddressType(cut(string(s.AddressType), maxWordBytes))}
	if n := min(len(s.Endpoints), maxSliceEndpoints); n > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, 0, n)
	}
	for _, e := range s.Endpoints[:min(len(s.Endpoints), maxSliceEndpoints)] {
		se := discoveryv1.Endpoint{
			Conditions: discoveryv1.EndpointConditions{Ready: copyPtr(e.Conditions.Ready)},
			Hostname:   cutPtr(e.Hostname, maxLabelBytes),
		}
		if len(e.Addresses) > 0 {
			se.Addresses = []string{cut(e.Addresses[0], maxAddressBytes)}
		}
		out.Endpoints = append(out.Endpoints, se)
	}
	for _, p := range s.Ports[:min(len(s.Ports), maxKeptPorts)] {
		out.Ports = append(out.Ports, discoveryv1.EndpointPort{
			Name: cutPtr(p.Name, maxLabelBytes), Protocol: copyPtr(p.Protocol), Port: copyPtr(p.Port),
			AppProtocol: cutPtr(p.AppProtocol, maxQualifiedBytes),
		})
		if pr := out.Ports[len(out.Ports)-1].Protocol; pr != nil {
			*pr = corev1.Protocol(cut(string(*pr), maxWordBytes))
		}
	}
	return out
}

// slimImport keeps a ServiceImport's identity, spec and exporters.
func slimImport(obj runtime.Object) runtime.Object {
	s, ok := obj.(*mcsv1beta1.ServiceImport)
	if !ok {
		return obj
	}
	in := &s.Spec
	out := &mcsv1beta1.ServiceImport{ObjectMeta: slimMeta(s.ObjectMeta), Spec: mcsv1beta1.ServiceImportSpec{
		IPs: cutStrings(in.IPs, 2, maxAddressBytes), Type: mcsv1beta1.ServiceImportType(cut(string(in.Type), maxWordBytes)),
		SessionAffinity:     corev1.ServiceAffinity(cut(string(in.SessionAffinity), maxWordBytes)),
		IPFamilies:          cutStrings(in.IPFamilies, 2, maxWordBytes),
		TrafficDistribution: cutPtr(in.TrafficDistribution, maxQualifiedBytes),
	}}
	if p := in.InternalTrafficPolicy; p != nil {
		v := corev1.ServiceInternalTrafficPolicy(cut(string(*p), maxWordBytes))
		out.Spec.InternalTrafficPolicy = &v
	}
	out.Spec.SessionAffinityConfig = slimAffinityConfig(in.SessionAffinityConfig)
	if v, ok := s.Annotations[meshv1alpha1.AnnotationExportedMetadata]; ok {
		out.Annotations = map[string]string{meshv1alpha1.AnnotationExportedMetadata: cut(v, maxAddressBytes)}
	}
	for _, p := range in.Ports[:min(len(in.Ports), maxKeptPorts)] {
		out.Spec.Ports = append(out.Spec.Ports, mcsv1beta1.ServicePort{
			Name: cut(p.Name, maxLabelBytes), Protocol: corev1.Protocol(cut(string(p.Protocol), maxWordBytes)),
			AppProtocol: cutPtr(p.AppProtocol, maxQualifiedBytes), Port: p.Port,
		})
	}
	for _, c := range s.Status.Clusters[:min(len(s.Status.Clusters), maxKeptClusters)] {
		out.Status.Clusters = append(out.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: cut(c.Cluster, maxLabelBytes)})
	}
	return out
}

// slimAffinityConfig keeps the timeout of a session affinity config.
func slimAffinityConfig(c *corev1.SessionAffinityConfig) *corev1.SessionAffinityConfig {
	if c == nil {
		return nil
	}
	out := &corev1.SessionAffinityConfig{}
	if c.ClientIP != nil {
		out.ClientIP = &corev1.ClientIPConfig{TimeoutSeconds: copyPtr(c.ClientIP.TimeoutSeconds)}
	}
	return out
}

// changedBeyondVersion reports whether two slim objects differ in more
// than their resource version.
func changedBeyondVersion(a, b any) bool {
	x, okx := a.(client.Object)
	y, oky := b.(client.Object)
	if !okx || !oky {
		return true
	}
	xc, ok1 := x.DeepCopyObject().(client.Object)
	yc, ok2 := y.DeepCopyObject().(client.Object)
	if !ok1 || !ok2 {
		return true
	}
	xc.SetResourceVersion("")
	yc.SetResourceVersion("")
	return !equality.Semantic.DeepEqual(xc, yc)
}

// ReleaseParts releases the clusters of the parts of a managed resource
// that are not in keep; nil keep releases every one.
func (r *Registry) ReleaseParts(kind string, nn types.NamespacedName, keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u := range r.users {
		if u.Kind == kind && u.NamespacedName == nn && u.Part != "" && !keep[u.Part] {
			r.releaseLocked(u)
		}
	}
}
