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
	"slices"
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
	// Extra holds the addresses of the targets of SRV records.
	Extra []dns.RR
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

// Lookup answers a question whose name lies in the zone, with at most
// MaxRecords records in the answer and as many in the additional section.
// Names compare case-insensitively; records carry the name as it was
// asked.
func (z Zone) Lookup(qname string, qtype uint16) Result {
	return z.LookupMax(qname, qtype, MaxRecords)
}

// LookupMax is Lookup with at most maxRecords records in the answer and as
// many in the additional section: no more than the transport can carry
// are made. Every answer is read from what the Index computed when the
// Service changed; no query holds a lock while it answers.
func (z Zone) LookupMax(qname string, qtype uint16, maxRecords int) Result {
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
	var k key
	if len(labels) >= 3 {
		k = key{labels[1], labels[2]}
	} else if len(labels) == 2 {
		k = key{ns: labels[1]}
	}
	s, namespace, anyService, serial := z.Index.read(k)
	q := query{z: z, name: dns.Fqdn(qname), qtype: qtype, serial: serial, max: max(maxRecords, 1)}
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
		return q.exists(anyService)
	case len(labels) == 2:
		return q.exists(namespace)
	}
	if !s.exists() {
		return q.nxdomain()
	}
	switch len(labels) {
	case 3:
		return q.service(k, s)
	case 4:
		return q.below(s, labels[3])
	default:
		return q.leaf(k, s, labels[3], labels[4])
	}
}

// query is one question being answered.
type query struct {
	z      Zone
	name   string
	qtype  uint16
	serial uint32
	// max bounds the records of the answer, and of the additional section.
	max int
}

func (q query) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: q.z.TTL}
}

