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
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

var testSelector = map[string]string{"kilomesh.io/mesh": "m", "app.kubernetes.io/managed-by": "kilomesh", "kilomesh.io/mesh-namespace": "team"}

// exporting is a view of namespace shop in which a member exports a
// Service of the ports, with one ready endpoint.
func exporting(name, addr string, created int64, ports ...corev1.ServicePort) *remote.ServiceView {
	return &remote.ServiceView{
		Exports: []*mcsv1beta1.ServiceExport{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: metav1.Unix(created, 0)}}},
		Services: []*corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"": ""}, Ports: ports},
		}},
		Slices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		}},
	}
}

func port(name string, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func input(local *remote.ServiceView, sources ...*remote.ServiceView) Input {
	in := Input{
		Selector: testSelector, Owner: [2]string{"team", "m"}, Namespaces: []string{"shop"}, Family: "IPv4",
		Local: Exporter{ClusterID: "local", Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, Views: map[string]*remote.ServiceView{"shop": local}},
	}
	for i, v := range sources {
		id := string(rune('a' + i))
		in.Sources = append(in.Sources, Exporter{
			Name: id, ClusterID: id,
			Networks: []netip.Prefix{netip.MustParsePrefix("10." + string(rune('1'+i)) + ".0.0/16")},
			Views:    map[string]*remote.ServiceView{"shop": v},
		})
	}
	return in
}

// TestPlanNeverAdoptsPlanted: a Service under the derived name, with the
// mesh's labels, that kilomesh did not make or that has a selector, is
// never adopted.
func TestPlanNeverAdoptsPlanted(t *testing.T) {
	derived := v1alpha1.DerivedName([2]string{"team", "m"}, "shop", "hello")
	planted := func(selector map[string]string, managers ...string) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: derived, Labels: withLabels(testSelector, map[string]string{mcsv1beta1.LabelServiceName: "hello"})},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.99", Selector: selector},
		}
		for _, m := range managers {
			s.ManagedFields = append(s.ManagedFields, metav1.ManagedFieldsEntry{Manager: m})
		}
		return s
	}
	cases := map[string]struct {
		reason  string
		svc     *corev1.Service
		adopted bool
	}{
		"WithSelector": {
			reason: "A Service with a selector would put its pods behind the ClusterSet IP, even if it names kilomesh's field manager.",
			svc:    planted(map[string]string{"": ""}, remote.ServicesFieldManager),
		},
		"NotMadeByKilomesh": {
			reason: "A Service with the mesh's labels that another field manager made is left as it is.",
			svc:    planted(nil, "kubectl-create"),
		},
		"MadeByKilomesh": {
			reason:  "The Service kilomesh made is its own.",
			svc:     planted(nil, "kubectl-label", remote.ServicesFieldManager),
			adopted: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			local := &remote.ServiceView{Services: []*corev1.Service{tc.svc}}
			p := NewPlan(input(local, exporting("hello", "10.1.0.5", 1, port("http", 80))))
			if tc.adopted {
				if len(p.Imports) != 1 || p.Imports[0].HaveService != tc.svc || len(p.Problems) != 0 {
					t.Errorf("%s\nwant hello imported over the Service, got imports %d, problems %+v", tc.reason, len(p.Imports), p.Problems)
				}
				return
			}
			if len(p.Imports) != 0 || len(p.Problems) != 1 || p.Problems[0].Reason != v1alpha1.ReasonImportNameConflict {
				t.Errorf("%s\nwant no import and an ImportNameConflict, got imports %d, problems %+v", tc.reason, len(p.Imports), p.Problems)
			}
			for _, s := range p.DeleteServices {
				if s == tc.svc {
					t.Errorf("%s\nthe planted Service is deleted", tc.reason)
				}
			}
		})
	}
}

