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
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
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
	// maxKeptLabel is the longest label value kept.
	maxKeptLabel = 253
)

const errFmtServiceKind = "cannot read %s in namespace %s"

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
	"kilomesh.io/mesh-namespace",
	"kilomesh.io/mesh",
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

// StopServices stops the namespaced watches of the cluster whose
// namespace is not in keep: a mesh that stops sharing a namespace stops
// reading it.
func (c *Cluster) StopServices(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, f := range c.services {
		if !keep[k.namespace] {
			f.stop()
			delete(c.services, k)
		}
	}
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
		list  func() client.ObjectList
		obj   runtime.Object
		slim  func(runtime.Object) runtime.Object
		weigh func(runtime.Object) int
	)
	switch kind {
	case KindServiceExport:
		list, obj, slim, weigh = func() client.ObjectList { return &mcsv1beta1.ServiceExportList{} }, &mcsv1beta1.ServiceExport{}, slimExport, weighAny
	case KindService:
		list, obj, slim, weigh = func() client.ObjectList { return &corev1.ServiceList{} }, &corev1.Service{}, slimService, weighAny
	case KindEndpointSlice:
		list, obj, slim, weigh = func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }, &discoveryv1.EndpointSlice{}, slimSlice, weighSlice
	default:
		list, obj, slim, weigh = func() client.ObjectList { return &mcsv1beta1.ServiceImportList{} }, &mcsv1beta1.ServiceImport{}, slimImport, weighAny
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
			Weigh:    weigh,
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
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
	for _, k := range keptLabels {
		if v, ok := m.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = cutString(v, maxKeptLabel)
		}
	}
	return out
}

func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// slimExport keeps a ServiceExport's identity, age and conditions.
func slimExport(obj runtime.Object) runtime.Object {
	e, ok := obj.(*mcsv1beta1.ServiceExport)
	if !ok {
		return obj
	}
	out := &mcsv1beta1.ServiceExport{ObjectMeta: slimMeta(e.ObjectMeta)}
	for i, c := range e.Status.Conditions {
		if i == 16 {
			break
		}
		c.Message = cutString(c.Message, 1024)
		out.Status.Conditions = append(out.Status.Conditions, c)
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
		Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
		SessionAffinity: s.Spec.SessionAffinity, IPFamilies: s.Spec.IPFamilies,
	}}
	if len(s.Spec.Selector) > 0 {
		out.Spec.Selector = map[string]string{"": ""}
	}
	for i, p := range s.Spec.Ports {
		if i == 256 {
			break
		}
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol})
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
	out := &discoveryv1.EndpointSlice{ObjectMeta: slimMeta(s.ObjectMeta), AddressType: s.AddressType}
	for i, e := range s.Endpoints {
		if i == maxSliceEndpoints {
			break
		}
		se := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}, Hostname: e.Hostname}
		if len(e.Addresses) > 0 {
			se.Addresses = []string{cutString(e.Addresses[0], 64)}
		}
		out.Endpoints = append(out.Endpoints, se)
	}
	for i, p := range s.Ports {
		if i == 256 {
			break
		}
		out.Ports = append(out.Ports, p)
	}
	return out
}

// slimImport keeps a ServiceImport's identity, spec and exporters.
func slimImport(obj runtime.Object) runtime.Object {
	s, ok := obj.(*mcsv1beta1.ServiceImport)
	if !ok {
		return obj
	}
	out := &mcsv1beta1.ServiceImport{ObjectMeta: slimMeta(s.ObjectMeta), Spec: s.Spec}
	out.Status.Clusters = s.Status.Clusters
	return out
}

// weighAny estimates the memory of a slim object by its JSON size.
func weighAny(obj runtime.Object) int {
	b, err := json.Marshal(obj)
	if err != nil {
		return 1024
	}
	return len(b) + 256
}

func weighSlice(obj runtime.Object) int {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return 512 + 96*len(s.Endpoints) + 64*len(s.Ports)
	}
	return weighAny(obj)
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
