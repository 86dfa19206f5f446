// Package policy tests the admission policies kilomesh ships as examples
// against a real kube-apiserver.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

const (
	policyFile  = "../../examples/policy/clusterproviderconfigs.yaml"
	xrdFile     = "../../package/configuration/xrd.yaml"
	providerDir = "../../package/provider/crds"
	// refused is part of the policy's message.
	refused = "may not use ClusterProviderConfig"
)

// clusterMeshCRD is the CRD Crossplane makes of the XRD: the same group,
// names, scope and schema.
func clusterMeshCRD(t *testing.T) *extv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(xrdFile)
	if err != nil {
		t.Fatal(err)
	}
	var xrd struct {
		Spec struct {
			Group    string                              `json:"group"`
			Names    extv1.CustomResourceDefinitionNames `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema extv1.JSONSchemaProps `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &xrd); err != nil {
		t.Fatal(err)
	}
	crd := &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: xrd.Spec.Names.Plural + "." + xrd.Spec.Group},
		Spec:       extv1.CustomResourceDefinitionSpec{Group: xrd.Spec.Group, Names: xrd.Spec.Names, Scope: extv1.NamespaceScoped},
	}
	for i, v := range xrd.Spec.Versions {
		s := v.Schema.OpenAPIV3Schema
		s.Type = "object"
		crd.Spec.Versions = append(crd.Spec.Versions, extv1.CustomResourceDefinitionVersion{
			Name: v.Name, Served: true, Storage: i == 0,
			Schema:       &extv1.CustomResourceValidation{OpenAPIV3Schema: &s},
			Subresources: &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
		})
	}
	return crd
}

// serviceSync is a ServiceSync of the namespace whose member is the
// tenant's own ProviderConfig and whose sources name the refs.
func serviceSync(ns, name string, sources ...map[string]any) *unstructured.Unstructured {
	u := managed("kube.kilomesh.io/v1alpha1", "ServiceSync", ns, name, map[string]any{"kind": "ProviderConfig", "name": "mine"})
	var srcs []any
	for i, ref := range sources {
		srcs = append(srcs, map[string]any{"name": fmt.Sprintf("s%d", i), "clusterID": fmt.Sprintf("s%d", i), "providerConfigRef": ref})
	}
	_ = unstructured.SetNestedSlice(u.Object, srcs, "spec", "forProvider", "sources")
	return u
}