// TestPlanExportConditionsPerMesh: a mesh writes the conditions only of
// exports it reads, and never over another mesh's.
func TestPlanExportConditionsPerMesh(t *testing.T) {
	mine := StatusManager([2]string{"team", "m"})
	held := func(managers ...string) []metav1.ManagedFieldsEntry {
		var out []metav1.ManagedFieldsEntry
		for _, m := range managers {
			out = append(out, metav1.ManagedFieldsEntry{Manager: m, Subresource: "status"})
		}
		return out
	}
	cases := map[string]struct {
		reason   string
		labels   map[string]string
		managers []metav1.ManagedFieldsEntry
		read     bool
		writes   bool
	}{
		"Unclaimed": {
			reason: "An export no mesh wrote conditions on gets this mesh's.",
			read:   true, writes: true,
		},
		"HeldByAnotherMesh": {
			reason:   "Another mesh that shares the namespace wrote the conditions first: this mesh still exports the Service, and leaves them alone.",
			managers: held("kilomesh-services/a-tenant/n"),
			read:     true,
		},
		"HeldByBothSmallestWrites": {
			reason:   "When both hold them, the smallest field manager writes; the other stops.",
			managers: held("kilomesh-services/zz/n", mine),
			read:     true, writes: true,
		},
		"HeldByBothLargerStops": {
			reason:   "When both hold them and the other's field manager is smaller, this mesh stops.",
			managers: held("kilomesh-services/a-tenant/n", mine),
			read:     true,
		},
		"LegacyManager": {
			reason:   "The single field manager of earlier releases is no mesh's: taken over.",
			managers: held(remote.ServicesFieldManager),
			read:     true, writes: true,
		},
		"LabelledForThisMesh": {
			reason:   "An export that names this mesh is its own, whoever wrote before.",
			labels:   map[string]string{meshv1alpha1.LabelMesh: "m", meshv1alpha1.LabelMeshNamespace: "team"},
			managers: held("kilomesh-services/a-tenant/n"),
			read:     true, writes: true,
		},
		"LabelledForAnotherMesh": {
			reason: "An export that names another mesh is neither exported nor written by this one.",
			labels: map[string]string{meshv1alpha1.LabelMesh: "n"},
		},
		"LabelledForTheSameNameInAnotherNamespace": {
			reason: "The mesh's namespace counts when the export names one.",
			labels: map[string]string{meshv1alpha1.LabelMesh: "m", meshv1alpha1.LabelMeshNamespace: "other"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			local := exporting("hello", "10.0.0.5", 1, port("http", 80))
			local.Exports[0].Labels = tc.labels
			local.Exports[0].ManagedFields = tc.managers
			in := input(local)
			in.Manager = mine
			p := NewPlan(in)
			if read := p.Exported == 1 && len(p.Imports) == 1; read != tc.read {
				t.Errorf("%s\nexported and imported: got %t, want %t", tc.reason, read, tc.read)
			}
			if writes := len(p.Exports) == 1; writes != tc.writes {
				t.Errorf("%s\nconditions written: got %t, want %t", tc.reason, writes, tc.writes)
			}
		})
	}
}

