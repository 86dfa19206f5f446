//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/test/stack/meshpods"
)

const (
	// svcTenant is the namespace of the management cluster of the tenant
	// that attacks the mesh's Services, with ProviderConfigs of its own
	// for every member, made by docs/install.md's block: the same
	// identity in each member as the victim's (two tenants behind one
	// identity).
	svcTenant = "hostile-services"
	// svcTenantApps is the member namespace the tenant shares.
	svcTenantApps = "hostile-apps"
	// svcTenantHub is a ClusterProviderConfig an administrator made with
	// the identity of provider-kilomesh, granted to no tenant.
	svcTenantHub = "e2e-hub"
	// svcPortClash is exported by svcSecond on the winner's port number
	// under another name.
	svcPortClash = "hello-clash"
	// svcPlanted is a Service whose derived Service a user of the
	// importer plants before it is exported.
	svcPlanted = "hello-planted"
)

// testServiceTenant has a tenant of another namespace of the management
// cluster, and users of the members, attack the mesh's Services while
// they are shared, with provider-kilomesh's real identity in every member:
//
//   - a ServiceSync by hand whose source is an administrator's
//     ClusterProviderConfig carrying provider-kilomesh's identity:
//     provider-kilomesh refuses it for a member of a namespaced
//     ProviderConfig (examples/policy's admission policy, which refuses
//     it at the API where installed, is tested in test/policy); a source
//     the tenant may use is recorded as in use (a ProviderConfigUsage), so
//     its config cannot go while it is read;
//   - a ServiceSync by hand on the member the victim imports into, sharing
//     a namespace of its own: the watch of the victim's namespace in that
//     member, which both reach with one identity, must not stop (the
//     member's audit log shows no new list of it by provider-kilomesh);
//   - a ServiceSync by hand on the exporter, sharing the victim's
//     namespace: it may read the exports, but never writes their
//     conditions, which the victim's mesh wrote first;
//   - a user of another member exports a Service of the victim's name on
//     the victim's port number under another name: that port is dropped
//     and reported on its export (PortConflict), and the import keeps the
//     oldest export's port;
//   - a user of the importer plants a Service under the name of a derived
//     Service, with the mesh's labels and a selector, before the Service
//     is exported: it is not adopted, the ServiceSync reports the name
//     taken (ImportNameConflict) and the planted Service stays as it was.
//
// None of the victim's imports, derived Services or EndpointSlices may
// change hands, and no condition of its exports may be written by the
// tenant. Everything made is removed at the end.
func testServiceTenant(ctx context.Context, t *testing.T, mode string, victim meshRef) {
	ns := meshpods.Namespace
	start := time.Now()
	if err := script(ctx, "providerconfigs.sh", append([]string{svcTenant}, meshMembers...)...); err != nil {
		t.Fatal(err)
	}
	// The tenant's namespace in every member, granted to kilomesh as
	// docs/services.md tells a member's admin to.
	for _, c := range meshMembers {
		createUndone(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: svcTenantApps}})
		createUndone(ctx, t, c, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: svcRoleBinding, Namespace: svcTenantApps},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kilomesh-member-services"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kilomesh", Namespace: "kube-system"}},
		})
	}
	before := victimObjects(ctx, t, victim, ns)
	t.Cleanup(func() {
		all := &unstructured.Unstructured{}
		all.SetGroupVersionKind(kubev1alpha1.ServiceSyncGroupVersionKind)
		if err := mgmt.DeleteAllOf(ctx, all, client.InNamespace(svcTenant)); err != nil {
			t.Error(err)
		}
		waitFor(ctx, t, "the tenant's ServiceSyncs to go", func() error {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(kubev1alpha1.ServiceSyncGroupVersionKind)
			if err := mgmt.List(ctx, l, client.InNamespace(svcTenant)); err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%d left", len(l.Items))
			}
			return nil
		})
	})
	sync := func(name, member string, namespaces []string, sources ...map[string]any) *unstructured.Unstructured {
		t.Helper()
		u := tenantSync(name, member, namespaces, sources...)
		if err := mgmt.Create(ctx, u.DeepCopy()); err != nil {
			t.Fatalf("cannot create ServiceSync %s/%s: %v", svcTenant, name, err)
		}
		return u
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// The identity of provider-kilomesh, in a ClusterProviderConfig of an
	// administrator's.
	hub := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ClusterProviderConfig",
		"metadata": map[string]any{"name": svcTenantHub},
		"spec":     map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
	}}
	if err := mgmt.Create(ctx, hub); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Delete(ctx, hub) })
	hubSource := map[string]any{"name": "hub", "clusterID": "hub", "providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": svcTenantHub}}

	// 1. provider-kilomesh refuses it (examples/policy's admission
	// policy, which refuses it at the API, is tested in test/policy).
	borrow := sync("borrow", "cluster-b", []string{ns}, hubSource)
	if err := retryFor(ctx, func() error {
		if err := mgmt.Get(ctx, client.ObjectKeyFromObject(borrow), borrow); err != nil {
			return err
		}
		status, _, msg := conditionOf(borrow, "Synced")
		if status == "False" && strings.Contains(msg, "sources[0].providerConfigRef") {
			return nil
		}
		return fmt.Errorf("conditions %v", conditions(borrow))
	}); err != nil {
		fail("the ServiceSync whose source lends provider-kilomesh's identity is not refused: %v", err)
	}

	// 3. A sync of the tenant's own namespace in the importer; and 1.,
	// its source recorded as in use.
	watchStart := time.Now()
	own := sync("own", svcImporter, []string{svcTenantApps}, tenantSource("cluster-c"))
	waitFor(ctx, t, "the tenant's ServiceSync "+own.GetName()+" to read and write its member", func() error { return syncSynced(ctx, own) })
	if err := sourceInUse(ctx, own, "cluster-c"); err != nil {
		fail("1: %v", err)
	}

	// 5. A user of the second exporter takes the victim's port number
	// under another name.
	createUndone(ctx, t, svcExporter, helloService(ns, svcPortClash, 80))
	createUndone(ctx, t, svcExporter, mcsNamed("ServiceExport", ns, svcPortClash))
	waitFor(ctx, t, fmt.Sprintf("ServiceImport %s/%s in %s", ns, svcPortClash, svcImporter), func() error {
		_, err := clusterSetIP(ctx, svcImporter, ns, svcPortClash)
		return err
	})
	clash := helloService(ns, svcPortClash, 80)
	clash.Spec.Ports[0].Name = "web"
	createUndone(ctx, t, svcSecond, clash)
	createUndone(ctx, t, svcSecond, mcsNamed("ServiceExport", ns, svcPortClash))

	// 12. A user of the importer plants the derived Service of a Service
	// about to be exported, with the victim's labels and a selector of
	// its own pods.
	planted := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubev1alpha1.DerivedName([2]string{victim.ns, victim.name}, ns, svcPlanted), Namespace: ns,
			Labels: map[string]string{meshv1alpha1.LabelManagedBy: meshv1alpha1.ManagedByValue, meshv1alpha1.LabelMeshNamespace: meshv1alpha1.LabelValue(victim.ns), meshv1alpha1.LabelMesh: victim.name},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svcName},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	createUndone(ctx, t, svcImporter, planted)
	createUndone(ctx, t, svcExporter, helloService(ns, svcPlanted, 80))
	createUndone(ctx, t, svcExporter, mcsNamed("ServiceExport", ns, svcPlanted))

	// What the attacks met.
	waitFor(ctx, t, fmt.Sprintf("ServiceExport %s/%s of %s to report the port conflict", ns, svcPortClash, svcSecond), func() error {
		return exportConditions(ctx, svcSecond, ns, svcPortClash, map[string]string{"Conflict": "True/PortConflict"})
	})
	waitFor(ctx, t, fmt.Sprintf("ServiceImport %s/%s in %s on %s's port http/80 alone", ns, svcPortClash, svcImporter, svcExporter), func() error {
		return importPorts(ctx, svcImporter, ns, svcPortClash, "http/80")
	})
	waitFor(ctx, t, fmt.Sprintf("ServiceImport %s/%s with a ClusterSet IP in %s", ns, svcPlanted, svcSecond), func() error {
		_, err := clusterSetIP(ctx, svcSecond, ns, svcPlanted)
		return err
	})
	waitFor(ctx, t, fmt.Sprintf("the ServiceSync of %s to report %s/%s taken", svcImporter, ns, svcPlanted), func() error {
		return serviceProblem(ctx, victim, ns+"/"+svcPlanted, kubev1alpha1.ReasonImportNameConflict)
	})
	// 4. A sync of the victim's namespace in the exporter, once the
	// victim's mesh imports every export there (an exporter imports its
	// own): of two meshes sharing a namespace, the first to import a
	// Service holds its import.
	for _, name := range []string{svcPortClash, svcPlanted} {
		waitFor(ctx, t, fmt.Sprintf("ServiceImport %s/%s in %s, and the conditions of its export there", ns, name, svcExporter), func() error {
			if _, err := clusterSetIP(ctx, svcExporter, ns, name); err != nil {
				return err
			}
			return exportConditions(ctx, svcExporter, ns, name, map[string]string{"Ready": "True/Exported"})
		})
	}
	shadow := sync("shadow", svcExporter, []string{ns}, tenantSource("cluster-c"))
	waitFor(ctx, t, "the tenant's ServiceSync "+shadow.GetName()+" to read and write the exporter", func() error { return syncSynced(ctx, shadow) })

	// The syncs of the tenant have reconciled since they were made, and
	// the victim's since its exports changed: a feed stopped by one of
	// them would have been listed again by now.
	if err := unchangedPlanted(ctx, planted); err != nil {
		fail("12: %v", err)
	}
	si := mcsNamed("ServiceImport", ns, svcPlanted)
	if err := kube[svcImporter].Get(ctx, client.ObjectKeyFromObject(si), si); !kerrors.IsNotFound(err) {
		fail("12: %s holds ServiceImport %s/%s behind a planted Service (%v)", svcImporter, ns, svcPlanted, err)
	}
	// The watches of the victim's namespace in the importer started with
	// a list each: the audit log that cannot show them shows nothing.
	all, err := auditedLists(svcImporter, ns, time.Time{})
	lists, _ := auditedLists(svcImporter, ns, watchStart)
	started := len(all) - len(lists)
	if err == nil && started == 0 {
		err = fmt.Errorf("the audit log of %s shows no list of %s by %s before the tenant came, not even the watches' first", svcImporter, ns, memberIdentity)
	}
	if err != nil {
		fail("3: %v", err)
	} else if len(lists) > 0 {
		fail("3: provider-kilomesh listed the victim's namespace %s in %s again while the tenant's ServiceSync shared its watch: %s", ns, svcImporter, strings.Join(lists, "; "))
	}
	problems = append(problems, victimObjectsKept(ctx, ns, before)...)
	problems = append(problems, tenantManagers(ctx, ns)...)
	for _, p := range problems {
		t.Error(p)
	}
	report.notef("%s: Services across the mesh, a hostile tenant and users: a ClusterProviderConfig with the provider's identity as a source refused by provider-kilomesh, a source recorded as in use, a ServiceSync sharing the importer's watch (%d lists of %s there before it, %d since), one sharing the exporter's namespace (no condition written), a port under another name dropped (PortConflict), a planted derived Service left alone (ImportNameConflict); %d objects of the victim checked, %d problems, %.0fs",
		mode, started, ns, len(lists), len(before), len(problems), time.Since(start).Seconds())
}

