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

package clusterset

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// DefaultZone is the zone of the Multi-Cluster Services API; the
// specification says it must be clusterset.local.
const DefaultZone = "clusterset.local."

// SchemaVersion is the version of the MCS DNS specification answered at
// dns-version.<zone>.
const SchemaVersion = "1.0.0"

// DefaultTTL is the TTL of every record unless configured otherwise, the
// same as cluster-local Kubernetes DNS's.
const DefaultTTL = 5

// A Result is the answer to one question in the zone.
type Result struct {
	Rcode  int
	Answer []dns.RR
	Extra  []dns.RR
	// Ns holds the zone's SOA when Answer is empty (NXDOMAIN or NODATA),
	// for negative caching.
	Ns []dns.RR
}

// A Zone answers questions of one zone from an Index.
type Zone struct {
	Index *Index
	// Origin is the zone, a lower-case FQDN.
	Origin string
	TTL    uint32
}

// Lookup answers a question whose name lies in the zone. Names compare
// case-insensitively; records carry the name as it was asked.
func (z Zone) Lookup(qname string, qtype uint16) Result {
	lower := strings.ToLower(dns.Fqdn(qname))
	rel := strings.TrimSuffix(strings.TrimSuffix(lower, z.Origin), ".")
	var labels []string
	if rel != "" {
		labels = strings.Split(rel, ".")
	}
	// Labels from the zone down: svc, namespace, service, then either
	// _protocol and _port, or cluster ID and host name.
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	z.Index.mu.RLock()
	defer z.Index.mu.RUnlock()
	q := query{z: z, name: dns.Fqdn(qname), qtype: qtype}
	switch {
	case len(labels) == 0:
		return q.apex()
	case len(labels) == 1 && labels[0] == "dns-version":
		return q.answer(dns.TypeTXT, func() []dns.RR {
			return []dns.RR{&dns.TXT{Hdr: q.hdr(q.name, dns.TypeTXT), Txt: []string{SchemaVersion}}}
		})
	case labels[0] != "svc" || len(labels) > 5:
		return q.nxdomain()
	case len(labels) == 1:
		return q.exists(len(z.Index.namespaces) > 0)
	case len(labels) == 2:
		return q.exists(z.Index.namespaces[labels[1]] > 0)
	}
	k := key{labels[1], labels[2]}
	s := z.Index.services[k]
	if s == nil || !s.exists() {
		return q.nxdomain()
	}
	switch len(labels) {
	case 3:
		return q.addresses(s.addrs)
	case 4:
		return q.below(s, labels[3])
	default:
		return q.leaf(k, s, labels[3], labels[4])
	}
}

// query is one question being answered; the Index is read-locked.
type query struct {
	z     Zone
	name  string
	qtype uint16
}

func (q query) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: q.z.TTL}
}

func (q query) soa() dns.RR {
	return &dns.SOA{
		Hdr: q.hdr(q.z.Origin, dns.TypeSOA), Ns: "ns.dns." + q.z.Origin, Mbox: "hostmaster." + q.z.Origin,
		Serial: q.z.Index.serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: q.z.TTL,
	}
}

func (q query) nxdomain() Result {
	return Result{Rcode: dns.RcodeNameError, Ns: []dns.RR{q.soa()}}
}

// nodata answers a name that exists without records of the type asked.
func (q query) nodata() Result {
	return Result{Rcode: dns.RcodeSuccess, Ns: []dns.RR{q.soa()}}
}

// exists answers a name that holds no records but has names below it (an
// empty non-terminal), or does not exist.
func (q query) exists(ok bool) Result {
	if !ok {
		return q.nxdomain()
	}
	return q.nodata()
}

// answer answers records of type t at the name, NODATA for other types.
func (q query) answer(t uint16, rrs func() []dns.RR) Result {
	if q.qtype != t && q.qtype != dns.TypeANY {
		return q.nodata()
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: rrs()}
}

func (q query) apex() Result {
	if q.qtype == dns.TypeSOA {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{q.soa()}}
	}
	return q.nodata()
}