// TestPlanMergesPorts: the ports of an import are merged by MCS's rule and
// are those a Service may carry; a bad or conflicting port is dropped and
// reported on its export, never the whole import.
func TestPlanMergesPorts(t *testing.T) {
	http := port("http", 80)
	cases := map[string]struct {
		reason   string
		older    []corev1.ServicePort
		newer    []corev1.ServicePort
		want     []string
		conflict string
	}{
		"Union": {
			reason: "Ports of other names and numbers are merged, and MCS reports the ports that differ as a conflict.",
			older:  []corev1.ServicePort{http}, newer: []corev1.ServicePort{port("grpc", 90)},
			want: []string{"http 80/TCP", "grpc 90/TCP"}, conflict: "PortConflict",
		},
		"SameNumberOtherName": {
			reason: "Two names for 80/TCP: a Service may not carry both; the oldest's wins.",
			older:  []corev1.ServicePort{http}, newer: []corev1.ServicePort{port("web", 80)},
			want: []string{"http 80/TCP"}, conflict: "PortConflict",
		},
		"SameNameOtherNumber": {
			reason: "One name, two numbers: the oldest's wins.",
			older:  []corev1.ServicePort{http}, newer: []corev1.ServicePort{port("http", 8080)},
			want: []string{"http 80/TCP"}, conflict: "PortConflict",
		},
		"UnnamedAmongSeveral": {
			reason: "An unnamed port cannot sit among others in a Service.",
			older:  []corev1.ServicePort{port("", 80)}, newer: []corev1.ServicePort{port("metrics", 9090)},
			want: []string{" 80/TCP"}, conflict: "PortConflict",
		},
		"NameNoServiceCarries": {
			reason: "A hostile API server's port name that is not a DNS label is dropped; the other port is imported.",
			older:  []corev1.ServicePort{http}, newer: []corev1.ServicePort{port("Not_A_Port_Name!", 81), port("grpc", 90)},
			want: []string{"http 80/TCP", "grpc 90/TCP"}, conflict: "PortConflict",
		},
		"NumberOutOfRange": {
			reason: "Port 0 or 70000 is dropped.",
			older:  []corev1.ServicePort{http}, newer: []corev1.ServicePort{port("big", 70000)},
			want: []string{"http 80/TCP"}, conflict: "PortConflict",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The member itself exports the newer, so that the plan says
			// what its export's conditions become.
			older := exporting("hello", "10.1.0.5", 1, tc.older...)
			newer := exporting("hello", "10.0.0.5", 2, tc.newer...)
			p := NewPlan(input(newer, older))
			if len(p.Imports) != 1 || len(p.Problems) != 0 {
				t.Fatalf("%s\nwant hello imported, got %d imports, problems %+v", tc.reason, len(p.Imports), p.Problems)
			}
			imp := p.Imports[0]
			var got []string
			for _, pt := range imp.Import.Spec.Ports {
				got = append(got, fmt.Sprintf("%s %d/%s", pt.Name, pt.Port, pt.Protocol))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nports, -want, +got:\n%s", tc.reason, diff)
			}
			if len(imp.Service.Spec.Ports) != len(tc.want) {
				t.Errorf("%s\nthe derived Service has %d ports, want %d", tc.reason, len(imp.Service.Spec.Ports), len(tc.want))
			}
			if diff := cmp.Diff([]string{"a", "local"}, clusterIDs(imp)); diff != "" {
				t.Errorf("%s\nboth exporters imported, -want, +got:\n%s", tc.reason, diff)
			}
			reason := ""
			for _, st := range p.Exports {
				for _, c := range st.Conditions {
					if c.Type == string(mcsv1beta1.ServiceExportConditionConflict) && c.Status == metav1.ConditionTrue {
						reason = c.Reason
					}
				}
			}
			if reason != tc.conflict {
				t.Errorf("%s\nthe newer export's Conflict reason is %q, want %q", tc.reason, reason, tc.conflict)
			}
		})
	}
}