// tenantSync is a ServiceSync the tenant makes by hand for a mesh of its
// own, through its ProviderConfig of cluster, whose pod network (the
// stack's plan) it declares.
func tenantSync(name, cluster string, namespaces []string, sources ...map[string]any) *unstructured.Unstructured {
	nss := make([]any, len(namespaces))
	for j, n := range namespaces {
		nss[j] = n
	}
	srcs := make([]any, len(sources))
	for j, s := range sources {
		srcs[j] = s
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kubev1alpha1.ServiceSyncGroupVersionKind.GroupVersion().String(), "kind": kubev1alpha1.ServiceSyncKind,
		"metadata": map[string]any{"name": name, "namespace": svcTenant},
		"spec": map[string]any{
			"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": cluster},
			"forProvider": map[string]any{
				"selector":   map[string]any{meshv1alpha1.LabelMesh: "steal"},
				"clusterID":  "tenant-" + cluster,
				"namespaces": nss,
				"networks":   []any{string(member(cluster, cluster).PodCIDRs[0])},
				"family":     "IPv4",
				"sources":    srcs,
			},
		},
	}}
}

// tenantSource is a source of a tenant's ServiceSync: cluster, through the
// tenant's ProviderConfig of it.
func tenantSource(cluster string) map[string]any {
	return map[string]any{
		"name": cluster, "clusterID": "tenant-" + cluster,
		"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": cluster},
		"networks":          []any{string(member(cluster, cluster).PodCIDRs[0])},
	}
}

