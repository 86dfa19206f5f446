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

package testenv_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// The records below are those of the MCS DNS specification (KEP-1645's
// specification.md, schema 1.0.0); the numbers in the reasons are its
// sections. Every record is compared whole, as text: name, TTL, class,
// type and data.
const (
	zone = "clusterset.local."
	ttl  = "5" // the plugin's default, cluster-local Kubernetes DNS's
)

// rr is a record as miekg/dns prints it.
func rr(name, typ, data string) string {
	return name + "\t" + ttl + "\tIN\t" + typ + "\t" + data
}

// reply is what a test compares of a DNS reply.
type reply struct {
	Rcode  string
	AA     bool
	Answer []string
	Extra  []string
	// SOA is the authority section's SOA owner, which a negative answer
	// carries for negative caching (RFC 2308).
	SOA string
}

func records(rrs []dns.RR) []string {
	out := []string{}
	for _, r := range rrs {
		if r.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func ask(c *dns.Client, addr, name string, qtype uint16) (reply, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return reply{}, err
	}
	got := reply{Rcode: dns.RcodeToString[r.Rcode], AA: r.Authoritative, Answer: records(r.Answer), Extra: records(r.Extra)}
	for _, a := range r.Ns {
		if soa, ok := a.(*dns.SOA); ok {
			got.SOA = soa.Hdr.Name
		}
	}
	return got, nil
}

// dnsMember returns the clients of a member with the MCS CRDs and a
// kubeconfig of a ServiceAccount with no more rights than the plugin
// needs: list and watch ServiceImports and EndpointSlices.
func dnsMember(ctx context.Context, t *testing.T, m *testenv.Member) (kubernetes.Interface, mcsclient.Interface, []byte) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(m.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mcsclient.NewForConfig(m.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	const sa, ns = "coredns", "kube-system"
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-clusterset"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{mcsv1beta1.GroupName}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-clusterset"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "coredns-clusterset"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := testenv.ServiceAccountToken(ctx, m.AdminConfig, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := testenv.Kubeconfig(m.AdminConfig.Host, m.AdminConfig.CAData, token)
	if err != nil {
		t.Fatal(err)
	}
	return kc, mc, kubeconfig
}

func endpoint(addr string, ready *bool, host string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if host != "" {
		e.Hostname = ptr.To(host)
	}
	return e
}

// manyEndpoints are n ready endpoints without host names.
func manyEndpoints(n int) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, 0, n)
	for i := range n {
		out = append(out, endpoint(fmt.Sprintf("10.1.4.%d", i+1), ptr.To(true), ""))
	}
	return out
}

func importedSlice(name, service, cluster string, t discoveryv1.AddressType, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: service, mcsv1beta1.LabelSourceCluster: cluster,
		}},
		AddressType: t,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