func clusterIDs(imp Import) []string {
	var out []string
	for _, c := range imp.Import.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// TestPlanOrdersByFirstSeen: the export the provider saw first wins, not
// the one whose exporter claims the oldest creation time.
func TestPlanOrdersByFirstSeen(t *testing.T) {
	http := port("http", 80)
	honest := exporting("hello", "10.1.0.5", 1_700_000_000, http)
	// A hostile member's API server claims its export was made in 1970,
	// as a headless Service, to exclude the honest exporter.
	forged := exporting("hello", "10.2.0.5", 0, http)
	forged.Services[0].Spec.ClusterIP = corev1.ClusterIPNone
	in := input(&remote.ServiceView{}, honest, forged)
	seen := metav1.Unix(1_800_000_000, 0)
	in.Seen = map[SeenKey]metav1.Time{{Service: "shop/hello", Cluster: "a"}: seen}
	in.Now = metav1.Unix(1_800_000_600, 0)
	p := NewPlan(in)
	if len(p.Imports) != 1 {
		t.Fatalf("want hello imported, got %d imports, problems %+v", len(p.Imports), p.Problems)
	}
	imp := p.Imports[0]
	if imp.Import.Spec.Type != mcsv1beta1.ClusterSetIP {
		t.Errorf("the import is %s, want the honest exporter's ClusterSetIP", imp.Import.Spec.Type)
	}
	if diff := cmp.Diff([]string{"a"}, clusterIDs(imp)); diff != "" {
		t.Errorf("exporters imported, -want, +got:\n%s", diff)
	}
	want := []v1alpha1.ExportSeen{
		{Service: "shop/hello", Cluster: "a", Since: seen},
		{Service: "shop/hello", Cluster: "b", Since: in.Now},
	}
	if diff := cmp.Diff(want, p.Seen); diff != "" {
		t.Errorf("first seen, -want, +got:\n%s", diff)
	}

	// A source that cannot be read keeps when its exports were seen.
	in.Sources[0].Views = nil
	p = NewPlan(in)
	if diff := cmp.Diff(want, p.Seen); diff != "" {
		t.Errorf("with a unreadable: first seen, -want, +got:\n%s", diff)
	}
}

// TestPlanIncompleteWritesNothing: a watch that left objects out past its
// bounds makes the plan write and delete nothing: the exports it missed
// would pass for deleted, and their imports be deleted everywhere.
func TestPlanIncompleteWritesNothing(t *testing.T) {
	local := &remote.ServiceView{Imports: []*mcsv1beta1.ServiceImport{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hello", Labels: testSelector},
	}}}
	source := exporting("other", "10.1.0.5", 1, port("http", 80))
	source.Incomplete = []string{"ServiceExports (more than 20000 objects)"}
	in := input(local, source)
	p := NewPlan(in)
	if len(p.DeleteImports)+len(p.DeleteServices)+len(p.DeleteSlices)+len(p.Imports)+len(p.Exports) != 0 {
		t.Errorf("an incomplete feed plans writes: %d imports, %d deletions of imports", len(p.Imports), len(p.DeleteImports))
	}
	if want := "source a, namespace shop: ServiceExports (more than 20000 objects)"; p.Incomplete != want {
		t.Errorf("Incomplete: got %q, want %q", p.Incomplete, want)
	}
}

