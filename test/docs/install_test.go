package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/testing/yamldocs"
)

// The pages whose shell blocks users run to install, upgrade and uninstall
// kilomesh: the end-to-end tests run every one of them as it is.
var runPages = []string{"docs/install.md", "docs/upgrade.md"}

var marker = regexp.MustCompile(`^<!-- stack: ([a-z0-9-]+) -->$`)

// TestStackRunsTheDocs checks that every shell block of the install and
// upgrade pages is marked <!-- stack: NAME --> on the line before it, that
// each name is unique, and that test/stack or test/e2e runs each block by
// that name (test/stack/doc.sh, stack_doc_run).
func TestStackRunsTheDocs(t *testing.T) {
	var runners strings.Builder
	for _, dir := range []string{"test/stack", "test/e2e"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".sh") || strings.HasSuffix(f, ".go") {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				runners.Write(b)
			}
		}
	}
	for _, page := range runPages {
		lines := strings.Split(read(t, page), "\n")
		bs, _ := blocks(page, read(t, page))
		names := map[string]bool{}
		for _, b := range bs {
			if b.lang != "sh" {
				continue
			}
			prev := ""
			if b.line >= 2 {
				prev = lines[b.line-2]
			}
			m := marker.FindStringSubmatch(prev)
			if m == nil {
				t.Errorf("%s: the shell block is not marked <!-- stack: NAME -->, so no test runs it", b)
				continue
			}
			name := m[1]
			if names[name] {
				t.Errorf("%s: a second block is marked %q", b, name)
			}
			names[name] = true
			run := regexp.MustCompile(regexp.QuoteMeta(page) + `"?,?\s+"?` + regexp.QuoteMeta(name) + `\b`)
			if !run.MatchString(runners.String()) {
				t.Errorf("%s: no script of test/stack or test/e2e runs the block %q of %s", b, name, page)
			}
		}
		if len(names) == 0 {
			t.Errorf("%s has no shell block the tests run", page)
		}
	}
}

// An example is one YAML document of examples/.
type example struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Clusters []meshv1alpha1.Cluster `json:"clusters"`
		// ProviderConfig, ClusterProviderConfig
		Credentials struct {
			Source    string `json:"source"`
			SecretRef struct {
				Namespace, Name, Key string
			} `json:"secretRef"`
		} `json:"credentials"`
		// NodeInventory, PeerSet
		ProviderConfigRef meshv1alpha1.ProviderConfigReference `json:"providerConfigRef"`
		ForProvider       struct {
			OwnedPeerLabels map[string]string `json:"ownedPeerLabels"`
			Selector        map[string]string `json:"selector"`
			Peers           []struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"peers"`
		} `json:"forProvider"`
		// DeploymentRuntimeConfig
		ServiceAccountTemplate struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"serviceAccountTemplate"`
		// ImageConfig
		Runtime struct {
			ConfigRef struct{ Name string } `json:"configRef"`
		} `json:"runtime"`
	} `json:"spec"`
	StringData map[string]string     `json:"stringData"`
	RoleRef    struct{ Name string } `json:"roleRef"`
	Subjects   []struct {
		Kind, Name, Namespace string
	} `json:"subjects"`
}

func (e example) key() string {
	return e.Kind + " " + strings.TrimPrefix(e.Metadata.Namespace+"/", "/") + e.Metadata.Name
}

// readExamples reads every document of the examples that are applied
// together: examples/*.yaml and examples/provider/*.yaml.
func readExamples(t *testing.T) map[string]example {
	t.Helper()
	out := map[string]example{}
	for _, pattern := range []string{"examples/*.yaml", "examples/provider/*.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("no examples %s: %v", pattern, err)
		}
		for _, f := range files {
			docs, err := yamldocs.Split([]byte(read(t, strings.TrimPrefix(f, root+"/"))))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for i, doc := range docs {
				e := example{}
				if err := yaml.Unmarshal(doc, &e); err != nil {
					t.Fatalf("%s, document %d: %v", f, i+1, err)
				}
				if e.Kind == "" {
					continue
				}
				if _, dup := out[e.key()]; dup {
					t.Errorf("%s: a second %s", f, e.key())
				}
				out[e.key()] = e
			}
		}
	}
	return out
}

