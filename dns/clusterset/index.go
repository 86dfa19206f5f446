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

// Package clusterset answers the DNS zone clusterset.local of the
// Kubernetes Multi-Cluster Services API (KEP-1645, its DNS specification
// version 1.0.0) from the ServiceImports of a cluster and the
// EndpointSlices labelled multicluster.kubernetes.io/service-name. It has
// the shape of a CoreDNS plugin (a Handler with ServeDNS, Name and Ready)
// without importing CoreDNS: test/tools/coredns-mcs registers it with
// CoreDNS as the directive "clusterset".
package clusterset

import (
	"container/heap"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Bounds on what the Index keeps, so that neither its memory, nor an
// answer, nor the work of a change grows without limit. Reaching one
// leaves records out; it never lets a name answer that would not
// otherwise.
const (
	// MaxIPs is the most ClusterSet IPs of an import, one per family, as
	// the ServiceImport CRD allows.
	MaxIPs = 2
	// MaxPorts is the most ports of an import with SRV records.
	MaxPorts = 100
	// MaxEndpoints is the most ready endpoints of a headless Service that
	// DNS names, across its clusters: the first by cluster ID, hostname
	// and address. One EndpointSlice holds at most 1,000.
	MaxEndpoints = 1000
	// MaxSlices is the most EndpointSlices of one Service read, the first
	// by name: a Service's endpoints are gathered from at most MaxSlices x
	// MaxEndpoints, each slice's sorted once, when it changes.
	MaxSlices = 1000
	// MaxRecords is the most records of one answer, and of its additional
	// section; an answer is cut further to what its transport carries.
	MaxRecords = 1000
)

// A Port is a port of an imported Service or of an endpoint. Name and
// Protocol are lower case, as they appear in SRV names; an unnamed port
// has an empty Name.
type Port struct {
	Name, Protocol string
	Port           int32
}

// key names a Service, or an EndpointSlice, in a namespace.
type key struct{ ns, name string }

// imported is what the Index keeps of a ServiceImport.
type imported struct {
	headless bool
	ips      []netip.Addr
	ports    []Port
}

// slice is what the Index keeps of an EndpointSlice: its ready endpoints,
// in order (see less), at most MaxEndpoints. It never changes once kept.
type slice struct {
	service, cluster string
	endpoints        []endpoint
}

// An endpoint is one ready address of an exporter, with the name the
// specification gives it: <hostname>.<clusterid>.
type endpoint struct {
	cluster, host string
	addr          netip.Addr
	ports         []Port
}

// less orders endpoints by cluster, host name and address.
func less(a, b *endpoint) bool {
	if a.cluster != b.cluster {
		return a.cluster < b.cluster
	}
	if a.host != b.host {
		return a.host < b.host
	}
	return a.addr.Less(b.addr)
}

// A target is one name of a headless Service's endpoints,
// <hostname>.<clusterid>, with its addresses and the ports its first
// endpoint serves.
type target struct {
	host, cluster string
	addrs         []netip.Addr
	ports         []Port
}

// name is the target's name below its Service.
func (t *target) name() string { return t.host + "." + t.cluster }

// service is what a query of an imported Service sees, computed whole
// when the Service changes: a query only reads it. It never changes once
// published.
type service struct {
	headless bool
	// addrs are the ClusterSet IPs, or the addresses of the ready
	// endpoints of a headless Service, sorted and unique.
	addrs []netip.Addr
	ports []Port
	// targets are the names of a headless Service's endpoints, by cluster
	// and host name, at most MaxEndpoints.
	targets []target
}

// find returns the first target of a cluster whose host name is at least
// host, by binary search, and whether it is the cluster's and host's.
func (s *service) find(cluster, host string) (int, bool) {
	i := sort.Search(len(s.targets), func(i int) bool {
		t := &s.targets[i]
		return t.cluster > cluster || t.cluster == cluster && t.host >= host
	})
	return i, i < len(s.targets) && s.targets[i].cluster == cluster && s.targets[i].host == host
}

// hasCluster tells whether an endpoint of a cluster is ready.
func (s *service) hasCluster(cluster string) bool {
	i, _ := s.find(cluster, "")
	return i < len(s.targets) && s.targets[i].cluster == cluster
}

// exists tells whether the Service's name answers at all: a ClusterSetIP
// Service once it has an IP, a headless one while it has a ready endpoint.
func (s *service) exists() bool { return s != nil && len(s.addrs) > 0 }

// An Index holds the imported Services of a cluster as DNS sees them. It
// is safe for concurrent use: the watch writes, queries read.
//
// A change is computed without any lock that a query takes: mu orders the
// writers' bookkeeping, and the Service a change affects is computed after
// it is released, from slices that are never changed once kept; it is
// published under view, which a query holds only to read a pointer.
type Index struct {
	// mu guards what the watch wrote.
	mu       sync.Mutex
	imports  map[key]imported
	slices   map[key]slice
	byImport map[key]map[string]bool
	// version is the number of the latest change of each Service, from
	// seq, which counts every change: only the computation of a Service's
	// latest change is published.
	version map[key]uint64
	seq     uint64
	// computing, when set, is called as a change starts to compute its
	// Service, with no lock held: tests see what a query may do then.
	computing func()

	// view guards what queries read but reverse: publishing a change
	// holds it for a few map writes.
	view     sync.RWMutex
	services map[key]*service
	// namespaces counts the Services that exist by namespace.
	namespaces map[string]int
	serial     uint32
	synced     func() bool

	// rev guards reverse and reverseMore, which PTR questions read:
	// publishing a change holds it for the addresses that come or go.
	rev sync.RWMutex
	// reverse holds a headless Service that has an endpoint of each
	// address, reverseMore the others, should several have one.
	reverse     map[netip.Addr]key
	reverseMore map[netip.Addr][]key
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		imports:     map[key]imported{},
		slices:      map[key]slice{},
		byImport:    map[key]map[string]bool{},
		version:     map[key]uint64{},
		services:    map[key]*service{},
		namespaces:  map[string]int{},
		reverse:     map[netip.Addr]key{},
		reverseMore: map[netip.Addr][]key{},
	}
}

