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
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func imp(ns, name string, t mcsv1beta1.ServiceImportType, ips []string, ports ...mcsv1beta1.ServicePort) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: t, IPs: ips, Ports: ports},
	}
}

func port(name string, proto corev1.Protocol, n int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: proto, Port: n}
}

func eps(ns, name, service, cluster string, t discoveryv1.AddressType, ports map[string]int32, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{mcsv1beta1.LabelServiceName: service}},
		AddressType: t,
		Endpoints:   endpoints,
	}
	if cluster != "" {
		s.Labels[mcsv1beta1.LabelSourceCluster] = cluster
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(n), Port: ptr.To(p), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	return s
}

func ep(addr string, ready *bool, host string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if host != "" {
		e.Hostname = ptr.To(host)
	}
	return e
}

// fixture is a cluster importing: hello (ClusterSetIP, named ports over
// TCP and UDP and an unnamed one), db (headless, exported by cluster-a and
// cluster-b, with an endpoint not ready and one without a hostname), empty
// (headless, nothing ready), pending (ClusterSetIP, no IP yet), and hello6
// (IPv6).
func fixture() *Index {
	x := NewIndex()
	x.SetImport(imp("shop", "hello", mcsv1beta1.ClusterSetIP, []string{"10.96.0.10"},
		port("http", corev1.ProtocolTCP, 80), port("", corev1.ProtocolTCP, 81), port("dns", corev1.ProtocolUDP, 53)))
	x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetSlice(eps("shop", "db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, map[string]int32{"pg": 15432},
		ep("10.1.2.1", ptr.To(true), "db-0"), ep("10.1.2.2", nil, "db-1"), ep("10.1.2.3", ptr.To(false), "db-2"), ep("10.1.2.4", ptr.To(true), "")))
	x.SetSlice(eps("shop", "db-b", "db", "cluster-b", discoveryv1.AddressTypeIPv4, map[string]int32{"pg": 5432},
		ep("10.2.2.1", ptr.To(true), "db-0")))
	// No source cluster: not a slice the specification can name.
	x.SetSlice(eps("shop", "db-x", "db", "", discoveryv1.AddressTypeIPv4, nil, ep("10.9.9.9", ptr.To(true), "x")))
	x.SetImport(imp("shop", "empty", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetSlice(eps("shop", "empty-a", "empty", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.3.1", ptr.To(false), "e-0")))
	x.SetImport(imp("shop", "pending", mcsv1beta1.ClusterSetIP, nil, port("http", "", 80)))
	x.SetImport(imp("v6", "hello6", mcsv1beta1.ClusterSetIP, []string{"fd00::10"}, port("http", "", 80)))
	x.SetImport(imp("v6", "db6", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetSlice(eps("v6", "db6-a", "db6", "cluster-a", discoveryv1.AddressTypeIPv6, nil, ep("fd01::5", nil, ""), ep("fd02::", nil, "")))
	return x
}

// result is a Result as text: the rcode and every record.
type result struct {
	Rcode  string
	Answer []string
	Extra  []string
	SOA    bool
}

func text(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	sort.Strings(out)
	return out
}

func TestLookup(t *testing.T) {
	z := Zone{Index: fixture(), Origin: DefaultZone, TTL: DefaultTTL}
	nx := result{Rcode: "NXDOMAIN", SOA: true}
	nodata := result{Rcode: "NOERROR", SOA: true}
	type args struct {
		name  string
		qtype uint16
	}
	cases := map[string]struct {
		reason string
		args   args
		want   result
	}{
		"ClusterSetIPA": {
			reason: "2.3.1: a ClusterSetIP Service has an A record of its ClusterSet IP.",
			args:   args{"hello.shop.svc.clusterset.local.", dns.TypeA},
			want:   result{Rcode: "NOERROR", Answer: []string{"hello.shop.svc.clusterset.local.\t5\tIN\tA\t10.96.0.10"}},
		},
		"CaseInsensitive": {
			reason: "Names compare case-insensitively; the answer carries the name as asked.",
			args:   args{"Hello.SHOP.svc.ClusterSet.Local.", dns.TypeA},
			want:   result{Rcode: "NOERROR", Answer: []string{"Hello.SHOP.svc.ClusterSet.Local.\t5\tIN\tA\t10.96.0.10"}},
		},
		"ClusterSetIPOtherFamily": {
			reason: "An IPv4 ClusterSet IP has no AAAA record: the name exists, so NODATA.",
			args:   args{"hello.shop.svc.clusterset.local.", dns.TypeAAAA},
			want:   nodata,
		},
		"ClusterSetIPAAAA": {
			reason: "2.3.1: an IPv6 ClusterSet IP has an AAAA record.",
			args:   args{"hello6.v6.svc.clusterset.local.", dns.TypeAAAA},
			want:   result{Rcode: "NOERROR", Answer: []string{"hello6.v6.svc.clusterset.local.\t5\tIN\tAAAA\tfd00::10"}},
		},
		"ClusterSetIPTXT": {
			reason: "A Service name has no TXT record: NODATA.",
			args:   args{"hello.shop.svc.clusterset.local.", dns.TypeTXT},
			want:   nodata,
		},
		"ClusterSetIPSRV": {
			reason: "2.3.2: a named port has an SRV record whose target is the Service's name; the additional section holds its address.",
			args:   args{"_http._tcp.hello.shop.svc.clusterset.local.", dns.TypeSRV},
			want: result{Rcode: "NOERROR",
				Answer: []string{"_http._tcp.hello.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 80 hello.shop.svc.clusterset.local."},
				Extra:  []string{"hello.shop.svc.clusterset.local.\t5\tIN\tA\t10.96.0.10"}},
		},
		"ClusterSetIPSRVUDP": {
			reason: "2.3.2: the protocol label is the port's protocol.",
			args:   args{"_dns._udp.hello.shop.svc.clusterset.local.", dns.TypeSRV},
			want: result{Rcode: "NOERROR",
				Answer: []string{"_dns._udp.hello.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 53 hello.shop.svc.clusterset.local."},
				Extra:  []string{"hello.shop.svc.clusterset.local.\t5\tIN\tA\t10.96.0.10"}},
		},
		"SRVWrongProtocol": {
			reason: "A port name under a protocol it does not use does not exist.",
			args:   args{"_http._udp.hello.shop.svc.clusterset.local.", dns.TypeSRV},
			want:   nx,
		},
		"SRVNameOtherType": {
			reason: "An SRV name has no A record: NODATA.",
			args:   args{"_http._tcp.hello.shop.svc.clusterset.local.", dns.TypeA},
			want:   nodata,
		},
		"ProtocolEmptyNonTerminal": {
			reason: "_tcp.<service> has names below it: NODATA, not NXDOMAIN.",
			args:   args{"_tcp.hello.shop.svc.clusterset.local.", dns.TypeA},
			want:   nodata,
		},
		"ClusterSetIPNoClusterName": {
			reason: "2.3.4: a ClusterSetIP Service has no name per cluster.",
			args:   args{"cluster-a.hello.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"ClusterSetIPNoIPYet": {
			reason: "A ClusterSetIP import without an IP yet answers nothing.",
			args:   args{"pending.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"HeadlessA": {
			reason: "2.4.1: a headless Service has an A record per ready endpoint of every cluster; an endpoint not ready, or one the specification cannot name, has none.",
			args:   args{"db.shop.svc.clusterset.local.", dns.TypeA},
			want: result{Rcode: "NOERROR", Answer: []string{
				"db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.1", "db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.2",
				"db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.4", "db.shop.svc.clusterset.local.\t5\tIN\tA\t10.2.2.1",
			}},
		},
		"HeadlessEndpoint": {
			reason: "2.4.1: <hostname>.<clusterid>.<service> has the endpoint's address.",
			args:   args{"db-0.cluster-b.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   result{Rcode: "NOERROR", Answer: []string{"db-0.cluster-b.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.2.2.1"}},
		},
		"HeadlessEndpointWithoutHostname": {
			reason: "An endpoint without a hostname is named by its address with dashes, as cluster-local DNS names it.",
			args:   args{"10-1-2-4.cluster-a.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   result{Rcode: "NOERROR", Answer: []string{"10-1-2-4.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.4"}},
		},
		"HeadlessEndpointNotReady": {
			reason: "An endpoint that is not ready has no name.",
			args:   args{"db-2.cluster-a.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"HeadlessEndpointOtherCluster": {
			reason: "A hostname is looked up in its cluster only.",
			args:   args{"db-1.cluster-b.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"HeadlessClusterEmptyNonTerminal": {
			reason: "2.4.4: <clusterid>.<service> holds no record; it has names below it, so NODATA.",
			args:   args{"cluster-a.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   nodata,
		},
		"HeadlessSRV": {
			reason: "2.4.2: an SRV record per ready endpoint and named port, with the port the endpoints of its cluster serve.",
			args:   args{"_pg._tcp.db.shop.svc.clusterset.local.", dns.TypeSRV},
			want: result{Rcode: "NOERROR",
				Answer: []string{
					"_pg._tcp.db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 10-1-2-4.cluster-a.db.shop.svc.clusterset.local.",
					"_pg._tcp.db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 db-0.cluster-a.db.shop.svc.clusterset.local.",
					"_pg._tcp.db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 db-1.cluster-a.db.shop.svc.clusterset.local.",
					"_pg._tcp.db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 5432 db-0.cluster-b.db.shop.svc.clusterset.local.",
				},
				Extra: []string{
					"10-1-2-4.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.4",
					"db-0.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.1",
					"db-0.cluster-b.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.2.2.1",
					"db-1.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.2",
				}},
		},
		"HeadlessNothingReady": {
			reason: "2.4.1: a headless Service without a ready endpoint is NXDOMAIN.",
			args:   args{"empty.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"HeadlessAAAA": {
			reason: "2.4.1: an IPv6 endpoint has an AAAA record, and a name of its address with dashes, compressed as CoreDNS and the conformance suite write it.",
			args:   args{"fd01--5.cluster-a.db6.v6.svc.clusterset.local.", dns.TypeAAAA},
			want:   result{Rcode: "NOERROR", Answer: []string{"fd01--5.cluster-a.db6.v6.svc.clusterset.local.\t5\tIN\tAAAA\tfd01::5"}},
		},
		"HeadlessAAAAExpanded": {
			reason: "An IPv6 address whose compressed form would end with a dash, which no DNS label does, is written whole.",
			args:   args{"fd02-0000-0000-0000-0000-0000-0000-0000.cluster-a.db6.v6.svc.clusterset.local.", dns.TypeAAAA},
			want:   result{Rcode: "NOERROR", Answer: []string{"fd02-0000-0000-0000-0000-0000-0000-0000.cluster-a.db6.v6.svc.clusterset.local.\t5\tIN\tAAAA\tfd02::"}},
		},
		"ClusterSetIPSRVAtName": {
			reason: "SRV at the Service's own name, as cluster-local CoreDNS answers it and the conformance suite asks: one record per port number (an SRV record holds no protocol: dns/53 over UDP and TCP is one record), unnamed ports too; the additional section holds the Service's address.",
			args:   args{"hello.shop.svc.clusterset.local.", dns.TypeSRV},
			want: result{Rcode: "NOERROR",
				Answer: []string{
					"hello.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 53 hello.shop.svc.clusterset.local.",
					"hello.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 80 hello.shop.svc.clusterset.local.",
					"hello.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 81 hello.shop.svc.clusterset.local.",
				},
				Extra: []string{"hello.shop.svc.clusterset.local.\t5\tIN\tA\t10.96.0.10"}},
		},
		"HeadlessSRVAtName": {
			reason: "SRV at a headless Service's own name: one record per ready endpoint and port, with the port its cluster serves, equal records once; the additional section holds the targets' addresses.",
			args:   args{"db.shop.svc.clusterset.local.", dns.TypeSRV},
			want: result{Rcode: "NOERROR",
				Answer: []string{
					"db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 10-1-2-4.cluster-a.db.shop.svc.clusterset.local.",
					"db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 db-0.cluster-a.db.shop.svc.clusterset.local.",
					"db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 15432 db-1.cluster-a.db.shop.svc.clusterset.local.",
					"db.shop.svc.clusterset.local.\t5\tIN\tSRV\t0 100 5432 db-0.cluster-b.db.shop.svc.clusterset.local.",
				},
				Extra: []string{
					"10-1-2-4.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.4",
					"db-0.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.1",
					"db-0.cluster-b.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.2.2.1",
					"db-1.cluster-a.db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.2.2",
				}},
		},
		"UnnamedPortNoSRVName": {
			reason: "2.3.2: an unnamed port has no _<port>._<proto> name.",
			args:   args{"_._tcp.hello.shop.svc.clusterset.local.", dns.TypeSRV},
			want:   nx,
		},
		"UnknownService": {
			reason: "A Service that is not imported does not exist.",
			args:   args{"nope.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"Namespace": {
			reason: "A namespace with imports has names below it: NODATA.",
			args:   args{"shop.svc.clusterset.local.", dns.TypeA},
			want:   nodata,
		},
		"UnknownNamespace": {
			reason: "A namespace without imports does not exist.",
			args:   args{"nope.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"Svc": {
			reason: "svc.<zone> has names below it.",
			args:   args{"svc.clusterset.local.", dns.TypeA},
			want:   nodata,
		},
		"DNSVersion": {
			reason: "2.2: dns-version.<zone> holds the schema version.",
			args:   args{"dns-version.clusterset.local.", dns.TypeTXT},
			want:   result{Rcode: "NOERROR", Answer: []string{"dns-version.clusterset.local.\t5\tIN\tTXT\t\"1.0.0\""}},
		},
		"Apex": {
			reason: "The zone's apex has its SOA.",
			args:   args{"clusterset.local.", dns.TypeSOA},
			want:   result{Rcode: "NOERROR", Answer: []string{"clusterset.local.\t5\tIN\tSOA\tns.dns.clusterset.local. hostmaster.clusterset.local. 10 7200 1800 86400 5"}},
		},
		"OtherName": {
			reason: "A name outside svc.<zone> does not exist.",
			args:   args{"pod.clusterset.local.", dns.TypeA},
			want:   nx,
		},
		"TooDeep": {
			reason: "No name lies below <hostname>.<clusterid>.<service>.",
			args:   args{"a.db-0.cluster-a.db.shop.svc.clusterset.local.", dns.TypeA},
			want:   nx,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := z.Lookup(tc.args.name, tc.args.qtype)
			got := result{Rcode: dns.RcodeToString[r.Rcode], Answer: text(r.Answer), Extra: text(r.Extra), SOA: len(r.Ns) == 1}
			if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 && len(r.Ns) > 0 {
				t.Errorf("an answer with an authority section: %v", r.Ns)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nLookup(%s, %s): -want, +got:\n%s", tc.reason, tc.args.name, dns.TypeToString[tc.args.qtype], diff)
			}
		})
	}
}

func TestReverse(t *testing.T) {
	z := Zone{Index: fixture(), Origin: DefaultZone, TTL: DefaultTTL}
	cases := map[string]struct {
		reason string
		name   string
		want   []string
		ok     bool
	}{
		"HeadlessEndpoint": {
			reason: "2.4.3: a ready endpoint's address has a PTR record of its name.",
			name:   "1.2.1.10.in-addr.arpa.",
			want:   []string{"1.2.1.10.in-addr.arpa.\t5\tIN\tPTR\tdb-0.cluster-a.db.shop.svc.clusterset.local."},
			ok:     true,
		},
		"HeadlessEndpointIPv6": {
			reason: "2.4.3: an IPv6 address's nibbles, reversed.",
			name:   "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.d.f.ip6.arpa.",
			want:   []string{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.d.f.ip6.arpa.\t5\tIN\tPTR\tfd01--5.cluster-a.db6.v6.svc.clusterset.local."},
			ok:     true,
		},
		"NotReady": {
			reason: "An endpoint that is not ready has no PTR record here: the next plugin answers.",
			name:   "3.2.1.10.in-addr.arpa.",
		},
		"ClusterSetIP": {
			reason: "2.3.3: the ClusterSet IP is a Service's ClusterIP in the member, whose PTR record cluster-local DNS holds.",
			name:   "10.0.96.10.in-addr.arpa.",
		},
		"Partial": {
			reason: "A partial reverse name is the next plugin's.",
			name:   "1.10.in-addr.arpa.",
		},
		"LeadingZero": {
			reason: "A label with a leading zero is no address.",
			name:   "01.2.1.10.in-addr.arpa.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rrs, ok := z.Reverse(tc.name)
			if diff := cmp.Diff(tc.want, text(rrs)); diff != "" || ok != tc.ok {
				t.Errorf("%s\nReverse(%s): ok %v, want %v; -want, +got:\n%s", tc.reason, tc.name, ok, tc.ok, diff)
			}
		})
	}
}

// TestIndexChanges pins that the Index follows changes: an endpoint that
// stops being ready, a slice that goes, an import deleted.
func TestIndexChanges(t *testing.T) {
	x := fixture()
	z := Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}
	addrs := func(name string) []string {
		var out []string
		for _, rr := range z.Lookup(name, dns.TypeA).Answer {
			if a, ok := rr.(*dns.A); ok {
				out = append(out, a.A.String())
			}
		}
		return out
	}
	steps := []struct {
		reason string
		change func()
		name   string
		want   []string
	}{
		{
			reason: "cluster-b's slice goes: its endpoint goes.",
			change: func() { x.DeleteSlice("shop", "db-b") },
			name:   "db.shop.svc.clusterset.local.",
			want:   []string{"10.1.2.1", "10.1.2.2", "10.1.2.4"},
		},
		{
			reason: "cluster-a's endpoints stop being ready: the Service has none, NXDOMAIN.",
			change: func() {
				x.SetSlice(eps("shop", "db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.2.1", ptr.To(false), "db-0")))
			},
			name: "db.shop.svc.clusterset.local.",
		},
		{
			reason: "A slice relabelled to another Service leaves the first.",
			change: func() {
				x.SetSlice(eps("shop", "db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.2.7", nil, "db-0")))
				x.SetSlice(eps("shop", "db-a", "empty", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.2.7", nil, "db-0")))
			},
			name: "db.shop.svc.clusterset.local.",
		},
		{
			reason: "The import deleted: its name goes.",
			change: func() { x.DeleteImport("shop", "hello") },
			name:   "hello.shop.svc.clusterset.local.",
		},
	}
	for _, s := range steps {
		s.change()
		if diff := cmp.Diff(s.want, addrs(s.name)); diff != "" {
			t.Errorf("%s\n-want, +got:\n%s", s.reason, diff)
		}
	}
	if _, ok := z.Reverse("1.2.1.10.in-addr.arpa."); ok {
		t.Error("an endpoint no longer ready kept its PTR record")
	}
	if got := addrs("empty.shop.svc.clusterset.local."); !cmp.Equal(got, []string{"10.1.2.7"}) {
		t.Errorf("the relabelled slice's endpoint in empty: %v", got)
	}
}

// writer records the reply a Handler writes.
type writer struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (w *writer) WriteMsg(m *dns.Msg) error { w.msg = m; return nil }
func (w *writer) RemoteAddr() net.Addr      { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }

// next records that the chain went on.
type next struct{ called bool }

func (n *next) ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error) {
	n.called = true
	return dns.RcodeSuccess, nil
}
func (n *next) Name() string { return "next" }

func TestHandler(t *testing.T) {
	cases := map[string]struct {
		reason string
		name   string
		qtype  uint16
		rcode  int
		next   bool
	}{
		"InZone":       {reason: "A name in the zone is answered, authoritatively.", name: "hello.shop.svc.clusterset.local.", qtype: dns.TypeA},
		"InZoneNX":     {reason: "NXDOMAIN in the zone is the plugin's, not the next's.", name: "nope.shop.svc.clusterset.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		"OutsideZone":  {reason: "Any other name goes down the chain.", name: "kubernetes.default.svc.cluster.local.", qtype: dns.TypeA, next: true},
		"KnownPTR":     {reason: "The PTR of a headless endpoint is answered.", name: "1.2.1.10.in-addr.arpa.", qtype: dns.TypePTR},
		"OtherPTR":     {reason: "Any other PTR goes down the chain, to cluster-local DNS.", name: "1.0.96.10.in-addr.arpa.", qtype: dns.TypePTR, next: true},
		"ReverseNotPT": {reason: "A reverse name asked for another type goes down the chain.", name: "1.2.1.10.in-addr.arpa.", qtype: dns.TypeA, next: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := &next{}
			h := &Handler{Zone: Zone{Index: fixture(), Origin: DefaultZone, TTL: DefaultTTL}, Next: n}
			w := &writer{}
			r := new(dns.Msg)
			r.SetQuestion(tc.name, tc.qtype)
			rcode, err := h.ServeDNS(context.Background(), w, r)
			if err != nil {
				t.Fatal(err)
			}
			if n.called != tc.next {
				t.Errorf("%s\nnext called: %v, want %v", tc.reason, n.called, tc.next)
			}
			if tc.next {
				return
			}
			if w.msg == nil || !w.msg.Authoritative || rcode != tc.rcode || w.msg.Rcode != tc.rcode {
				t.Errorf("%s\nrcode %d, reply %v; want rcode %d, authoritative", tc.reason, rcode, w.msg, tc.rcode)
			}
		})
	}
}

// TestBounds pins what the Index leaves out of hostile or oversized
// objects: names that are not DNS labels, ports beyond MaxPorts, IPs
// beyond MaxIPs and endpoints beyond MaxEndpoints.
func TestBounds(t *testing.T) {
	x := NewIndex()
	z := Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}
	// A ServiceImport's name is a DNS subdomain: dots would forge a
	// deeper name, here as the PTR record of its endpoint.
	x.SetImport(imp("shop", "db-0.cluster-a.db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetSlice(eps("shop", "dotted", "db-0.cluster-a.db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.9.8", nil, "f")))
	// A port name that is no DNS label, a duplicate and one too many.
	ports := []mcsv1beta1.ServicePort{port("Bad_Name", "", 1), port("http", "", 80), port("http", "", 8080)}
	for i := range MaxPorts {
		ports = append(ports, port(fmt.Sprintf("p%d", i), "", int32(1000+i)))
	}
	x.SetImport(imp("shop", "big", mcsv1beta1.ClusterSetIP, []string{"10.96.0.1", "fd00::1", "10.96.0.2"}, ports...))
	// A slice labelled with a Service name that is no DNS label.
	x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetImport(imp("shop", "db.x", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	x.SetSlice(eps("shop", "forged", "db.x", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.1.9.9", nil, "f")))
	// More ready endpoints than MaxEndpoints, over two slices.
	var many [2][]discoveryv1.Endpoint
	for i := range MaxEndpoints + 10 {
		many[i%2] = append(many[i%2], ep(fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), nil, fmt.Sprintf("h%04d", i)))
	}
	x.SetSlice(eps("shop", "db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, many[0]...))
	x.SetSlice(eps("shop", "db-b", "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, many[1]...))

	checks := []struct {
		reason string
		name   string
		qtype  uint16
		rcode  int
		count  int
	}{
		{reason: "A port name that is no DNS label has no SRV record.", name: "_bad_name._tcp.big.shop.svc.clusterset.local.", qtype: dns.TypeSRV, rcode: dns.RcodeNameError},
		{reason: "The first port of a name and protocol has its SRV record, once.", name: "_http._tcp.big.shop.svc.clusterset.local.", qtype: dns.TypeSRV, count: 1},
		{reason: "The last port within MaxPorts has its SRV record.", name: fmt.Sprintf("_p%d._tcp.big.shop.svc.clusterset.local.", MaxPorts-2), qtype: dns.TypeSRV, count: 1},
		{reason: "Ports beyond MaxPorts have none.", name: fmt.Sprintf("_p%d._tcp.big.shop.svc.clusterset.local.", MaxPorts-1), qtype: dns.TypeSRV, rcode: dns.RcodeNameError},
		{reason: "IPs beyond MaxIPs are left out.", name: "big.shop.svc.clusterset.local.", qtype: dns.TypeA, count: 1},
		{reason: "A headless Service answers at most MaxEndpoints addresses; the forged slice adds none.", name: "db.shop.svc.clusterset.local.", qtype: dns.TypeA, count: MaxEndpoints},
		{reason: "An endpoint beyond MaxEndpoints has no name.", name: fmt.Sprintf("h%04d.cluster-a.db.shop.svc.clusterset.local.", MaxEndpoints+5), qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{reason: "The SRV records of a headless Service are bounded too.", name: "_pg._tcp.db.shop.svc.clusterset.local.", qtype: dns.TypeSRV, count: MaxEndpoints},
	}
	if rrs, ok := z.Reverse("8.9.1.10.in-addr.arpa."); ok {
		t.Errorf("An import whose name is no DNS label names no endpoint; got %v", rrs)
	}
	if rrs, ok := z.Reverse("9.9.1.10.in-addr.arpa."); ok {
		t.Errorf("A slice whose Service name is no DNS label names no endpoint; got %v", rrs)
	}
	for _, c := range checks {
		r := z.Lookup(c.name, c.qtype)
		if r.Rcode != c.rcode || len(r.Answer) != c.count {
			t.Errorf("%s\nLookup(%s, %s): %s with %d records, want %s with %d", c.reason, c.name, dns.TypeToString[c.qtype],
				dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[c.rcode], c.count)
		}
	}
}

// TestAnswerBounds pins that an answer holds no more records than its
// transport carries (CoreDNS cuts the reply to that size): an SRV answer
// of a headless import of 1,000 endpoints was made whole, with its
// additional section, for every question, 25 ms of CPU and 167 KB each.
func TestAnswerBounds(t *testing.T) {
	x := NewIndex()
	x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", corev1.ProtocolTCP, 5432)))
	var many []discoveryv1.Endpoint
	for i := range MaxEndpoints {
		many = append(many, ep(fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), nil, fmt.Sprintf("h%04d", i)))
	}
	x.SetSlice(eps("shop", "db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, map[string]int32{"pg": 5432}, many...))
	cases := map[string]struct {
		reason string
		w      dns.ResponseWriter
		edns   uint16
		want   int
	}{
		"UDP":  {reason: "Over UDP without EDNS a reply holds 512 bytes: at most 32 records of 16 bytes.", w: &writer{}, want: 32},
		"EDNS": {reason: "Over UDP with EDNS, the size the client reads.", w: &writer{}, edns: 4096, want: 256},
		"TCP":  {reason: "Over TCP, up to MaxRecords.", w: &tcpWriter{}, want: MaxRecords},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := &Handler{Zone: Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}}
			r := new(dns.Msg)
			r.SetQuestion("_pg._tcp.db.shop.svc.clusterset.local.", dns.TypeSRV)
			if tc.edns > 0 {
				r.SetEdns0(tc.edns, false)
			}
			if _, err := h.ServeDNS(context.Background(), tc.w, r); err != nil {
				t.Fatal(err)
			}
			var m *dns.Msg
			switch w := tc.w.(type) {
			case *writer:
				m = w.msg
			case *tcpWriter:
				m = w.msg
			}
			if len(m.Answer) != tc.want || len(m.Extra) > tc.want {
				t.Errorf("%s\nanswer of %d records, additional section of %d; want %d and at most %d", tc.reason, len(m.Answer), len(m.Extra), tc.want, tc.want)
			}
		})
	}
}

// TestChangeHoldsNoLock pins that a change computes its Service without
// holding a lock that queries take: a rebuild of an import of 200 slices
// held the Index's lock 113 ms, and every query waited.
func TestChangeHoldsNoLock(t *testing.T) {
	x := fixture()
	held := []string{}
	x.computing = func() {
		if !x.view.TryRLock() {
			held = append(held, "the lock of every question")
		} else {
			x.view.RUnlock()
		}
		if !x.rev.TryRLock() {
			held = append(held, "the lock of PTR questions")
		} else {
			x.rev.RUnlock()
		}
		if !x.mu.TryLock() {
			held = append(held, "the lock of the watch's changes")
		} else {
			x.mu.Unlock()
		}
	}
	x.SetSlice(eps("shop", "db-b", "db", "cluster-b", discoveryv1.AddressTypeIPv4, nil, ep("10.2.2.9", nil, "db-9")))
	x.DeleteImport("shop", "hello")
	if len(held) > 0 {
		t.Errorf("while a change computed its Service, it held: %v", held)
	}
}

// TestMaxSlices pins that a Service's endpoints are gathered from its
// first MaxSlices EndpointSlices by name: a user who can make
// EndpointSlices cannot make a change of the Service sort without bound.
func TestMaxSlices(t *testing.T) {
	x := NewIndex()
	z := Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}
	x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	for i := range MaxSlices {
		x.SetSlice(eps("shop", fmt.Sprintf("db-%04d", i), "db", "cluster-b", discoveryv1.AddressTypeIPv4, nil, ep(fmt.Sprintf("10.3.%d.%d", i/250, i%250+1), nil, "")))
	}
	// One slice more, last by name, its endpoint first in DNS's order.
	x.SetSlice(eps("shop", "db-9999", "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep("10.9.9.9", nil, "a")))
	if r := z.Lookup("a.cluster-a.db.shop.svc.clusterset.local.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("the endpoint of a slice past the first %d: %s with %v, want NXDOMAIN", MaxSlices, dns.RcodeToString[r.Rcode], r.Answer)
	}
	if r := z.Lookup("10-3-0-1.cluster-b.db.shop.svc.clusterset.local.", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("the endpoint of the first slice: %s with %v, want its address", dns.RcodeToString[r.Rcode], r.Answer)
	}
}

// TestConcurrentChanges pins that changes made at once, as the watches of
// imports and of slices make them, leave the Index as the last of them
// says, while queries run: each change computes outside the lock, and only
// the latest change of a Service is published.
func TestConcurrentChanges(t *testing.T) {
	x := NewIndex()
	z := Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}
	const writers, rounds = 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				z.Lookup("db.shop.svc.clusterset.local.", dns.TypeA)
				z.Reverse("1.0.1.10.in-addr.arpa.")
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if w == 0 && r%10 == 0 {
					x.DeleteImport("shop", "db")
					x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
					continue
				}
				name := fmt.Sprintf("db-%d", w)
				if r%3 == 0 {
					x.DeleteSlice("shop", name)
					continue
				}
				x.SetSlice(eps("shop", name, "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep(fmt.Sprintf("10.1.%d.%d", w, r%250+1), nil, "")))
			}
			// Each writer ends with its slice holding one address.
			x.SetSlice(eps("shop", fmt.Sprintf("db-%d", w), "db", "cluster-a", discoveryv1.AddressTypeIPv4, nil, ep(fmt.Sprintf("10.1.%d.1", w), nil, "")))
		}()
	}
	wg.Wait()
	close(stop)
	x.SetImport(imp("shop", "db", mcsv1beta1.Headless, nil, port("pg", "", 5432)))
	got := text(z.Lookup("db.shop.svc.clusterset.local.", dns.TypeA).Answer)
	var want []string
	for w := range writers {
		want = append(want, fmt.Sprintf("db.shop.svc.clusterset.local.\t5\tIN\tA\t10.1.%d.1", w))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after concurrent changes: -want, +got:\n%s", diff)
	}
	for w := range writers {
		if _, ok := z.Reverse(fmt.Sprintf("1.%d.1.10.in-addr.arpa.", w)); !ok {
			t.Errorf("after concurrent changes: no PTR record of 10.1.%d.1", w)
		}
	}
	if _, ok := z.Reverse("2.0.1.10.in-addr.arpa."); ok {
		t.Error("after concurrent changes: a PTR record of an address gone")
	}
}
