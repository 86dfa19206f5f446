package argocd

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const (
	applicationYAML    = "../../examples/argocd/application.yaml"
	applicationSetYAML = "../../examples/argocd/applicationset.yaml"
)

// appSpec is the part of an Application spec docs/gitops.md explains.
type appSpec struct {
	SyncPolicy struct {
		Automated   map[string]any `json:"automated"`
		SyncOptions []string       `json:"syncOptions"`
	} `json:"syncPolicy"`
	IgnoreDifferences []struct {
		Group                 string   `json:"group"`
		Kind                  string   `json:"kind"`
		JQPathExpressions     []string `json:"jqPathExpressions"`
		ManagedFieldsManagers []string `json:"managedFieldsManagers"`
	} `json:"ignoreDifferences"`
}

type meta struct {
	Annotations map[string]string `json:"annotations"`
}

// TestApplications checks that the Application and the ApplicationSet
// examples carry the settings docs/gitops.md calls for, and the same ones.
func TestApplications(t *testing.T) {
	app := struct {
		Kind     string  `json:"kind"`
		Metadata meta    `json:"metadata"`
		Spec     appSpec `json:"spec"`
	}{}
	if err := yaml.Unmarshal([]byte(readFile(t, applicationYAML)), &app); err != nil {
		t.Fatalf("%s: %v", applicationYAML, err)
	}
	set := struct {
		Kind string `json:"kind"`
		Spec struct {
			Generators []struct {
				Git *struct {
					Directories []map[string]any `json:"directories"`
				} `json:"git"`
			} `json:"generators"`
			Template struct {
				Metadata meta    `json:"metadata"`
				Spec     appSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}{}
	if err := yaml.Unmarshal([]byte(readFile(t, applicationSetYAML)), &set); err != nil {
		t.Fatalf("%s: %v", applicationSetYAML, err)
	}

	if app.Kind != "Application" || set.Kind != "ApplicationSet" {
		t.Fatalf("the examples are a %s and a %s, want an Application and an ApplicationSet", app.Kind, set.Kind)
	}
	if len(set.Spec.Generators) != 1 || set.Spec.Generators[0].Git == nil || len(set.Spec.Generators[0].Git.Directories) == 0 {
		t.Errorf("%s: want one git directory generator", applicationSetYAML)
	}
	if got := app.Metadata.Annotations["argocd.argoproj.io/compare-options"]; got != "ServerSideDiff=true" {
		t.Errorf("%s: compare-options %q, want ServerSideDiff=true", applicationYAML, got)
	}
	for _, opt := range []string{"ServerSideApply=true", "RespectIgnoreDifferences=true", "SkipDryRunOnMissingResource=true"} {
		if !slices.Contains(app.Spec.SyncPolicy.SyncOptions, opt) {
			t.Errorf("%s: syncOptions %v lack %s", applicationYAML, app.Spec.SyncPolicy.SyncOptions, opt)
		}
	}
	found := false
	for _, d := range app.Spec.IgnoreDifferences {
		if d.Group == "kilomesh.io" && d.Kind == "ClusterMesh" &&
			slices.Contains(d.JQPathExpressions, ".spec.crossplane") &&
			slices.Contains(d.ManagedFieldsManagers, "apiextensions.crossplane.io/composite") {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: ignoreDifferences do not leave spec.crossplane and Crossplane's field manager to Crossplane", applicationYAML)
	}
	if diff := cmp.Diff(app.Spec, set.Spec.Template.Spec); diff != "" {
		t.Errorf("the ApplicationSet's template syncs differently from the Application (-application +template):\n%s", diff)
	}
	if diff := cmp.Diff(app.Metadata.Annotations, set.Spec.Template.Metadata.Annotations); diff != "" {
		t.Errorf("the ApplicationSet's template is annotated differently from the Application (-application +template):\n%s", diff)
	}
}

// TestGuideShowsTheExample checks that the Application docs/gitops.md shows
// is the one of examples/argocd, comments aside.
func TestGuideShowsTheExample(t *testing.T) {
	const guide = "../../docs/gitops.md"
	want := map[string]any{}
	if err := yaml.Unmarshal([]byte(readFile(t, applicationYAML)), &want); err != nil {
		t.Fatal(err)
	}
	var shown []map[string]any
	for _, b := range strings.Split(readFile(t, guide), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(b, "```")
		doc := map[string]any{}
		if err := yaml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: a YAML block does not parse: %v", guide, err)
		}
		if doc["kind"] == "Application" {
			shown = append(shown, doc)
		}
	}
	if len(shown) != 1 {
		t.Fatalf("%s shows %d Applications, want 1", guide, len(shown))
	}
	if diff := cmp.Diff(want, shown[0]); diff != "" {
		t.Errorf("%s shows another Application than %s (-example +guide):\n%s", guide, applicationYAML, diff)
	}
}