// SetSynced sets what Synced asks.
func (x *Index) SetSynced(f func() bool) {
	x.view.Lock()
	x.synced = f
	x.view.Unlock()
}

// Synced tells whether the Index holds what the API server held when the
// watch started.
func (x *Index) Synced() bool {
	x.view.RLock()
	f := x.synced
	x.view.RUnlock()
	return f != nil && f()
}

// Serial changes whenever the Index does; it is the zone's SOA serial.
func (x *Index) Serial() uint32 {
	x.view.RLock()
	defer x.view.RUnlock()
	return x.serial
}

// read returns the Service a query sees, whether its namespace has a
// Service that exists, whether any namespace has, and the serial.
func (x *Index) read(k key) (s *service, namespace, anyService bool, serial uint32) {
	x.view.RLock()
	defer x.view.RUnlock()
	return x.services[k], x.namespaces[k.ns] > 0, len(x.namespaces) > 0, x.serial
}

// label tells whether s can be one label of a name in the zone.
func label(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// SetImport adds or replaces a ServiceImport. One whose namespace or name
// is not a DNS label (a Service's name always is) has no name in the zone:
// it is left out.
func (x *Index) SetImport(si *mcsv1beta1.ServiceImport) {
	if !label(si.Namespace) || !label(si.Name) {
		x.DeleteImport(si.Namespace, si.Name)
		return
	}
	in := imported{headless: si.Spec.Type == mcsv1beta1.Headless}
	if !in.headless {
		for _, s := range si.Spec.IPs {
			if len(in.ips) == MaxIPs {
				break
			}
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
				in.ips = append(in.ips, a.Unmap())
			}
		}
	}
	seen := map[Port]bool{}
	for _, p := range si.Spec.Ports {
		if len(in.ports) == MaxPorts {
			break
		}
		name := strings.ToLower(p.Name)
		if name != "" && !label(name) || p.Port < 1 || p.Port > 65535 {
			continue
		}
		pt := Port{Name: name, Protocol: protocol(p.Protocol)}
		if seen[pt] {
			continue // the first port of a name and protocol has it
		}
		seen[pt] = true
		pt.Port = p.Port
		in.ports = append(in.ports, pt)
	}
	k := key{si.Namespace, si.Name}
	x.mu.Lock()
	x.imports[k] = in
	x.mu.Unlock()
	x.rebuild(k)
}

// DeleteImport removes a ServiceImport.
func (x *Index) DeleteImport(namespace, name string) {
	k := key{namespace, name}
	x.mu.Lock()
	delete(x.imports, k)
	x.mu.Unlock()
	x.rebuild(k)
}

// SetSlice adds or replaces an EndpointSlice. One without the labels of
// MCS, a source cluster that is a DNS label and the name of a Service, is
// an EndpointSlice the specification cannot name: it is left out.
func (x *Index) SetSlice(es *discoveryv1.EndpointSlice) {
	s := slice{service: es.Labels[mcsv1beta1.LabelServiceName], cluster: strings.ToLower(es.Labels[mcsv1beta1.LabelSourceCluster])}
	k := key{es.Namespace, es.Name}
	if !label(s.service) || !label(s.cluster) ||
		(es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6) {
		x.DeleteSlice(es.Namespace, es.Name)
		return
	}
	s.endpoints = readyEndpoints(es.Endpoints, s.cluster, slicePorts(es.Ports))
	svc := key{k.ns, s.service}
	x.mu.Lock()
	old, had := x.slices[k]
	x.slices[k] = s
	var moved key
	if had && old.service != s.service {
		moved = key{k.ns, old.service}
		x.unlinkLocked(moved, k.name)
	}
	if x.byImport[svc] == nil {
		x.byImport[svc] = map[string]bool{}
	}
	x.byImport[svc][k.name] = true
	x.mu.Unlock()
	if moved.name != "" {
		x.rebuild(moved)
	}
	x.rebuild(svc)
}