// providerKubernetesCRD is the file of one of provider-kubernetes' CRDs, from
// its module.
func providerKubernetesCRD(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "go", "mod", "download", "-json", "github.com/crossplane-contrib/provider-kubernetes@v1.3.1").Output()
	if err != nil {
		t.Fatalf("cannot download provider-kubernetes: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(m.Dir, "package", "crds", file)
}

func apply(ctx context.Context, t *testing.T, c client.Client, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func mesh(ns, name string, refs ...string) *unstructured.Unstructured {
	var clusters []any
	for i, r := range refs {
		kind, pc, _ := strings.Cut(r, "/")
		ref := map[string]any{"name": pc}
		if kind != "" {
			ref["kind"] = kind
		}
		clusters = append(clusters, map[string]any{
			"name": fmt.Sprintf("c%d", i), "providerConfigRef": ref,
			"podCIDRs": []any{fmt.Sprintf("10.%d.0.0/16", i+1)}, "wireguardCIDR": fmt.Sprintf("10.%d.0.0/16", 100+i),
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kilomesh.io/v1alpha1", "kind": "ClusterMesh",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"clusters": clusters},
	}}
	return u
}

func managed(apiVersion, kind, ns, name string, ref map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"forProvider": map[string]any{}}
	if kind == "Object" {
		spec["forProvider"] = map[string]any{"manifest": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "default"}}}
	}
	if kind == "PeerSet" {
		spec["forProvider"] = map[string]any{"selector": map[string]any{"app.kubernetes.io/managed-by": "kilomesh"}, "peers": []any{}}
	}
	if kind == "ServiceSync" {
		spec["forProvider"] = map[string]any{
			"selector": map[string]any{"kilomesh.io/mesh": "m"}, "namespaces": []any{"shop"},
			"clusterID": "a", "family": "IPv4",
		}
	}
	if ref != nil {
		spec["providerConfigRef"] = ref
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}

func TestClusterProviderConfigPolicy(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: build the API servers with `test/tools/build.sh etcd kube` (make unit does)")
	}
	env := &envtest.Environment{
		CRDs:                  []*extv1.CustomResourceDefinition{clusterMeshCRD(t)},
		CRDDirectoryPaths:     []string{providerDir, providerKubernetesCRD(t, "kubernetes.m.crossplane.io_objects.yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"crossplane-system", "network", "platform", "tenant"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	apply(ctx, t, c, policyFile)

	// The API server loads a new policy in the background: wait until it
	// refuses what it must refuse, before the cases.
	i := 0
	wait.Eventually(ctx, t, "the policy enforced", time.Minute, 200*time.Millisecond, func() (bool, error) {
		err := c.Create(ctx, mesh("tenant", fmt.Sprintf("probe-%d", i), "ClusterProviderConfig/hub", "/b"))
		i++
		if err == nil {
			return false, errors.New("a probe was allowed")
		}
		return strings.Contains(err.Error(), refused), err
	})

	pcRef := func(kind, name string) map[string]any { return map[string]any{"kind": kind, "name": name} }
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		denied bool
	}{
		"MeshGranted": {
			reason: "A namespace the ConfigMap lists for a ClusterProviderConfig may name it.",
			obj:    mesh("network", "granted", "ClusterProviderConfig/hub", "ProviderConfig/b"),
		},
		"MeshGrantedSecondNamespace": {
			reason: "The list is comma-separated; spaces around names do not matter.",
			obj:    mesh("platform", "granted", "ClusterProviderConfig/hub", "/b"),
		},
		"MeshNotGranted": {
			reason: "A tenant namespace the ConfigMap does not list may not name the hub's ClusterProviderConfig.",
			obj:    mesh("tenant", "hijack", "/a", "ClusterProviderConfig/hub"),
			denied: true,
		},
		"MeshUnknownClusterProviderConfig": {
			reason: "A ClusterProviderConfig the ConfigMap does not mention may be named by no namespace.",
			obj:    mesh("network", "unknown", "ClusterProviderConfig/prod", "/b"),
			denied: true,
		},
		"MeshWildcard": {
			reason: "\"*\" grants every namespace.",
			obj:    mesh("tenant", "dev", "ClusterProviderConfig/shared-dev", "/b"),
		},
		"MeshNamespacedOnly": {
			reason: "Namespaced ProviderConfigs, the default kind, are never refused.",
			obj:    mesh("tenant", "own", "/a", "/b"),
		},
		"PeerSetNotGranted": {
			reason: "A hand-made PeerSet is a way to write Peers with a ClusterProviderConfig too: refused the same way.",
			obj:    managed("kube.kilomesh.io/v1alpha1", "PeerSet", "tenant", "mine", pcRef("ClusterProviderConfig", "hub")),
			denied: true,
		},
		"NodeInventoryGranted": {
			reason: "A NodeInventory in a granted namespace may name the ClusterProviderConfig.",
			obj:    managed("kube.kilomesh.io/v1alpha1", "NodeInventory", "network", "inv", pcRef("ClusterProviderConfig", "hub")),
		},
		"ServiceSyncSourceNotGranted": {
			reason: "A ServiceSync's source is read with its config's credentials: a ClusterProviderConfig the namespace may not name as its member, it may not name as a source.",
			obj:    serviceSync("tenant", "borrow", pcRef("ProviderConfig", "other"), pcRef("ClusterProviderConfig", "hub")),
			denied: true,
		},
		"ServiceSyncSourceGranted": {
			reason: "A granted namespace may name the ClusterProviderConfig as a source.",
			obj:    serviceSync("network", "granted", pcRef("ClusterProviderConfig", "hub")),
		},
		"ServiceSyncNamespacedSources": {
			reason: "Namespaced ProviderConfigs as sources are never refused.",
			obj:    serviceSync("tenant", "own", pcRef("ProviderConfig", "b"), pcRef("ProviderConfig", "c")),
		},
		"ObjectDefaultsToClusterProviderConfig": {
			reason: "A provider-kubernetes Object without a providerConfigRef gets ClusterProviderConfig \"default\", which nobody was granted.",
			obj:    managed("kubernetes.m.crossplane.io/v1alpha1", "Object", "tenant", "obj", nil),
			denied: true,
		},
		"ObjectNamespaced": {
			reason: "An Object with a namespaced ProviderConfig is allowed.",
			obj:    managed("kubernetes.m.crossplane.io/v1alpha1", "Object", "tenant", "obj2", pcRef("ProviderConfig", "mine")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.Create(ctx, tc.obj)
			switch {
			case tc.denied && (err == nil || !strings.Contains(err.Error(), refused)):
				t.Errorf("%s\nCreate(...): want refused with %q, got %v", tc.reason, refused, err)
			case !tc.denied && err != nil:
				t.Errorf("%s\nCreate(...): want allowed, got %v", tc.reason, err)
			}
		})
	}

	t.Run("RevokedGrantBlocksSpecNotMetadata", func(t *testing.T) {
		reason := "Once a grant is revoked, spec changes are refused, but metadata changes (finalizers on the way to deletion) still pass."
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		if err := c.Get(ctx, client.ObjectKey{Namespace: "crossplane-system", Name: "kilomesh-clusterproviderconfigs"}, cm); err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(cm.Object, "data", "hub")
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKey{Namespace: "network", Name: "granted"}
		update := func(change func(*unstructured.Unstructured)) error {
			m := &unstructured.Unstructured{}
			m.SetAPIVersion("kilomesh.io/v1alpha1")
			m.SetKind("ClusterMesh")
			if err := c.Get(ctx, key, m); err != nil {
				return err
			}
			change(m)
			return c.Update(ctx, m)
		}
		i := 0
		wait.Eventually(ctx, t, reason+"\nthe revoked grant enforced", time.Minute, 200*time.Millisecond, func() (bool, error) {
			g := []string{"Node", "Auto"}[i%2]
			i++
			err := update(func(m *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(m.Object, g, "spec", "granularity")
			})
			if err != nil && strings.Contains(err.Error(), refused) {
				return true, nil
			}
			if err != nil && !kerrors.IsConflict(err) {
				t.Fatalf("%s\nUpdate(spec): %v", reason, err)
			}
			if err == nil {
				return false, fmt.Errorf("granularity %s was allowed", g)
			}
			return false, err
		})
		if err := update(func(m *unstructured.Unstructured) { m.SetFinalizers([]string{"example.org/keep"}) }); err != nil {
			t.Errorf("%s\nUpdate(finalizers): %v", reason, err)
		}
	})
}