// TestCoreDNSClusterSet runs CoreDNS built with the clusterset plugin
// (test/tools/build.sh coredns-mcs) against a real API server and checks
// its answers record by record against the MCS DNS specification, then
// that it follows an endpoint that stops being ready and an import that
// goes.
func TestCoreDNSClusterSet(t *testing.T) {
	if !testenv.Enabled() {
		t.Skip(testenv.SkipMessage)
	}
	if testenv.CoreDNSPath() == "" {
		t.Skip(testenv.CoreDNSSkipMessage)
	}
	m := testenv.StartMember(t, testenv.MemberOptions{Services: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, mc, kubeconfig := dnsMember(ctx, t, m)

	const ns = "shop"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	imports := []*mcsv1beta1.ServiceImport{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10", "fd00::10"},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
				Ports: []mcsv1beta1.ServicePort{
					{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.Headless,
				Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}},
			},
		},
		{
			// The conformance suite's Service: one port number over TCP
			// and UDP.
			ObjectMeta: metav1.ObjectMeta{Name: "conf"},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.42"},
				Ports: []mcsv1beta1.ServicePort{
					{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42},
					{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42},
				},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "many"},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.Headless,
				Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "idle"},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.Headless,
				Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}},
			},
		},
	}
	for _, si := range imports {
		if _, err := mc.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, si, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	endpointSlices := []*discoveryv1.EndpointSlice{
		// cluster-a serves pg on 15432: an SRV record carries the port of
		// its endpoint's cluster.
		importedSlice("db-a", "db", "cluster-a", discoveryv1.AddressTypeIPv4, 15432,
			endpoint("10.1.2.1", ptr.To(true), "db-0"),
			endpoint("10.1.2.3", ptr.To(false), "db-2"),
			endpoint("10.1.2.4", nil, "")),
		importedSlice("db-b", "db", "cluster-b", discoveryv1.AddressTypeIPv6, 5432,
			endpoint("fd01::5", ptr.To(true), "db-0"),
			endpoint("fd01::6", ptr.To(true), "")),
		importedSlice("many-a", "many", "cluster-a", discoveryv1.AddressTypeIPv4, 5432, manyEndpoints(100)...),
		importedSlice("idle-a", "idle", "cluster-a", discoveryv1.AddressTypeIPv4, 5432,
			endpoint("10.1.3.1", ptr.To(false), "idle-0")),
	}
	for _, es := range endpointSlices {
		if _, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// CoreDNS starts after the objects exist; it is ready once its
	// watches have listed them, so the first answers need no waiting.
	// whoami stands for the cluster's own DNS after clusterset: it
	// answers every question it is passed with the client's address, in
	// the additional section.
	server := testenv.StartCoreDNS(t, kubeconfig, "whoami")
	udp, tcp := &dns.Client{Net: "udp", Timeout: 5 * time.Second}, &dns.Client{Net: "tcp", Timeout: 5 * time.Second}

	hello := "hello.shop.svc." + zone
	db := "db.shop.svc." + zone
	nx := func() reply {
		return reply{Rcode: "NXDOMAIN", AA: true, Answer: []string{}, Extra: []string{}, SOA: zone}
	}
	nodata := func() reply {
		return reply{Rcode: "NOERROR", AA: true, Answer: []string{}, Extra: []string{}, SOA: zone}
	}
	ok := func(answer []string, extra ...string) reply {
		sort.Strings(answer)
		sort.Strings(extra)
		return reply{Rcode: "NOERROR", AA: true, Answer: answer, Extra: append([]string{}, extra...)}
	}
	cases := []struct {
		reason string
		name   string
		qtype  uint16
		tcp    bool
		want   reply
	}{
		{
			reason: "2.2: dns-version.<zone> holds the schema version.",
			name:   "dns-version." + zone, qtype: dns.TypeTXT,
			want: ok([]string{rr("dns-version."+zone, "TXT", `"1.0.0"`)}),
		},
		{
			reason: "2.3.1: an IPv4 ClusterSet IP is the Service's A record.",
			name:   hello, qtype: dns.TypeA,
			want: ok([]string{rr(hello, "A", "10.96.0.10")}),
		},
		{
			reason: "2.3.1: an IPv6 ClusterSet IP is its AAAA record (dual stack: both exist).",
			name:   hello, qtype: dns.TypeAAAA,
			want: ok([]string{rr(hello, "AAAA", "fd00::10")}),
		},
		{
			reason: "2.3.1 over TCP: the same record.",
			name:   hello, qtype: dns.TypeA, tcp: true,
			want: ok([]string{rr(hello, "A", "10.96.0.10")}),
		},
		{
			reason: "Names compare case-insensitively (cluster-local 2.1); the record carries the name as asked.",
			name:   "Hello.SHOP.svc.ClusterSet.local.", qtype: dns.TypeA,
			want: ok([]string{rr("Hello.SHOP.svc.ClusterSet.local.", "A", "10.96.0.10")}),
		},
		{
			reason: "2.3.2: a named TCP port has an SRV record whose target is the Service; the additional section holds its addresses.",
			name:   "_http._tcp." + hello, qtype: dns.TypeSRV,
			want: ok([]string{rr("_http._tcp."+hello, "SRV", "0 100 80 "+hello)},
				rr(hello, "A", "10.96.0.10"), rr(hello, "AAAA", "fd00::10")),
		},
		{
			reason: "2.3.2: the protocol label is the port's: a UDP port under _udp.",
			name:   "_dns._udp." + hello, qtype: dns.TypeSRV,
			want: ok([]string{rr("_dns._udp."+hello, "SRV", "0 100 53 "+hello)},
				rr(hello, "A", "10.96.0.10"), rr(hello, "AAAA", "fd00::10")),
		},
		{
			reason: "2.3.2: a port under a protocol it does not use does not exist.",
			name:   "_dns._tcp." + hello, qtype: dns.TypeSRV,
			want: nx(),
		},
		{
			reason: "2.3.4: a ClusterSetIP Service has no name per cluster.",
			name:   "cluster-a." + hello, qtype: dns.TypeA,
			want: nx(),
		},
		{
			reason: "The Service's name exists without a TXT record: NODATA, with the SOA for negative caching.",
			name:   hello, qtype: dns.TypeTXT,
			want: nodata(),
		},
		{
			reason: "2.4.1: a headless Service has an A record per ready IPv4 endpoint of every cluster; db-2 is not ready.",
			name:   db, qtype: dns.TypeA,
			want: ok([]string{rr(db, "A", "10.1.2.1"), rr(db, "A", "10.1.2.4")}),
		},
		{
			reason: "2.4.1: and an AAAA record per ready IPv6 endpoint.",
			name:   db, qtype: dns.TypeAAAA,
			want: ok([]string{rr(db, "AAAA", "fd01::5"), rr(db, "AAAA", "fd01::6")}),
		},
		{
			reason: "An IPv6 endpoint without a hostname is named by its compressed address with dashes, as CoreDNS names it and the conformance suite asks.",
			name:   "fd01--6.cluster-b." + db, qtype: dns.TypeAAAA,
			want: ok([]string{rr("fd01--6.cluster-b."+db, "AAAA", "fd01::6")}),
		},
		{
			reason: "SRV at a ClusterSetIP Service's own name, as the conformance suite asks: a record per port, whose target is the Service.",
			name:   hello, qtype: dns.TypeSRV,
			want: ok([]string{rr(hello, "SRV", "0 100 53 "+hello), rr(hello, "SRV", "0 100 80 "+hello)},
				rr(hello, "A", "10.96.0.10"), rr(hello, "AAAA", "fd00::10")),
		},
		{
			reason: "SRV at the conformance suite's Service (tcp/42 and udp/42): one record, as the suite wants; an SRV record holds no protocol.",
			name:   "conf.shop.svc." + zone, qtype: dns.TypeSRV,
			want: ok([]string{rr("conf.shop.svc."+zone, "SRV", "0 100 42 conf.shop.svc."+zone)}, rr("conf.shop.svc."+zone, "A", "10.96.0.42")),
		},
		{
			reason: "SRV at a headless Service's own name: a record per ready endpoint and port, with its cluster's port; the targets' addresses in the additional section.",
			name:   db, qtype: dns.TypeSRV,
			want: ok([]string{
				rr(db, "SRV", "0 100 15432 10-1-2-4.cluster-a."+db),
				rr(db, "SRV", "0 100 15432 db-0.cluster-a."+db),
				rr(db, "SRV", "0 100 5432 db-0.cluster-b."+db),
				rr(db, "SRV", "0 100 5432 fd01--6.cluster-b."+db),
			}, rr("10-1-2-4.cluster-a."+db, "A", "10.1.2.4"), rr("db-0.cluster-a."+db, "A", "10.1.2.1"),
				rr("db-0.cluster-b."+db, "AAAA", "fd01::5"), rr("fd01--6.cluster-b."+db, "AAAA", "fd01::6")),
		},

		{
			reason: "2.4.1: <hostname>.<clusterid>.<service> has the endpoint's address.",
			name:   "db-0.cluster-a." + db, qtype: dns.TypeA,
			want: ok([]string{rr("db-0.cluster-a."+db, "A", "10.1.2.1")}),
		},
		{
			reason: "2.4.1: the same hostname in another cluster is another name, with that cluster's address.",
			name:   "db-0.cluster-b." + db, qtype: dns.TypeAAAA,
			want: ok([]string{rr("db-0.cluster-b."+db, "AAAA", "fd01::5")}),
		},
		{
			reason: "An IPv6-only endpoint's name has no A record: NODATA.",
			name:   "db-0.cluster-b." + db, qtype: dns.TypeA,
			want: nodata(),
		},
		{
			reason: "2.1: an endpoint without a hostname has a system-assigned one: its address with dashes.",
			name:   "10-1-2-4.cluster-a." + db, qtype: dns.TypeA,
			want: ok([]string{rr("10-1-2-4.cluster-a."+db, "A", "10.1.2.4")}),
		},
		{
			reason: "2.4.1: an endpoint that is not ready has no record.",
			name:   "db-2.cluster-a." + db, qtype: dns.TypeA,
			want: nx(),
		},
		{
			reason: "2.4.2: an SRV record per ready endpoint and named port, each with the port of its cluster; the additional section holds the targets' addresses.",
			name:   "_pg._tcp." + db, qtype: dns.TypeSRV,
			want: ok([]string{
				rr("_pg._tcp."+db, "SRV", "0 100 15432 10-1-2-4.cluster-a."+db),
				rr("_pg._tcp."+db, "SRV", "0 100 15432 db-0.cluster-a."+db),
				rr("_pg._tcp."+db, "SRV", "0 100 5432 db-0.cluster-b."+db),
				rr("_pg._tcp."+db, "SRV", "0 100 5432 fd01--6.cluster-b."+db),
			}, rr("10-1-2-4.cluster-a."+db, "A", "10.1.2.4"), rr("db-0.cluster-a."+db, "A", "10.1.2.1"),
				rr("db-0.cluster-b."+db, "AAAA", "fd01::5"), rr("fd01--6.cluster-b."+db, "AAAA", "fd01::6")),
		},
		{
			reason: "2.4.3: a ready endpoint's IPv4 address has a PTR record of its name.",
			name:   "1.2.1.10.in-addr.arpa.", qtype: dns.TypePTR,
			want: ok([]string{rr("1.2.1.10.in-addr.arpa.", "PTR", "db-0.cluster-a."+db)}),
		},
		{
			reason: "2.4.3: an IPv6 address's PTR name is its nibbles, reversed.",
			name:   "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.d.f.ip6.arpa.", qtype: dns.TypePTR,
			want: ok([]string{rr("5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.d.f.ip6.arpa.", "PTR", "db-0.cluster-b."+db)}),
		},
		{
			reason: "2.4.1: a headless Service without a ready endpoint is NXDOMAIN.",
			name:   "idle.shop.svc." + zone, qtype: dns.TypeA,
			want: nx(),
		},
		{
			reason: "A Service that is not imported does not exist.",
			name:   "nothere.shop.svc." + zone, qtype: dns.TypeA,
			want: nx(),
		},
		{
			reason: "A namespace without imports does not exist.",
			name:   "hello.other.svc." + zone, qtype: dns.TypeA,
			want: nx(),
		},
		{
			reason: "A namespace with imports is an empty non-terminal: NODATA, not NXDOMAIN (RFC 8020).",
			name:   "shop.svc." + zone, qtype: dns.TypeA,
			want: nodata(),
		},
	}
	for _, tc := range cases {
		c := udp
		if tc.tcp {
			c = tcp
		}
		got, err := ask(c, server.Addr, tc.name, tc.qtype)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.name, dns.TypeToString[tc.qtype], err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s\n%s %s: -want, +got:\n%s", tc.reason, tc.name, dns.TypeToString[tc.qtype], diff)
		}
	}
	// cluster.local stays local: the plugin passes the name on, and the
	// cluster's own DNS (here whoami) answers it, not the ClusterSet IP.
	local, err := ask(udp, server.Addr, "hello.shop.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(local.Answer) != 0 || local.SOA != "" || !slices.Contains(local.Extra, "hello.shop.svc.cluster.local.\t0\tIN\tA\t127.0.0.1") {
		t.Errorf("hello.shop.svc.cluster.local. A: %+v, want the answer of the next plugin (whoami: the client's address in the additional section)", local)
	}

	// An answer larger than UDP carries is cut to 512 bytes and marked
	// truncated; over TCP it is whole.
	many := "_pg._tcp.many.shop.svc." + zone
	for _, c := range []struct {
		client    *dns.Client
		truncated bool
		records   int
	}{{udp, true, -1}, {tcp, false, 100}} {
		m := new(dns.Msg)
		m.SetQuestion(many, dns.TypeSRV)
		r, _, err := c.client.Exchange(m, server.Addr)
		if err != nil {
			t.Fatal(err)
		}
		r.Compress = true // as CoreDNS sent it
		if r.Truncated != c.truncated || c.records >= 0 && len(r.Answer) != c.records || r.Len() > 512 && c.truncated {
			t.Errorf("%s SRV over %s: truncated %t with %d records in %d bytes; want truncated %t, %d records", many, c.client.Net, r.Truncated, len(r.Answer), r.Len(), c.truncated, c.records)
		}
	}

	// Every negative answer's SOA has the TTL of the records, as its
	// minimum: a resolver caches NXDOMAIN no longer than a record.
	q := new(dns.Msg)
	q.SetQuestion("nothere.shop.svc."+zone, dns.TypeA)
	r, _, err := udp.Exchange(q, server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ns) != 1 {
		t.Fatalf("negative answer's authority section: %v, want its SOA", r.Ns)
	}
	if soa, isSOA := r.Ns[0].(*dns.SOA); !isSOA || soa.Hdr.Ttl != 5 || soa.Minttl != 5 {
		t.Errorf("negative answer's SOA: %v, want TTL and minimum 5", r.Ns)
	}

	// Changes: the watches carry them to the answers.
	follow := func(reason, name string, qtype uint16, change func() error, want reply) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(ctx, t, reason+"\n"+name+" "+dns.TypeToString[qtype]+": the answer", 30*time.Second, 50*time.Millisecond, func() (bool, error) {
			got, err := ask(udp, server.Addr, name, qtype)
			if err != nil {
				return false, err
			}
			if diff := cmp.Diff(want, got); diff != "" {
				return false, fmt.Errorf("-want, +got:\n%s", diff)
			}
			return true, nil
		})
	}
	follow("2.4.1: db-0 of cluster-a stops being ready: its name goes.", "db-0.cluster-a."+db, dns.TypeA, func() error {
		es, err := kc.DiscoveryV1().EndpointSlices(ns).Get(ctx, "db-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		es.Endpoints[0].Conditions.Ready = ptr.To(false)
		_, err = kc.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{})
		return err
	}, nx())
	follow("2.4.1: and so does its address under the Service's name.", db, dns.TypeA, func() error { return nil },
		ok([]string{rr(db, "A", "10.1.2.4")}))
	follow("The import removed: its name is NXDOMAIN.", hello, dns.TypeA, func() error {
		return mc.MulticlusterV1beta1().ServiceImports(ns).Delete(ctx, "hello", metav1.DeleteOptions{})
	}, nx())
	follow("The import removed: its SRV names go too.", "_http._tcp."+hello, dns.TypeSRV, func() error { return nil }, nx())
	if out := server.Output(); strings.Contains(out, "[ERROR]") {
		t.Errorf("CoreDNS logged errors:\n%s", out)
	}
}