// TestExamplesFitTogether checks that the examples can be applied together
// as they are: the namespace of examples/mesh.yaml holds the
// ProviderConfigs it names and the Secrets they name; the NodeInventory and
// PeerSet examples carry the labels the function gives that mesh's Peers;
// the ServiceAccounts the RBAC examples bind are those the runtime configs
// name.
func TestExamplesFitTogether(t *testing.T) {
	ex := readExamples(t)
	var m example
	for _, e := range ex {
		if e.Kind == meshv1alpha1.Kind {
			m = e
		}
	}
	if m.Kind == "" {
		t.Fatal("no ClusterMesh in examples/")
	}
	ns := m.Metadata.Namespace
	for k, e := range ex {
		// member-rbac.yaml's identity lives in kube-system of every member.
		if e.Metadata.Namespace != "" && e.Metadata.Namespace != ns && e.Metadata.Namespace != "kube-system" {
			t.Errorf("%s is in namespace %s, not in the mesh's namespace %s", k, e.Metadata.Namespace, ns)
		}
	}

	for i, c := range m.Spec.Clusters {
		pc := c.ProviderConfigRef
		key := pc.Kind + " " + ns + "/" + pc.Name
		if pc.Kind == "ClusterProviderConfig" {
			key = pc.Kind + " " + pc.Name
		}
		config, ok := ex[key]
		if !ok {
			t.Errorf("spec.clusters[%d] (%s) names %s, which no example holds", i, c.Name, key)
			continue
		}
		ref := config.Spec.Credentials.SecretRef
		secret, ok := ex["Secret "+ref.Namespace+"/"+ref.Name]
		if !ok {
			t.Errorf("%s names the Secret %s/%s, which no example holds", key, ref.Namespace, ref.Name)
			continue
		}
		if _, ok := secret.StringData[ref.Key]; !ok {
			t.Errorf("the Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)
		}
	}

	owned := mesh.OwnedLabels(ns, m.Metadata.Name)
	members := map[string]bool{}
	for _, c := range m.Spec.Clusters {
		members[c.Name] = true
	}
	for k, e := range ex {
		switch e.Kind {
		case "NodeInventory":
			if diff := cmp.Diff(owned, e.Spec.ForProvider.OwnedPeerLabels); diff != "" {
				t.Errorf("%s: ownedPeerLabels are not the labels of the mesh's Peers (-function +example):\n%s", k, diff)
			}
		case "PeerSet":
			if diff := cmp.Diff(owned, e.Spec.ForProvider.Selector); diff != "" {
				t.Errorf("%s: the selector is not the labels of the mesh's Peers (-function +example):\n%s", k, diff)
			}
			for _, p := range e.Spec.ForProvider.Peers {
				src := p.Labels[meshv1alpha1.LabelSourceCluster]
				if len(p.Labels) != 1 || !members[src] || !strings.HasPrefix(p.Name, meshv1alpha1.LabelValue(m.Metadata.Name)+"-"+src+"-") {
					t.Errorf("%s: Peer %s with labels %v is not one the function writes for a member of the mesh", k, p.Name, p.Labels)
				}
			}
		default:
			continue
		}
		if _, ok := ex["ProviderConfig "+ns+"/"+e.Spec.ProviderConfigRef.Name]; !ok && e.Spec.ProviderConfigRef.Kind == "ProviderConfig" {
			t.Errorf("%s names the ProviderConfig %s, which no example holds", k, e.Spec.ProviderConfigRef.Name)
		}
	}

	// Every ServiceAccount bound in crossplane-system is named by a runtime
	// config that an ImageConfig gives to a package.
	named := map[string]bool{}
	for _, e := range ex {
		if e.Kind == "ImageConfig" {
			if drc, ok := ex["DeploymentRuntimeConfig "+e.Spec.Runtime.ConfigRef.Name]; ok {
				named[drc.Spec.ServiceAccountTemplate.Metadata.Name] = true
			} else {
				t.Errorf("ImageConfig %s names the runtime config %s, which no example holds", e.Metadata.Name, e.Spec.Runtime.ConfigRef.Name)
			}
		}
	}
	for k, e := range ex {
		if e.Kind != "ClusterRoleBinding" {
			continue
		}
		if _, ok := ex["ClusterRole "+e.RoleRef.Name]; !ok {
			t.Errorf("%s binds the ClusterRole %s, which no example holds", k, e.RoleRef.Name)
		}
		for _, s := range e.Subjects {
			if s.Namespace == "crossplane-system" && !named[s.Name] {
				t.Errorf("%s binds crossplane-system/%s, a ServiceAccount no runtime config names", k, s.Name)
			}
		}
	}
}

// TestInstallShowsTheMesh checks that the mesh docs/install.md shows is
// examples/mesh.yaml, which its next block applies.
func TestInstallShowsTheMesh(t *testing.T) {
	want := read(t, "examples/mesh.yaml")
	bs, _ := blocks("docs/install.md", read(t, "docs/install.md"))
	shown := 0
	for _, b := range bs {
		if b.lang == "yaml" && strings.Contains(b.body, "kind: ClusterMesh") {
			shown++
			if diff := cmp.Diff(want, b.body); diff != "" {
				t.Errorf("%s shows another mesh than examples/mesh.yaml (-file +page):\n%s", b, diff)
			}
		}
	}
	if shown != 1 {
		t.Errorf("docs/install.md shows %d ClusterMeshes, want 1 (examples/mesh.yaml)", shown)
	}
	if !strings.Contains(read(t, "docs/install.md"), "kubectl apply -f examples/mesh.yaml") {
		t.Error("docs/install.md does not apply examples/mesh.yaml")
	}
}