func (q query) soa() dns.RR {
	return &dns.SOA{
		Hdr: q.hdr(q.z.Origin, dns.TypeSOA), Ns: "ns.dns." + q.z.Origin, Mbox: "hostmaster." + q.z.Origin,
		Serial: q.serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: q.z.TTL,
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

// result is an answer, NODATA when it holds no record.
func (q query) result(answer, extra []dns.RR) Result {
	if len(answer) == 0 {
		return q.nodata()
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: answer, Extra: extra}
}

func (q query) apex() Result {
	if q.qtype == dns.TypeSOA {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{q.soa()}}
	}
	return q.nodata()
}

// addrRRs appends the A or AAAA records of addrs at name, of the type
// asked (both for ANY and for the additional section, all), while out
// holds fewer than q.max.
func (q query) addrRRs(out []dns.RR, name string, addrs []netip.Addr, all bool) []dns.RR {
	for _, a := range addrs {
		if len(out) >= q.max {
			break
		}
		switch {
		case a.Is4() && (all || q.qtype == dns.TypeA || q.qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: q.hdr(name, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (all || q.qtype == dns.TypeAAAA || q.qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: q.hdr(name, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return out
}

// service answers the name of a Service: its addresses, and SRV records
// as cluster-local CoreDNS gives them at a Service's name, and as the MCS
// conformance suite asks (see srv).
func (q query) service(k key, s *service) Result {
	var answer, extra []dns.RR
	if q.qtype == dns.TypeA || q.qtype == dns.TypeAAAA || q.qtype == dns.TypeANY {
		answer = q.addrRRs(answer, q.name, s.addrs, false)
	}
	if q.qtype == dns.TypeSRV || q.qtype == dns.TypeANY {
		answer, extra = q.srv(answer, k, s, s.ports)
	}
	return q.result(answer, extra)
}

// below answers the names one label below a Service: _<protocol>, an
// empty non-terminal while a named port of that protocol exists; and, for
// a headless Service, <clusterid>, one while an endpoint of that cluster
// is ready. A ClusterSetIP Service has no name per cluster.
func (q query) below(s *service, label string) Result {
	if proto, ok := strings.CutPrefix(label, "_"); ok {
		for _, p := range s.ports {
			if p.Name != "" && p.Protocol == proto {
				return q.nodata()
			}
		}
		return q.nxdomain()
	}
	return q.exists(s.headless && s.hasCluster(label))
}

// leaf answers _<port>._<protocol>.<service> (SRV) and, for a headless
// Service, <hostname>.<clusterid>.<service> (A/AAAA).
func (q query) leaf(k key, s *service, first, second string) Result {
	if proto, ok := strings.CutPrefix(first, "_"); ok {
		name, ok := strings.CutPrefix(second, "_")
		if !ok || name == "" {
			return q.nxdomain()
		}
		for _, p := range s.ports {
			if p.Protocol == proto && p.Name == name {
				if q.qtype != dns.TypeSRV && q.qtype != dns.TypeANY {
					return q.nodata()
				}
				answer, extra := q.srv(nil, k, s, []Port{p})
				return q.result(answer, extra)
			}
		}
		return q.nxdomain()
	}
	if !s.headless {
		return q.nxdomain()
	}
	i, ok := s.find(first, second)
	if !ok {
		return q.nxdomain()
	}
	return q.result(q.addrRRs(nil, q.name, s.targets[i].addrs, false), nil)
}

// serviceName is <service>.<ns>.svc.<zone>.
func (q query) serviceName(k key) string {
	return k.name + "." + k.ns + ".svc." + q.z.Origin
}

// srv appends the SRV records of ports to answer, and returns the
// addresses of their targets for the additional section. The target of a
// ClusterSetIP Service is its name; those of a headless one are its ready
// endpoints' names, each with the port its endpoints serve the port on.
// Records that would be equal (two ports of one number, such as the TCP
// and UDP ports of a DNS server) are one: an SRV record holds no
// protocol.
func (q query) srv(answer []dns.RR, k key, s *service, ports []Port) ([]dns.RR, []dns.RR) {
	var extra []dns.RR
	svc := q.serviceName(k)
	record := func(target string, port int32) *dns.SRV {
		return &dns.SRV{Hdr: q.hdr(q.name, dns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(port), Target: target}
	}
	if !s.headless {
		seen := map[int32]bool{}
		for _, p := range ports {
			if len(answer) >= q.max {
				break
			}
			if !seen[p.Port] {
				seen[p.Port] = true
				answer = append(answer, record(svc, p.Port))
			}
		}
		return answer, q.addrRRs(extra, svc, s.addrs, true)
	}
	for i := range s.targets {
		if len(answer) >= q.max {
			break
		}
		t := &s.targets[i]
		name := t.name() + "." + svc
		added := false
		var seen [4]int32 // the ports of this target so far, most often one
		used := seen[:0]
		for _, p := range ports {
			if len(answer) >= q.max {
				break
			}
			n := endpointPort(t, p)
			if slices.Contains(used, n) {
				continue
			}
			used = append(used, n)
			answer = append(answer, record(name, n))
			added = true
		}
		if added {
			extra = q.addrRRs(extra, name, t.addrs, true)
		}
	}
	return answer, extra
}

// endpointPort is the port a target serves a Service's port on: the one of
// its slice with the same name and protocol, or the Service's.
func endpointPort(t *target, p Port) int32 {
	for _, ep := range t.ports {
		if ep.Name == p.Name && ep.Protocol == p.Protocol {
			return ep.Port
		}
	}
	return p.Port
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
	first := ""
	for _, k := range z.Index.reversed(a) {
		s, _, _, _ := z.Index.read(k)
		if s == nil || !s.headless {
			continue
		}
		for i := range s.targets {
			t := &s.targets[i]
			if !slices.Contains(t.addrs, a) {
				continue
			}
			if name := t.name() + "." + k.name + "." + k.ns + ".svc."; first == "" || name < first {
				first = name
			}
		}
	}
	if first == "" {
		return nil, false
	}
	return []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: dns.Fqdn(qname), Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: z.TTL}, Ptr: first + z.Origin}}, true
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