// addrRRs returns the A or AAAA records of addrs at name, of the type
// asked (both for ANY).
func (q query) addrRRs(name string, addrs []netip.Addr) []dns.RR {
	var out []dns.RR
	for _, a := range addrs {
		switch {
		case a.Is4() && (q.qtype == dns.TypeA || q.qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: q.hdr(name, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (q.qtype == dns.TypeAAAA || q.qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: q.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return out
}

// addresses answers A and AAAA at a name that exists: NODATA when it has
// no address of the family asked.
func (q query) addresses(addrs []netip.Addr) Result {
	if rrs := q.addrRRs(q.name, addrs); len(rrs) > 0 {
		return Result{Rcode: dns.RcodeSuccess, Answer: rrs}
	}
	return q.nodata()
}

// below answers the names one label below a Service: _<protocol>, an
// empty non-terminal while a named port of that protocol exists; and, for
// a headless Service, <clusterid>, one while an endpoint of that cluster
// is ready. A ClusterSetIP Service has no name per cluster.
func (q query) below(s *service, label string) Result {
	if proto, ok := strings.CutPrefix(label, "_"); ok {
		for _, p := range s.ports {
			if p.Protocol == proto {
				return q.nodata()
			}
		}
		return q.nxdomain()
	}
	if !s.headless {
		return q.nxdomain()
	}
	for _, e := range s.endpoints {
		if e.cluster == label {
			return q.nodata()
		}
	}
	return q.nxdomain()
}

// leaf answers _<port>._<protocol>.<service> (SRV) and, for a headless
// Service, <hostname>.<clusterid>.<service> (A/AAAA).
func (q query) leaf(k key, s *service, first, second string) Result {
	if proto, ok := strings.CutPrefix(first, "_"); ok {
		name, ok := strings.CutPrefix(second, "_")
		if !ok {
			return q.nxdomain()
		}
		for _, p := range s.ports {
			if p.Protocol == proto && p.Name == name {
				return q.answer(dns.TypeSRV, func() []dns.RR { return q.srv(k, s, p) })
			}
		}
		return q.nxdomain()
	}
	if !s.headless {
		return q.nxdomain()
	}
	var addrs []netip.Addr
	for _, e := range s.endpoints {
		if e.cluster == first && e.host == second {
			addrs = append(addrs, e.addr)
		}
	}
	if len(addrs) == 0 {
		return q.nxdomain()
	}
	return q.addresses(addrs)
}

// serviceName is <service>.<ns>.svc.<zone>.
func (q query) serviceName(k key) string {
	return k.name + "." + k.ns + ".svc." + q.z.Origin
}

// srv returns the SRV records of a named port: the Service's name for a
// ClusterSetIP Service, each ready endpoint's name for a headless one,
// with the port its endpoints serve it on.
func (q query) srv(k key, s *service, p Port) []dns.RR {
	if !s.headless {
		return []dns.RR{&dns.SRV{Hdr: q.hdr(q.name, dns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(p.Port), Target: q.serviceName(k)}}
	}
	var out []dns.RR
	seen := map[string]bool{}
	for _, e := range s.endpoints {
		target := e.host + "." + e.cluster + "." + q.serviceName(k)
		if seen[target] {
			continue
		}
		seen[target] = true
		port := p.Port
		for _, ep := range e.ports {
			if ep.Name == p.Name && ep.Protocol == p.Protocol {
				port = ep.Port
			}
		}
		out = append(out, &dns.SRV{Hdr: q.hdr(q.name, dns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(port), Target: target})
	}
	return out
}

// Extra returns the A and AAAA records of the targets of SRV records, for
// the additional section.
func (z Zone) Extra(answer []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range answer {
		srv, ok := rr.(*dns.SRV)
		if !ok {
			continue
		}
		for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
			out = append(out, z.Lookup(srv.Target, t).Answer...)
		}
	}
	return out
}

// Reverse answers a PTR question for the address of a ready endpoint of a
// headless Service: <hostname>.<clusterid>.<service>.<ns>.svc.<zone>, one
// name per address (the first, should several Services share it). A
// ClusterSet IP has its PTR record from cluster-local DNS already: kilomesh
// makes a Service of that IP for every ClusterSetIP import, as the
// specification's limitations allow for. ok is false for any other name.
func (z Zone) Reverse(qname string) (rrs []dns.RR, ok bool) {
	a, ok := reverseAddr(strings.ToLower(dns.Fqdn(qname)))
	if !ok {
		return nil, false
	}
	z.Index.mu.RLock()
	defer z.Index.mu.RUnlock()
	byService := z.Index.reverse[a]
	if len(byService) == 0 {
		return nil, false
	}
	var names []string
	for _, ns := range byService {
		names = append(names, ns...)
	}
	sort.Strings(names)
	return []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: dns.Fqdn(qname), Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: z.TTL}, Ptr: names[0] + z.Origin}}, true
}

// reverseAddr parses a complete in-addr.arpa or ip6.arpa name.
func reverseAddr(name string) (netip.Addr, bool) {
	if v4, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		parts := strings.Split(v4, ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, p := range parts {
			n, err := strconv.ParseUint(p, 10, 8)
			if err != nil || (len(p) > 1 && p[0] == '0') {
				return netip.Addr{}, false
			}
			b[3-i] = byte(n)
		}
		return netip.AddrFrom4(b), true
	}
	if v6, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		nibbles := strings.Split(v6, ".")
		if len(nibbles) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, p := range nibbles {
			n, err := strconv.ParseUint(p, 16, 8)
			if err != nil || len(p) != 1 {
				return netip.Addr{}, false
			}
			j := 31 - i
			if j%2 == 0 {
				b[j/2] |= byte(n) << 4
			} else {
				b[j/2] |= byte(n)
			}
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}