// TestPlanGuardsImporterAddresses: whatever networks a hand-made
// ServiceSync declares for a source, its endpoints may not point at the
// importer's own networks, another member's, or the importer's API server.
func TestPlanGuardsImporterAddresses(t *testing.T) {
	hostile := exporting("hello", "10.9.0.1", 1, port("http", 80))
	for _, addr := range []string{"10.0.0.7", "192.0.2.1", "10.2.0.5"} {
		hostile.Slices[0].Endpoints = append(hostile.Slices[0].Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	in := input(&remote.ServiceView{}, hostile, &remote.ServiceView{})
	in.Sources[0].Networks = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	in.Guarded = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	p := NewPlan(in)
	if len(p.Imports) != 1 {
		t.Fatalf("want hello imported, got %d imports, problems %+v", len(p.Imports), p.Problems)
	}
	var got []string
	for _, s := range p.Imports[0].Slices {
		for _, e := range s.Endpoints {
			got = append(got, e.Addresses[0])
		}
	}
	if diff := cmp.Diff([]string{"10.9.0.1"}, got); diff != "" {
		t.Errorf("endpoints imported, -want, +got:\n%s", diff)
	}
}

func TestCheckNamespaces(t *testing.T) {
	for _, bad := range []string{"", "Shop", "a.b", strings.Repeat("a", 64)} {
		if err := checkNamespaces(field.NewPath("spec", "forProvider", "namespaces"), []string{"shop", bad}); err == nil || !strings.Contains(err.Error(), "spec.forProvider.namespaces[1]") {
			t.Errorf("namespace %q: want an error naming spec.forProvider.namespaces[1], got %v", bad, err)
		}
	}
	if err := checkNamespaces(field.NewPath("namespaces"), []string{"shop", "web-1"}); err != nil {
		t.Errorf("DNS labels refused: %v", err)
	}
}

// exportConflict returns the Conflict condition the plan writes on the
// member's own export, as status/reason, and its message.
func exportConflict(p Plan) (string, string) {
	for _, st := range p.Exports {
		for _, c := range st.Conditions {
			if c.Type == string(mcsv1beta1.ServiceExportConditionConflict) {
				return string(c.Status) + "/" + c.Reason, c.Message
			}
		}
	}
	return "", ""
}

// exportCondition returns a condition the plan writes on the member's own
// export.
func exportCondition(p Plan, typ string) metav1.Condition {
	for _, st := range p.Exports {
		for _, c := range st.Conditions {
			if c.Type == typ {
				return c
			}
		}
	}
	return metav1.Condition{}
}

// TestPlanConflictOnEveryExport: a conflict among the exports of a Service
// is reported on every export involved, the winner's too, each naming the
// other cluster; the ClusterSet takes the oldest export's value, and the
// ports are the union of the exports'.
func TestPlanConflictOnEveryExport(t *testing.T) {
	type change func(*remote.ServiceView)
	svc := func(f func(*corev1.ServiceSpec)) change {
		return func(v *remote.ServiceView) { f(&v.Services[0].Spec) }
	}
	export := func(f func(*mcsv1beta1.ServiceExportSpec)) change {
		return func(v *remote.ServiceView) { f(&v.Exports[0].Spec) }
	}
	affinity := func(timeout int32) change {
		return svc(func(s *corev1.ServiceSpec) {
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
		})
	}
	udp := corev1.ServicePort{Name: "udp", Port: 42, Protocol: corev1.ProtocolUDP}
	sctp := corev1.ServicePort{Name: "stcp", Port: 142, Protocol: corev1.ProtocolSCTP}
	cases := map[string]struct {
		reason       string
		older, newer []corev1.ServicePort
		changeOlder  change
		changeNewer  change
		conflict     string
		ports        []string
		check        func(*testing.T, Import)
	}{
		"SameEverything": {
			reason: "Exports that agree report no conflict.",
			older:  []corev1.ServicePort{port("tcp", 42), udp}, newer: []corev1.ServicePort{port("tcp", 42), udp},
			conflict: "False/NoConflicts",
			ports:    []string{"tcp 42/TCP", "udp 42/UDP"},
		},
		"PortUnion": {
			reason: "Ports that differ are merged as a union, and MCS raises a PortConflict on each export (the conformance suite's union of ports).",
			older:  []corev1.ServicePort{port("tcp", 42), udp}, newer: []corev1.ServicePort{port("tcp", 42), sctp},
			conflict: "True/PortConflict",
			ports:    []string{"tcp 42/TCP", "udp 42/UDP", "stcp 142/SCTP"},
		},
		"PortNameOtherNumber": {
			reason: "One name on two numbers: the oldest's number, a conflict on both.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 43)},
			conflict: "True/PortConflict",
			ports:    []string{"tcp 42/TCP"},
		},
		"PortNameOtherProtocol": {
			reason: "One name on two protocols: the oldest's, a conflict on both.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{{Name: "tcp", Port: 42, Protocol: corev1.ProtocolUDP}},
			conflict: "True/PortConflict",
			ports:    []string{"tcp 42/TCP"},
		},
		"Headlessness": {
			reason: "A headless export among ClusterSetIP ones: the oldest's type, a TypeConflict on both.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeNewer: svc(func(s *corev1.ServiceSpec) { s.ClusterIP = corev1.ClusterIPNone }),
			conflict:    "True/TypeConflict",
			ports:       []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				if imp.Import.Spec.Type != mcsv1beta1.ClusterSetIP {
					t.Errorf("type %s, want the oldest's ClusterSetIP", imp.Import.Spec.Type)
				}
			},
		},
		"SessionAffinity": {
			reason: "ClientIP against None: the oldest's affinity.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeOlder: affinity(10),
			changeNewer: svc(func(s *corev1.ServiceSpec) { s.SessionAffinity = corev1.ServiceAffinityNone }),
			conflict:    "True/SessionAffinityConflict",
			ports:       []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				if imp.Import.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
					t.Errorf("session affinity %q, want the oldest's ClientIP", imp.Import.Spec.SessionAffinity)
				}
			},
		},
		"SessionAffinityConfig": {
			reason: "Two timeouts of ClientIP affinity: the oldest's.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeOlder: affinity(10), changeNewer: affinity(20),
			conflict: "True/SessionAffinityConfigConflict",
			ports:    []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				c := imp.Import.Spec.SessionAffinityConfig
				if c == nil || c.ClientIP == nil || ptr.Deref(c.ClientIP.TimeoutSeconds, 0) != 10 {
					t.Errorf("session affinity config %+v, want the oldest's timeout of 10 s", c)
				}
			},
		},
		"InternalTrafficPolicy": {
			reason: "Cluster against Local: the oldest's.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeOlder: svc(func(s *corev1.ServiceSpec) {
				s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
			}),
			changeNewer: svc(func(s *corev1.ServiceSpec) {
				s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}),
			conflict: "True/InternalTrafficPolicyConflict",
			ports:    []string{"tcp 42/TCP"},
		},
		"TrafficDistribution": {
			reason: "PreferClose against none: the oldest's.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeNewer: svc(func(s *corev1.ServiceSpec) {
				s.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
			}),
			conflict: "True/TrafficDistributionConflict",
			ports:    []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				if imp.Import.Spec.TrafficDistribution != nil {
					t.Errorf("traffic distribution %q, want the oldest's, none", *imp.Import.Spec.TrafficDistribution)
				}
			},
		},
		"Labels": {
			reason: "Other exported labels: the oldest's are carried (the conformance suite's conflicting labels).",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeOlder: export(func(s *mcsv1beta1.ServiceExportSpec) { s.ExportedLabels = map[string]string{"dummy-label": "true"} }),
			changeNewer: export(func(s *mcsv1beta1.ServiceExportSpec) { s.ExportedLabels = map[string]string{"dummy-label2": "true"} }),
			conflict:    "True/LabelsConflict",
			ports:       []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				if imp.Import.Labels["dummy-label"] != "true" || imp.Import.Labels["dummy-label2"] != "" {
					t.Errorf("labels %v, want the oldest's dummy-label alone", imp.Import.Labels)
				}
			},
		},
		"Annotations": {
			reason: "Other exported annotations: the oldest's are carried.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 42)},
			changeOlder: export(func(s *mcsv1beta1.ServiceExportSpec) {
				s.ExportedAnnotations = map[string]string{"dummy-annotation": "true"}
			}),
			changeNewer: export(func(s *mcsv1beta1.ServiceExportSpec) {
				s.ExportedAnnotations = map[string]string{"dummy-annotation2": "true"}
			}),
			conflict: "True/AnnotationsConflict",
			ports:    []string{"tcp 42/TCP"},
			check: func(t *testing.T, imp Import) {
				if imp.Import.Annotations["dummy-annotation"] != "true" || imp.Import.Annotations["dummy-annotation2"] != "" {
					t.Errorf("annotations %v, want the oldest's dummy-annotation alone", imp.Import.Annotations)
				}
			},
		},
		"Several": {
			reason: "Several conflicts at once: their reasons joined by commas, as MCS allows.",
			older:  []corev1.ServicePort{port("tcp", 42)}, newer: []corev1.ServicePort{port("tcp", 43)},
			changeNewer: export(func(s *mcsv1beta1.ServiceExportSpec) { s.ExportedLabels = map[string]string{"dummy-label2": "true"} }),
			conflict:    "True/PortConflict,LabelsConflict",
			ports:       []string{"tcp 42/TCP"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Each side is planned once as the member itself, so that the
			// plan says what its export's conditions become. The older
			// export was seen first.
			for _, side := range []string{"older", "newer"} {
				older := exporting("hello", "10.1.0.5", 1, tc.older...)
				newer := exporting("hello", "10.0.0.5", 2, tc.newer...)
				if tc.changeOlder != nil {
					tc.changeOlder(older)
				}
				if tc.changeNewer != nil {
					tc.changeNewer(newer)
				}
				// The other cluster is always a: the member is "local".
				local, source, other := newer, older, "a"
				if side == "older" {
					local, source = older, newer
				}
				in := input(local, source)
				in.Now = metav1.Unix(2_000, 0)
				olderID := "a"
				if side == "older" {
					olderID = "local"
				}
				in.Seen = map[SeenKey]metav1.Time{{Service: "shop/hello", Cluster: olderID}: metav1.Unix(1_000, 0)}
				p := NewPlan(in)
				if len(p.Imports) != 1 || len(p.Problems) != 0 {
					t.Fatalf("%s\n%s: want hello imported, got %d imports, problems %+v", tc.reason, side, len(p.Imports), p.Problems)
				}
				got, msg := exportConflict(p)
				if got != tc.conflict {
					t.Errorf("%s\nthe %s export's Conflict is %q (%s), want %q", tc.reason, side, got, msg, tc.conflict)
				}
				if strings.HasPrefix(tc.conflict, "True") && !strings.Contains(msg, "cluster "+other) {
					t.Errorf("%s\nthe %s export's Conflict message does not name cluster %s: %q", tc.reason, side, other, msg)
				}
				imp := p.Imports[0]
				var ports []string
				for _, pt := range imp.Import.Spec.Ports {
					ports = append(ports, fmt.Sprintf("%s %d/%s", pt.Name, pt.Port, pt.Protocol))
				}
				if diff := cmp.Diff(tc.ports, ports); diff != "" {
					t.Errorf("%s\n%s: ports, -want, +got:\n%s", tc.reason, side, diff)
				}
				if tc.check != nil {
					tc.check(t, imp)
				}
			}
		})
	}
}