func slicePorts(in []discoveryv1.EndpointPort) []Port {
	ports := make([]Port, 0, min(len(in), MaxPorts))
	for _, p := range in {
		if len(ports) == MaxPorts {
			break
		}
		if p.Name == nil || p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			continue
		}
		name := strings.ToLower(*p.Name)
		if name != "" && !label(name) {
			continue
		}
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		ports = append(ports, Port{Name: name, Protocol: protocol(pr), Port: *p.Port})
	}
	return ports
}

// readyEndpoints returns the ready endpoints of a slice, by the first of
// their addresses, named by their hostname or their address with dashes:
// at most MaxEndpoints, in order.
func readyEndpoints(in []discoveryv1.Endpoint, cluster string, ports []Port) []endpoint {
	var out []endpoint
	for _, e := range in {
		if len(out) == MaxEndpoints {
			break
		}
		if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
			continue
		}
		a, err := netip.ParseAddr(e.Addresses[0])
		if err != nil || a.Zone() != "" {
			continue
		}
		a = a.Unmap()
		host := ""
		if e.Hostname != nil && label(strings.ToLower(*e.Hostname)) {
			host = strings.ToLower(*e.Hostname)
		}
		if host == "" {
			host = dashed(a)
		}
		out = append(out, endpoint{cluster: cluster, host: host, addr: a, ports: ports})
	}
	sort.Slice(out, func(i, j int) bool { return less(&out[i], &out[j]) })
	return out
}

// DeleteSlice removes an EndpointSlice.
func (x *Index) DeleteSlice(namespace, name string) {
	k := key{namespace, name}
	x.mu.Lock()
	old, had := x.slices[k]
	if !had {
		x.mu.Unlock()
		return
	}
	delete(x.slices, k)
	svc := key{namespace, old.service}
	x.unlinkLocked(svc, name)
	x.mu.Unlock()
	x.rebuild(svc)
}

// unlinkLocked forgets that a slice is a Service's. x.mu is held.
func (x *Index) unlinkLocked(svc key, slice string) {
	delete(x.byImport[svc], slice)
	if len(x.byImport[svc]) == 0 {
		delete(x.byImport, svc)
	}
}

// rebuild recomputes what queries see of one Service, and publishes it
// unless a later change of the Service has been made meanwhile.
func (x *Index) rebuild(k key) {
	x.mu.Lock()
	x.seq++
	v := x.seq
	x.version[k] = v
	in, ok := x.imports[k]
	var lists [][]endpoint
	if ok && in.headless {
		names := make([]string, 0, len(x.byImport[k]))
		for name := range x.byImport[k] {
			names = append(names, name)
		}
		if len(names) > MaxSlices {
			sort.Strings(names)
			names = names[:MaxSlices]
		}
		for _, name := range names {
			if eps := x.slices[key{k.ns, name}].endpoints; len(eps) > 0 {
				lists = append(lists, eps)
			}
		}
	}
	if !ok && len(x.byImport[k]) == 0 {
		delete(x.version, k) // nothing left of it: a later change is numbered anew
	}
	computing := x.computing
	x.mu.Unlock()

	if computing != nil {
		computing()
	}
	var s *service
	if ok {
		s = build(in, lists)
	}

	x.mu.Lock()
	defer x.mu.Unlock()
	if cur, known := x.version[k]; known && cur != v || !known && ok {
		return // a later change of the Service publishes its own
	}
	x.publish(k, s)
}

// build computes a Service from its import and the sorted endpoints of its
// slices: the first MaxEndpoints of them in order, merged without sorting
// them all.
func build(in imported, lists [][]endpoint) *service {
	s := &service{headless: in.headless, ports: in.ports}
	if !in.headless {
		s.addrs = unique(append([]netip.Addr(nil), in.ips...))
		return s
	}
	// In order, the endpoints of a target follow each other, by address:
	// its addresses are a part of all.
	eps := merge(lists, MaxEndpoints)
	all := make([]netip.Addr, 0, len(eps))
	for i := range eps {
		e := &eps[i]
		n := len(s.targets)
		if n == 0 || s.targets[n-1].host != e.host || s.targets[n-1].cluster != e.cluster {
			s.targets = append(s.targets, target{host: e.host, cluster: e.cluster, ports: e.ports})
			n++
		}
		t := &s.targets[n-1]
		if len(t.addrs) == 0 || t.addrs[len(t.addrs)-1] != e.addr {
			all = append(all, e.addr)
			t.addrs = all[len(all)-len(t.addrs)-1 : len(all) : len(all)]
		}
	}
	s.addrs = unique(append([]netip.Addr(nil), all...))
	return s
}

