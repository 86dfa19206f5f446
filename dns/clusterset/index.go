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
	"net/netip"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Bounds on what the Index keeps, so that neither its memory nor an
// answer grows without limit. Reaching one leaves records out; it never
// lets a name answer that would not otherwise.
const (
	// MaxIPs is the most ClusterSet IPs of an import, one per family, as
	// the ServiceImport CRD allows.
	MaxIPs = 2
	// MaxPorts is the most named ports of an import with SRV records.
	MaxPorts = 100
	// MaxEndpoints is the most ready endpoints of a headless Service that
	// DNS names, across its clusters: the first by cluster ID, hostname
	// and address. One EndpointSlice holds at most 1,000.
	MaxEndpoints = 1000
)

// A Port is a named port of an imported Service or of an endpoint. Name
// and Protocol are lower case, as they appear in SRV names.
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

// slice is what the Index keeps of an EndpointSlice: its ready endpoints.
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

// service is what a query of an imported Service sees.
type service struct {
	headless bool
	// addrs are the ClusterSet IPs, or the addresses of the ready
	// endpoints of a headless Service, sorted and unique.
	addrs     []netip.Addr
	ports     []Port
	endpoints []endpoint
}

// exists tells whether the Service's name answers at all: a ClusterSetIP
// Service once it has an IP, a headless one while it has a ready endpoint.
func (s *service) exists() bool { return len(s.addrs) > 0 }

// An Index holds the imported Services of a cluster as DNS sees them. It
// is safe for concurrent use: the watch writes, queries read.
type Index struct {
	mu       sync.RWMutex
	imports  map[key]imported
	slices   map[key]slice
	byImport map[key]map[string]bool
	services map[key]*service
	// namespaces counts the Services that exist by namespace.
	namespaces map[string]int
	// reverse holds the names of headless endpoints by address, by
	// Service.
	reverse map[netip.Addr]map[key][]string
	serial  uint32
	synced  func() bool
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		imports:    map[key]imported{},
		slices:     map[key]slice{},
		byImport:   map[key]map[string]bool{},
		services:   map[key]*service{},
		namespaces: map[string]int{},
		reverse:    map[netip.Addr]map[key][]string{},
	}
}

// SetSynced sets what Synced asks.
func (x *Index) SetSynced(f func() bool) {
	x.mu.Lock()
	x.synced = f
	x.mu.Unlock()
}

// Synced tells whether the Index holds what the API server held when the
// watch started.
func (x *Index) Synced() bool {
	x.mu.RLock()
	f := x.synced
	x.mu.RUnlock()
	return f != nil && f()
}

// Serial changes whenever the Index does; it is the zone's SOA serial.
func (x *Index) Serial() uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.serial
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
		if !label(name) || p.Port < 1 || p.Port > 65535 {
			continue // unnamed ports have no SRV record
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
	defer x.mu.Unlock()
	x.imports[k] = in
	x.rebuild(k)
}

// DeleteImport removes a ServiceImport.
func (x *Index) DeleteImport(namespace, name string) {
	k := key{namespace, name}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.imports, k)
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
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.slices[k]
	x.slices[k] = s
	if had && old.service != s.service {
		x.unlink(key{k.ns, old.service}, k.name)
	}
	svc := key{k.ns, s.service}
	if x.byImport[svc] == nil {
		x.byImport[svc] = map[string]bool{}
	}
	x.byImport[svc][k.name] = true
	x.rebuild(svc)
}

func slicePorts(in []discoveryv1.EndpointPort) []Port {
	ports := make([]Port, 0, len(in))
	for _, p := range in {
		if p.Name != nil && label(strings.ToLower(*p.Name)) && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			pr := corev1.ProtocolTCP
			if p.Protocol != nil {
				pr = *p.Protocol
			}
			ports = append(ports, Port{Name: strings.ToLower(*p.Name), Protocol: protocol(pr), Port: *p.Port})
		}
	}
	return ports
}

// readyEndpoints returns the ready endpoints of a slice, by the first of
// their addresses, named by their hostname or their address with dashes.
func readyEndpoints(in []discoveryv1.Endpoint, cluster string, ports []Port) []endpoint {
	var out []endpoint
	for _, e := range in {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
			continue
		}
		a, err := netip.ParseAddr(e.Addresses[0])
		if err != nil || a.Zone() != "" {
			continue
		}
		a = a.Unmap()
		host := ""
		if e.Hostname != nil && label(*e.Hostname) {
			host = strings.ToLower(*e.Hostname)
		}
		if host == "" {
			host = dashed(a)
		}
		out = append(out, endpoint{cluster: cluster, host: host, addr: a, ports: ports})
	}
	return out
}

// DeleteSlice removes an EndpointSlice.
func (x *Index) DeleteSlice(namespace, name string) {
	k := key{namespace, name}
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.slices[k]
	if !had {
		return
	}
	delete(x.slices, k)
	x.unlink(key{namespace, old.service}, name)
}

func (x *Index) unlink(svc key, slice string) {
	delete(x.byImport[svc], slice)
	if len(x.byImport[svc]) == 0 {
		delete(x.byImport, svc)
	}
	x.rebuild(svc)
}

// rebuild recomputes what queries see of one Service. x.mu is held.
func (x *Index) rebuild(k key) {
	x.serial++
	if old := x.services[k]; old != nil {
		if old.exists() {
			x.namespaces[k.ns]--
			if x.namespaces[k.ns] == 0 {
				delete(x.namespaces, k.ns)
			}
		}
		for _, e := range old.endpoints {
			delete(x.reverse[e.addr], k)
			if len(x.reverse[e.addr]) == 0 {
				delete(x.reverse, e.addr)
			}
		}
		delete(x.services, k)
	}
	in, ok := x.imports[k]
	if !ok {
		return
	}
	s := &service{headless: in.headless, ports: in.ports}
	if !in.headless {
		s.addrs = unique(append([]netip.Addr(nil), in.ips...))
	} else {
		for name := range x.byImport[k] {
			s.endpoints = append(s.endpoints, x.slices[key{k.ns, name}].endpoints...)
		}
		sort.Slice(s.endpoints, func(i, j int) bool {
			a, b := s.endpoints[i], s.endpoints[j]
			if a.cluster != b.cluster {
				return a.cluster < b.cluster
			}
			if a.host != b.host {
				return a.host < b.host
			}
			return a.addr.Less(b.addr)
		})
		if len(s.endpoints) > MaxEndpoints {
			s.endpoints = s.endpoints[:MaxEndpoints]
		}
		for _, e := range s.endpoints {
			s.addrs = append(s.addrs, e.addr)
			if x.reverse[e.addr] == nil {
				x.reverse[e.addr] = map[key][]string{}
			}
			x.reverse[e.addr][k] = append(x.reverse[e.addr][k], e.host+"."+e.cluster+"."+k.name+"."+k.ns+".svc.")
		}
		s.addrs = unique(s.addrs)
	}
	x.services[k] = s
	if s.exists() {
		x.namespaces[k.ns]++
	}
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
// dashes, as cluster-local Kubernetes DNS names such endpoints.
func dashed(a netip.Addr) string {
	if a.Is4() {
		return strings.ReplaceAll(a.String(), ".", "-")
	}
	return strings.ReplaceAll(a.StringExpanded(), ":", "-")
}