// TestPlanImportCarriesService: the import carries what the oldest
// exporter's Service says (session affinity and its config, internal
// traffic policy, traffic distribution, one IP family: the mesh's) and the
// labels and annotations its ServiceExport exports, never kilomesh's own.
func TestPlanImportCarriesService(t *testing.T) {
	cases := map[string]struct {
		reason string
		spec   func(*corev1.ServiceSpec)
		export mcsv1beta1.ServiceExportSpec
		want   mcsv1beta1.ServiceImportSpec
		// labels and annotations the import must have, and must not.
		labels, annotations map[string]string
		notLabels, notAnns  []string
		// derived is the derived Service's session affinity config.
		derived *corev1.SessionAffinityConfig
		// valid is the Valid condition of the export, status/reason, and
		// what its message says.
		valid, validSays string
	}{
		"Defaults": {
			reason: "A Service as the API server defaults it: None, Cluster, no distribution.",
			spec: func(s *corev1.ServiceSpec) {
				s.SessionAffinity = corev1.ServiceAffinityNone
				s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
			},
			want: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
			},
			valid: "True/Valid",
		},
		"Everything": {
			reason: "ClientIP affinity with its timeout, a Local policy, PreferClose; the exported labels and annotations.",
			spec: func(s *corev1.ServiceSpec) {
				s.SessionAffinity = corev1.ServiceAffinityClientIP
				s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}}
				s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
				s.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
			},
			export: mcsv1beta1.ServiceExportSpec{
				ExportedLabels:      map[string]string{"dummy-label": "true", "example.com/tier": "web"},
				ExportedAnnotations: map[string]string{"dummy-annotation": "true"},
			},
			want: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityClientIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}},
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
				TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
			},
			labels:      map[string]string{"dummy-label": "true", "example.com/tier": "web"},
			annotations: map[string]string{"dummy-annotation": "true"},
			derived:     &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}},
			valid:       "True/Valid",
		},
		"KilomeshKeysNotCarried": {
			reason: "An exported label or annotation of kilomesh's own keys, or MCS's, would take over or disown the import: it is not carried, and the export says so.",
			spec:   func(s *corev1.ServiceSpec) {},
			export: mcsv1beta1.ServiceExportSpec{
				ExportedLabels: map[string]string{
					"kilomesh.io/mesh": "other", "app.kubernetes.io/managed-by": "helm", "multicluster.kubernetes.io/service-name": "x",
					"services.kilomesh.io/x": "y", "dummy-label": "true",
				},
				ExportedAnnotations: map[string]string{"kilomesh.io/exported-metadata": "forged", "multicluster.kubernetes.io/derived-service": "x", "dummy-annotation": "true"},
			},
			want: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			},
			labels:      withLabels(testSelector, map[string]string{"dummy-label": "true"}),
			notLabels:   []string{"multicluster.kubernetes.io/service-name", "services.kilomesh.io/x"},
			annotations: map[string]string{"dummy-annotation": "true"},
			notAnns:     []string{"multicluster.kubernetes.io/derived-service"},
			valid:       "True/Valid", validSays: "app.kubernetes.io/managed-by",
		},
		"BadLabelKey": {
			reason: "A label key the API server would refuse makes the export invalid, named by its field path.",
			spec:   func(s *corev1.ServiceSpec) {},
			export: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"bad key!": "x"}},
			valid:  "False/" + ReasonInvalidExport, validSays: "spec.exportedLabels[bad key!]",
		},
		"BadLabelValue": {
			reason: "A label value the API server would refuse makes the export invalid.",
			spec:   func(s *corev1.ServiceSpec) {},
			export: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"ok": strings.Repeat("v", 64)}},
			valid:  "False/" + ReasonInvalidExport, validSays: "spec.exportedLabels[ok]",
		},
		"TooManyAnnotations": {
			reason: "More exported annotations than kilomesh carries make the export invalid.",
			spec:   func(s *corev1.ServiceSpec) {},
			export: mcsv1beta1.ServiceExportSpec{ExportedAnnotations: func() map[string]string {
				m := map[string]string{}
				for i := range remote.MaxExportedEntries + 1 {
					m[fmt.Sprintf("a%d", i)] = "x"
				}
				return m
			}()},
			valid: "False/" + ReasonInvalidExport, validSays: "spec.exportedAnnotations",
		},
		"BadTimeout": {
			reason: "A session affinity timeout no Service may have, from a member's own API server, makes the export invalid.",
			spec: func(s *corev1.ServiceSpec) {
				s.SessionAffinity = corev1.ServiceAffinityClientIP
				s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](0)}}
			},
			valid: "False/" + ReasonInvalidService, validSays: "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			local := exporting("hello", "10.0.0.5", 1, port("http", 80))
			tc.spec(&local.Services[0].Spec)
			local.Exports[0].Spec = tc.export
			p := NewPlan(input(local))
			valid := exportCondition(p, string(mcsv1beta1.ServiceExportConditionValid))
			if got := string(valid.Status) + "/" + valid.Reason; got != tc.valid || !strings.Contains(valid.Message, tc.validSays) {
				t.Errorf("%s\nValid is %s (%q), want %s saying %q", tc.reason, got, valid.Message, tc.valid, tc.validSays)
			}
			if !strings.HasPrefix(tc.valid, "True") {
				if len(p.Imports) != 0 {
					t.Errorf("%s\nan invalid export is imported", tc.reason)
				}
				return
			}
			if len(p.Imports) != 1 {
				t.Fatalf("%s\nwant hello imported, got %d imports, problems %+v", tc.reason, len(p.Imports), p.Problems)
			}
			imp := p.Imports[0]
			got := imp.Import.Spec
			got.Ports = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nimport spec, -want, +got:\n%s", tc.reason, diff)
			}
			for k, v := range withLabels(testSelector, tc.labels) {
				if imp.Import.Labels[k] != v {
					t.Errorf("%s\nlabel %s=%q, want %q", tc.reason, k, imp.Import.Labels[k], v)
				}
			}
			for _, k := range tc.notLabels {
				if _, ok := imp.Import.Labels[k]; ok {
					t.Errorf("%s\nlabel %s carried", tc.reason, k)
				}
			}
			for k, v := range tc.annotations {
				if imp.Import.Annotations[k] != v {
					t.Errorf("%s\nannotation %s=%q, want %q", tc.reason, k, imp.Import.Annotations[k], v)
				}
			}
			for _, k := range tc.notAnns {
				if _, ok := imp.Import.Annotations[k]; ok {
					t.Errorf("%s\nannotation %s carried", tc.reason, k)
				}
			}
			if v := imp.Import.Annotations["kilomesh.io/exported-metadata"]; v == "forged" {
				t.Errorf("%s\nkilomesh's own annotation taken from the export", tc.reason)
			}
			if diff := cmp.Diff(tc.derived, imp.Service.Spec.SessionAffinityConfig); diff != "" {
				t.Errorf("%s\nthe derived Service's session affinity config, -want, +got:\n%s", tc.reason, diff)
			}
			if imp.Service.Spec.SessionAffinity != got.SessionAffinity {
				t.Errorf("%s\nthe derived Service's session affinity is %q, the import's %q", tc.reason, imp.Service.Spec.SessionAffinity, got.SessionAffinity)
			}
		})
	}
}