// publish makes a Service what queries see. x.mu is held.
func (x *Index) publish(k key, s *service) {
	old := x.swap(k, s)
	x.reindex(k, old, s)
}

// swap makes a Service what queries of its names see, and returns the one
// it replaces: a few map writes under the lock that those queries take.
func (x *Index) swap(k key, s *service) *service {
	x.view.Lock()
	defer x.view.Unlock()
	old := x.services[k]
	x.serial++
	if old.exists() {
		x.namespaces[k.ns]--
		if x.namespaces[k.ns] == 0 {
			delete(x.namespaces, k.ns)
		}
	}
	if s == nil {
		delete(x.services, k)
	} else {
		x.services[k] = s
		if s.exists() {
			x.namespaces[k.ns]++
		}
	}
	return old
}

// reindex records the addresses of a headless Service's endpoints for PTR
// questions, under their lock: only those that come or go.
func (x *Index) reindex(k key, old, s *service) {
	var was, is []netip.Addr
	if old != nil && old.headless {
		was = old.addrs
	}
	if s != nil && s.headless {
		is = s.addrs
	}
	x.rev.Lock()
	defer x.rev.Unlock()
	// Both are sorted: only the addresses that come or go change.
	for i, j := 0, 0; i < len(was) || j < len(is); {
		switch {
		case j == len(is) || i < len(was) && was[i].Less(is[j]):
			x.unreverse(was[i], k)
			i++
		case i == len(was) || is[j].Less(was[i]):
			x.addReverse(is[j], k)
			j++
		default:
			i, j = i+1, j+1
		}
	}
}

// addReverse records that a Service has an endpoint of an address. x.rev
// is held.
func (x *Index) addReverse(a netip.Addr, k key) {
	if _, ok := x.reverse[a]; !ok {
		x.reverse[a] = k
		return
	}
	x.reverseMore[a] = append(x.reverseMore[a], k)
}

// unreverse records that a Service has no more endpoint of an address.
// x.rev is held.
func (x *Index) unreverse(a netip.Addr, k key) {
	more := x.reverseMore[a]
	if x.reverse[a] == k {
		if len(more) == 0 {
			delete(x.reverse, a)
			return
		}
		x.reverse[a], more = more[len(more)-1], more[:len(more)-1]
	} else if i := slices.Index(more, k); i >= 0 {
		more = slices.Delete(more, i, i+1)
	}
	if len(more) == 0 {
		delete(x.reverseMore, a)
	} else {
		x.reverseMore[a] = more
	}
}

// reversed returns the Services that have an endpoint of an address.
func (x *Index) reversed(a netip.Addr) []key {
	x.rev.RLock()
	defer x.rev.RUnlock()
	k, ok := x.reverse[a]
	if !ok {
		return nil
	}
	return append([]key{k}, x.reverseMore[a]...)
}

// merge returns the first n endpoints of sorted lists, in order.
func merge(lists [][]endpoint, n int) []endpoint {
	h := make(heads, 0, len(lists))
	total := 0
	for _, l := range lists {
		h = append(h, l)
		total += len(l)
	}
	heap.Init(&h)
	out := make([]endpoint, 0, min(n, total))
	for len(out) < n && len(h) > 0 {
		out = append(out, h[0][0])
		if h[0] = h[0][1:]; len(h[0]) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// heads is a heap of sorted lists by their first endpoint.
type heads [][]endpoint

func (h heads) Len() int           { return len(h) }
func (h heads) Less(i, j int) bool { return less(&h[i][0], &h[j][0]) }
func (h heads) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heads) Push(v any)        { *h = append(*h, v.([]endpoint)) } //nolint:forcetypeassert // heap.Push is given lists only.
func (h *heads) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

func unique(addrs []netip.Addr) []netip.Addr {
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	out := addrs[:0]
	for i, a := range addrs {
		if i == 0 || a != addrs[i-1] {
			out = append(out, a)
		}
	}
	return out
}

func protocol(p corev1.Protocol) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(string(p))
}

// dashed is the name of an endpoint without a hostname: its address with
// dashes, as cluster-local Kubernetes DNS and CoreDNS name such endpoints
// (an IPv6 address in its canonical, compressed form). A compressed IPv6
// address that would start or end with a dash, which no DNS label does,
// is written whole.
func dashed(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	if d := strings.ReplaceAll(a.String(), ":", "-"); label(d) {
		return d
	}
	return strings.ReplaceAll(a.StringExpanded(), ":", "-")
}