// syncSynced fails unless the ServiceSync is Synced=True: it reads and
// writes its member.
func syncSynced(ctx context.Context, u *unstructured.Unstructured) error {
	if err := mgmt.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return err
	}
	if status, _, _ := conditionOf(u, "Synced"); status != "True" {
		return fmt.Errorf("conditions %v", conditions(u))
	}
	return nil
}

// sourceInUse fails unless a ProviderConfigUsage of the ServiceSync's
// namespace records that it uses the ProviderConfig of its source.
func sourceInUse(ctx context.Context, sync *unstructured.Unstructured, config string) error {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	l.SetKind("ProviderConfigUsageList")
	if err := mgmt.List(ctx, l, client.InNamespace(sync.GetNamespace())); err != nil {
		return err
	}
	var seen []string
	for _, u := range l.Items {
		kind, _, _ := unstructured.NestedString(u.Object, "providerConfigRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "providerConfigRef", "name")
		user, _, _ := unstructured.NestedString(u.Object, "resourceRef", "name")
		seen = append(seen, fmt.Sprintf("%s/%s by %s", kind, name, user))
		if kind == "ProviderConfig" && name == config && user == sync.GetName() {
			return nil
		}
	}
	return fmt.Errorf("no ProviderConfigUsage records ServiceSync %s/%s using ProviderConfig %s; usages: %v", sync.GetNamespace(), sync.GetName(), config, seen)
}

// importPorts fails unless member c's ServiceImport ns/name has exactly
// the ports, as name/port.
func importPorts(ctx context.Context, c, ns, name string, want ...string) error {
	si := mcsNamed("ServiceImport", ns, name)
	if err := kube[c].Get(ctx, client.ObjectKeyFromObject(si), si); err != nil {
		return err
	}
	ports, _, _ := unstructured.NestedSlice(si.Object, "spec", "ports")
	var got []string
	for _, p := range ports {
		m, _ := p.(map[string]any)
		got = append(got, fmt.Sprintf("%v/%v", m["name"], m["port"]))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("spec.ports %v, want %v", got, want)
	}
	return nil
}

// unchangedPlanted fails unless the planted Service is as its user made
// it: not written since, its selector kept.
func unchangedPlanted(ctx context.Context, planted *corev1.Service) error {
	now := &corev1.Service{}
	if err := kube[svcImporter].Get(ctx, client.ObjectKeyFromObject(planted), now); err != nil {
		return err
	}
	if now.ResourceVersion != planted.ResourceVersion || now.Spec.Selector["app"] != svcName {
		return fmt.Errorf("the planted Service %s/%s in %s was written: resourceVersion %s -> %s, selector %v, managers %v", planted.Namespace, planted.Name, svcImporter, planted.ResourceVersion, now.ResourceVersion, now.Spec.Selector, managersOf(now.ManagedFields))
	}
	return nil
}

// victimObject is what testServiceTenant keeps of one object of the
// victim's mesh in a member.
type victimObject struct {
	labels map[string]string
	uid    string
}

// victimObjects lists the objects the victim's mesh holds in every
// member's namespace ns: ServiceImports, derived Services and
// EndpointSlices, by member, kind and name.
func victimObjects(ctx context.Context, t *testing.T, victim meshRef, ns string) map[string]victimObject {
	t.Helper()
	out, err := memberObjects(ctx, ns, client.MatchingLabels{meshv1alpha1.LabelMeshNamespace: meshv1alpha1.LabelValue(victim.ns), meshv1alpha1.LabelMesh: victim.name})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// memberObjects lists the ServiceImports, Services and EndpointSlices of
// namespace ns in every member, by member, kind and name.
func memberObjects(ctx context.Context, ns string, opts ...client.ListOption) (map[string]victimObject, error) {
	out := map[string]victimObject{}
	for _, c := range meshMembers {
		for _, gvk := range []schema.GroupVersionKind{mcsGV.WithKind("ServiceImportList"), corev1.SchemeGroupVersion.WithKind("ServiceList"), discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList")} {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk)
			if err := kube[c].List(ctx, l, append(opts, client.InNamespace(ns))...); err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			for _, u := range l.Items {
				out[c+" "+u.GetKind()+" "+u.GetName()] = victimObject{labels: u.GetLabels(), uid: string(u.GetUID())}
			}
		}
	}
	return out, nil
}

// victimObjectsKept says which objects of before are gone, were replaced,
// or carry other labels now. The step's own exports add objects, which
// are not counted.
func victimObjectsKept(ctx context.Context, ns string, before map[string]victimObject) []string {
	now, err := memberObjects(ctx, ns)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for key, b := range before {
		n, ok := now[key]
		switch {
		case !ok:
			problems = append(problems, key+" of the victim's mesh is gone")
		case n.uid != b.uid:
			problems = append(problems, key+" of the victim's mesh was replaced")
		case n.labels[meshv1alpha1.LabelMeshNamespace] != b.labels[meshv1alpha1.LabelMeshNamespace] || n.labels[meshv1alpha1.LabelMesh] != b.labels[meshv1alpha1.LabelMesh]:
			problems = append(problems, fmt.Sprintf("%s of the victim's mesh now carries the labels %v", key, n.labels))
		}
	}
	return problems
}

// tenantManagers says which ServiceExports of namespace ns, in any member,
// carry fields of a field manager of the tenant's namespace: conditions
// it wrote.
func tenantManagers(ctx context.Context, ns string) []string {
	var problems []string
	prefix := "kilomesh-services/" + svcTenant + "/"
	for _, c := range meshMembers {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(mcsGV.WithKind("ServiceExportList"))
		if err := kube[c].List(ctx, l, client.InNamespace(ns)); err != nil {
			return append(problems, fmt.Sprintf("%s: %v", c, err))
		}
		for _, e := range l.Items {
			for _, m := range e.GetManagedFields() {
				if strings.HasPrefix(m.Manager, prefix) {
					problems = append(problems, fmt.Sprintf("4: the tenant's %s wrote the conditions of ServiceExport %s/%s in %s", m.Manager, ns, e.GetName(), c))
				}
			}
		}
	}
	return problems
}

func managersOf(fields []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, f.Manager+"/"+string(f.Operation)+"/"+f.Subresource)
	}
	return out
}

// auditedLists returns the lists of Services, EndpointSlices and MCS
// objects of namespace ns that provider-kilomesh's identity made in member
// c since since, from the member's audit log (test/stack/up.sh audits
// them): a watch that runs on is never listed again. A list is a list
// request or a streaming list (a watch with sendInitialEvents=true, what
// client-go's reflectors send first); a watch resumed from a resource
// version is not.
func auditedLists(c, ns string, since time.Time) ([]string, error) {
	events, err := auditLog(c)
	var out []string
	for _, e := range events {
		list := e.Verb == "list" && e.Stage == "ResponseComplete"
		streamed := e.Verb == "watch" && e.Stage == "ResponseStarted" && strings.Contains(e.URI, "sendInitialEvents=true")
		if (list || streamed) && e.User.Username == memberIdentity && e.ObjectRef.Namespace == ns && !e.Received.Before(since) {
			out = append(out, fmt.Sprintf("%s %s %s", e.Received.Format(time.RFC3339Nano), e.Verb, e.ObjectRef.Resource))
		}
	}
	return out, err
}

// memberIdentity is the user provider-kilomesh is in every member
// (examples/member-rbac.yaml).
const memberIdentity = "system:serviceaccount:kube-system:kilomesh"
