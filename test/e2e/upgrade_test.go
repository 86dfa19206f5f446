//go:build e2e

package e2e

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// fromVersion is the release the upgrade starts from, built as it was
// released, from its tag (test/stack/release.sh); the upgrade goes to this
// tree, which the stack installed (crossplane-up.sh) as toVersion.
const fromVersion = "v0.1.0"

// toVersion is the version of this tree's packages on the stack.
func toVersion() string { return env.Vars["KILOMESH_VERSION"] }

// A pkg is one package of kilomesh as the stack runs it.
type pkg struct {
	name     string // the package's name in Crossplane
	kind     string // function or provider
	upgrades bool   // part of a kilomesh release
}

var pkgs = []pkg{
	{"kilomesh-function-kilomesh", "function", true},
	{"crossplane-contrib-provider-kubernetes", "provider", false},
	{"kilomesh-provider-kilomesh", "provider", true},
}

// testUpgradeAndUninstall checks what users get from the packages: both
// platforms in the registry, every package's pod under the identity
// Crossplane gives it; then kilomesh is uninstalled and v0.1.0, as it was
// released, installed; two meshes on it survive the upgrade to this tree
// the way docs/upgrade.md does it without a Peer written again; and
// docs/install.md's uninstall leaves nothing of kilomesh behind. The
// install paths of docs/install.md run last, on a Crossplane of another
// namespace. It uninstalls kilomesh and moves Crossplane, so it runs last;
// a stack reused with E2E_REUSE=1 needs a new stack afterwards.
func testUpgradeAndUninstall(t *testing.T) {
	ctx := context.Background()
	// v0.1.0 is built while the tests run on this tree.
	released := make(chan releaseResult, 1)
	go func() { released <- release(ctx, fromVersion) }()

	t.Run("multi-platform packages in the registry", func(t *testing.T) { testPlatforms(ctx, t) })
	t.Run("packages run as their ServiceAccounts", func(t *testing.T) { testIdentities(ctx, t, toVersion()) })
	t.Run("the mesh of docs/install.md", func(t *testing.T) { testInstallGuideMesh(ctx, t) })
	r := <-released
	if r.err != nil {
		t.Fatalf("cannot build %s as it was released: %v", fromVersion, r.err)
	}
	if !t.Run(fromVersion+" installed as it was released", func(t *testing.T) { testInstallRelease(ctx, t, r) }) {
		t.FailNow()
	}
	meshes := []meshRef{{ns: "upgrade", name: "mesh"}, {ns: "upgrade-defaults", name: "mesh"}}
	if !t.Run("meshes on "+fromVersion, func(t *testing.T) { testUpgradeMeshes(ctx, t, meshes[0], meshes[1]) }) {
		t.FailNow()
	}
	if !t.Run("upgrade to "+toVersion(), func(t *testing.T) { testUpgrade(ctx, t, meshes) }) {
		t.FailNow()
	}
	t.Run("packages run as their ServiceAccounts after the upgrade", func(t *testing.T) { testIdentities(ctx, t, toVersion()) })
	t.Run("a changed config takes effect at once", func(t *testing.T) { testConfigFollowed(ctx, t, meshes[0]) })
	t.Run("uninstall", func(t *testing.T) { testUninstall(ctx, t) })
	t.Run("install paths", func(t *testing.T) {
		if os.Getenv("E2E_INSTALL_PATHS") == "0" {
			t.Skip("E2E_INSTALL_PATHS=0")
		}
		testInstallPaths(ctx, t)
	})
	t.Run("no credentials in status, events or logs", func(t *testing.T) { checkNoCredentials(ctx, t) })
}

// A releaseResult is a release built and pushed by test/stack/release.sh:
// its commit, and whether it came from the tag or from package/releases.
type releaseResult struct {
	commit, from string
	err          error
}

// release builds a released version of kilomesh's packages from its tag,
// with its own build, and pushes them to the stack's registry.
func release(ctx context.Context, version string) releaseResult {
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(top, "test", "stack", "release.sh"), version)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return releaseResult{err: fmt.Errorf("test/stack/release.sh %s: %w: %s", version, err, stderr.String())}
	}
	commit, from, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	report.notef("built kilomesh %s as it was released, commit %s from the %s, with its own package/build.sh, in %.1fs", version, commit, from, time.Since(start).Seconds())
	return releaseResult{commit: commit, from: from}
}

// testPlatforms reads the function's and the provider's packages from the
// stack's registry with crane: each must be one index of a linux/amd64 and
// a linux/arm64 image, each image running its binary as 65532 and labelled
// with its version, and each binary must carry Go's fallback CA roots.
func testPlatforms(ctx context.Context, t *testing.T) {
	for _, n := range []string{"function-kilomesh", "provider-kilomesh"} {
		t.Run(n, func(t *testing.T) {
			ref := fmt.Sprintf("%s/kilomesh/%s:%s", env.Vars["REGISTRY_ADDRESS"], n, toVersion())
			b, err := crane(ctx, nil, "manifest", ref)
			if err != nil {
				t.Fatal(err)
			}
			idx := struct {
				MediaType string `json:"mediaType"`
				Manifests []struct {
					Digest   string `json:"digest"`
					Platform *struct {
						OS           string `json:"os"`
						Architecture string `json:"architecture"`
					} `json:"platform"`
				} `json:"manifests"`
			}{}
			if err := json.Unmarshal(b, &idx); err != nil {
				t.Fatal(err)
			}
			var platforms []string
			for _, d := range idx.Manifests {
				if d.Platform == nil {
					t.Errorf("%s: manifest %s names no platform", ref, d.Digest)
					continue
				}
				p := d.Platform.OS + "/" + d.Platform.Architecture
				platforms = append(platforms, p)
				checkImage(ctx, t, n, p, ref[:strings.LastIndex(ref, ":")]+"@"+d.Digest)
			}
			sort.Strings(platforms)
			if got, want := strings.Join(platforms, " "), "linux/amd64 linux/arm64"; got != want {
				t.Errorf("%s (%s) holds the platforms %q, want %q", ref, idx.MediaType, got, want)
			}
		})
	}
}

// crane runs the stack's crane, its standard output going to out if given.
func crane(ctx context.Context, out io.Writer, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(env.Vars["STACK_BIN"], "crane"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out != nil {
		cmd.Stdout = out
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("crane %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return nil, err
	}
	b, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("crane %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return b, err
}

// checkImage checks one platform's image of a package.
func checkImage(ctx context.Context, t *testing.T, binary, platform, ref string) {
	t.Helper()
	b, err := crane(ctx, nil, "config", ref)
	if err != nil {
		t.Fatal(err)
	}
	cf := struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
	}{}
	if err := json.Unmarshal(b, &cf); err != nil {
		t.Fatal(err)
	}
	entry := "/usr/local/bin/" + binary
	got := fmt.Sprintf("%s/%s user=%s entrypoint=%v version=%s", cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Config.Labels["org.opencontainers.image.version"])
	want := fmt.Sprintf("%s user=65532:65532 entrypoint=[%s] version=%s", platform, entry, toVersion())
	if got != want {
		t.Errorf("the %s image of %s: %s, want %s", platform, binary, got, want)
	}
	bin := filepath.Join(t.TempDir(), binary)
	if err := extract(ctx, ref, strings.TrimPrefix(entry, "/"), bin); err != nil {
		t.Fatalf("the %s image of %s: %v", platform, binary, err)
	}
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m %s: %v: %s", bin, err, out)
	}
	if !strings.Contains(string(out), "golang.org/x/crypto/x509roots/fallback") {
		t.Errorf("the %s binary of %s carries no CA roots (golang.org/x/crypto/x509roots/fallback)", platform, binary)
	}
}

// extract writes the file at path of an image's file system to out.
func extract(ctx context.Context, ref, path, out string) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := crane(ctx, pw, "export", ref, "-")
		pw.CloseWithError(err)
	}()
	defer func() { _ = pr.Close(); <-done }()
	tr := tar.NewReader(pr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no %s in the image", path)
		}
		if err != nil {
			return err
		}
		if h.Name != path {
			continue
		}
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

// activeRevision returns the active revision of a package.
func activeRevision(ctx context.Context, p pkg) (*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("pkg.crossplane.io/v1")
	l.SetKind(strings.ToUpper(p.kind[:1]) + p.kind[1:] + "RevisionList")
	if err := mgmt.List(ctx, l, client.MatchingLabels{"pkg.crossplane.io/package": p.name}); err != nil {
		return nil, err
	}
	var active []unstructured.Unstructured
	for _, r := range l.Items {
		if s, _, _ := unstructured.NestedString(r.Object, "spec", "desiredState"); s == "Active" {
			active = append(active, r)
		}
	}
	if len(active) != 1 {
		return nil, fmt.Errorf("%d active revisions of %s", len(active), p.name)
	}
	return &active[0], nil
}

// testIdentities checks that the pod of every package's active revision
// runs the revision's image of version (provider-kubernetes: its own),
// under the ServiceAccount of the Deployment Crossplane's runtime made for
// the revision, with a token the API server says is that ServiceAccount's
// and that expires (the pod's projected token, read where the kubelet
// mounts it), and that Crossplane's RBAC manager bound the revision's
// ClusterRole to that ServiceAccount. provider-kilomesh's is the grant's
// ServiceAccount provider-kilomesh, through the ImageConfigs of
// docs/install.md's mirror block, and may read provider-kubernetes'
// configs.
func testIdentities(ctx context.Context, t *testing.T, version string) {
	ns := crossplaneNamespace()
	for _, p := range pkgs {
		t.Run(p.name, func(t *testing.T) {
			rev, err := activeRevision(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := revisionPod(ctx, rev.GetName())
			if err != nil {
				t.Fatal(err)
			}
			image := pod.Spec.Containers[0].Image
			if !strings.HasPrefix(image, env.Vars["REGISTRY_NODE_ADDRESS"]+"/") || p.upgrades && !strings.HasSuffix(image, ":"+version) {
				t.Errorf("pod %s runs %s, want %s from the registry at %s", pod.Name, image, version, env.Vars["REGISTRY_NODE_ADDRESS"])
			}
			if pod.Spec.NodeName != realNode(env.Management()) {
				t.Errorf("pod %s runs on %q, want %s", pod.Name, pod.Spec.NodeName, realNode(env.Management()))
			}
			sa, err := serviceAccountOf(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.ServiceAccountName != sa {
				t.Errorf("pod %s runs as ServiceAccount %s, its Deployment names %s", pod.Name, pod.Spec.ServiceAccountName, sa)
			}
			token, err := podToken(pod)
			if err != nil {
				t.Fatal(err)
			}
			user, exp, err := whoami(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			if want := "system:serviceaccount:" + ns + ":" + sa; user != want {
				t.Errorf("pod %s runs as %s, want %s", pod.Name, user, want)
			}
			if !exp {
				t.Errorf("the token of pod %s does not expire: not a projected token", pod.Name)
			}
			if p.kind != "provider" {
				return
			}
			crb := &rbacv1.ClusterRoleBinding{}
			if err := mgmt.Get(ctx, client.ObjectKey{Name: "crossplane:provider:" + rev.GetName() + ":system"}, crb); err != nil {
				t.Fatalf("Crossplane's RBAC manager did not bind the ClusterRole of %s: %v", rev.GetName(), err)
			}
			bound := false
			for _, s := range crb.Subjects {
				bound = bound || (s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == sa)
			}
			if !bound {
				t.Errorf("the ClusterRole of %s is bound to %v, not to %s/%s", rev.GetName(), crb.Subjects, ns, sa)
			}
			if p.name != pkgs[2].name {
				return
			}
			// The grant survives the mirror: the runtime config comes from
			// the ImageConfig of the mirrored image.
			if sa != "provider-kilomesh" {
				t.Errorf("provider-kilomesh runs as %s, not the ServiceAccount provider-kilomesh its grant names", sa)
			}
			refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "appliedImageConfigRefs")
			applied := map[string]string{}
			for _, r := range refs {
				m, _ := r.(map[string]any)
				applied[fmt.Sprint(m["reason"])] = fmt.Sprint(m["name"])
			}
			if applied["RewriteImage"] != "kilomesh-mirror" || applied["ConfigureRuntime"] != "provider-kilomesh-runtime-mirror" {
				t.Errorf("the revision %s applied the ImageConfigs %v, want kilomesh-mirror (RewriteImage) and provider-kilomesh-runtime-mirror (ConfigureRuntime)", rev.GetName(), refs)
			}
			if err := canI(ctx, token, "kubernetes.m.crossplane.io", "providerconfigs", "watch"); err != nil {
				t.Errorf("provider-kilomesh: %v", err)
			}
		})
	}
}

// serviceAccountOf returns the ServiceAccount of the Deployment that
// Crossplane's package runtime made for a revision.
func serviceAccountOf(ctx context.Context, rev *unstructured.Unstructured) (string, error) {
	l := &appsv1.DeploymentList{}
	if err := mgmt.List(ctx, l, client.InNamespace(crossplaneNamespace())); err != nil {
		return "", err
	}
	for _, d := range l.Items {
		for _, o := range d.GetOwnerReferences() {
			if o.UID == rev.GetUID() {
				return d.Spec.Template.Spec.ServiceAccountName, nil
			}
		}
	}
	return "", fmt.Errorf("no Deployment of %s", rev.GetName())
}

// podToken reads the ServiceAccount token a pod of the management
// cluster's node runs with, where its container sees it (through the root
// of its process: the kubelet mounts it inside the node's mount
// namespace).
func podToken(p *corev1.Pod) (string, error) {
	pids, err := containerPIDs(p, p.Spec.Containers[0].Name)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/root/var/run/secrets/kubernetes.io/serviceaccount/token")
	if err != nil {
		return "", fmt.Errorf("the token of pod %s: %w", p.Name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// tokenClient is a client of the management cluster with a bearer token.
func tokenClient(token string) (client.Client, error) {
	cfg, err := env.RESTConfig(env.Management())
	if err != nil {
		return nil, err
	}
	cfg = rest.AnonymousClientConfig(cfg)
	cfg.BearerToken = token
	return client.New(cfg, client.Options{})
}

// whoami asks the management cluster who a token is, and tells whether it
// expires.
func whoami(ctx context.Context, token string) (string, bool, error) {
	c, err := tokenClient(token)
	if err != nil {
		return "", false, err
	}
	r := &authv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return "", false, err
	}
	parts := strings.Split(token, ".")
	claims := struct {
		Exp int64 `json:"exp"`
	}{}
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			_ = json.Unmarshal(b, &claims)
		}
	}
	badTokens = append(badTokens, token)
	return r.Status.UserInfo.Username, claims.Exp > 0, nil
}

// canI fails unless a token may do verb on a resource of every namespace.
func canI(ctx context.Context, token, group, resource, verb string) error {
	c, err := tokenClient(token)
	if err != nil {
		return err
	}
	r := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Group: group, Resource: resource, Verb: verb},
	}}
	if err := c.Create(ctx, r); err != nil {
		return err
	}
	if !r.Status.Allowed {
		return fmt.Errorf("may not %s %s.%s: %s", verb, resource, group, r.Status.Reason)
	}
	return nil
}

// doc runs a shell block of the documentation against the stack
// (test/stack/doc.sh) and returns what it prints.
func doc(ctx context.Context, file, name string, vars ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(top, "test", "stack", "doc.sh"), append([]string{file, name}, vars...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s, block %s: %w", file, name, err)
	}
	return string(out), nil
}

// testInstallGuideMesh runs steps 3 and 4 of docs/install.md as they are:
// the member identities, Secrets and ProviderConfigs of namespace network,
// examples/mesh.yaml, and the Peers it shows in cluster-b. Then the mesh
// goes again: the upgrade test needs the members' keys for a mesh of its
// own.
func testInstallGuideMesh(ctx context.Context, t *testing.T) {
	ref := meshRef{ns: "network", name: "mesh"}
	resetNodes(ctx, t)
	if err := script(ctx, "providerconfigs.sh", append([]string{ref.ns}, meshMembers...)...); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := doc(ctx, "docs/install.md", "mesh")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("docs/install.md, mesh:\n%s", out)
	ready := time.Since(start)
	table := out
	if i := strings.Index(out, "NAME "); i >= 0 {
		table = out[i:]
	}
	if cols := columns(table); cols["READY"] != "True" || cols["CLUSTERS"] != "3" {
		t.Errorf("the mesh of docs/install.md shows %v", cols)
	}
	waitConverged(ctx, t, ref, convergeTimeout)
	out, err = doc(ctx, "docs/install.md", "peers")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		shown = append(shown, strings.Fields(l)[0])
	}
	var want []string
	for _, p := range meshPeers("cluster-b", ref) {
		want = append(want, p.Name)
	}
	sort.Strings(want)
	if strings.Join(shown, " ") != strings.Join(want, " ") || len(want) == 0 {
		t.Errorf("docs/install.md shows the Peers %v in cluster-b, which holds %v", shown, want)
	}
	report.notef("docs/install.md: examples/mesh.yaml was Ready %.1fs after kubectl apply", ready.Seconds())

	if _, err := kubectl(ctx, env.Management(), "delete", "-f", filepath.Join(top, "examples", "mesh.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the Peers and managed resources of "+ref.String()+" to go", func() error {
		for _, m := range rec.memberNames() {
			if n := len(meshPeers(m, ref)); n > 0 {
				return fmt.Errorf("%s holds %d Peers of %s", m, n, ref)
			}
		}
		if left := managedResources(ctx, t, ref.ns); len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// testInstallRelease uninstalls this tree's kilomesh as docs/install.md
// says, then installs the release fromVersion the way its users installed
// it: the grant, then the Configuration with crossplane xpkg install. Its
// function and provider are installed first, at its own version, under the
// names dependency resolution gives them: the Configuration of v0.1.0 asks
// for ">=v0.1.0", which the registry's newer packages would satisfy too,
// whereas its users got v0.1.0, the only release there was. What is
// installed must then be the release, with its own defaults: the XRD's
// delivery defaults to Objects and providerConfigRef.kind to
// ClusterProviderConfig.
func testInstallRelease(ctx context.Context, t *testing.T, r releaseResult) {
	if err := script(ctx, "doc.sh", "docs/install.md", "uninstall"); err != nil {
		t.Fatal(err)
	}
	waitKilomeshGone(ctx, t)
	start := time.Now()
	if err := script(ctx, "doc.sh", "docs/install.md", "control-plane-grant", "xp_ns="+crossplaneNamespace()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []pkg{pkgs[0], pkgs[2]} {
		ref := fmt.Sprintf("xpkg.crossplane.io/kilomesh/%s:%s", strings.TrimPrefix(p.name, "kilomesh-"), fromVersion)
		cmd := exec.CommandContext(ctx, filepath.Join(env.Vars["STACK_BIN"], "crossplane"), "xpkg", "install", p.kind, ref, p.name)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig(env.Management()))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crossplane xpkg install %s %s: %v: %s", p.kind, ref, err, out)
		}
	}
	if err := script(ctx, "doc.sh", "docs/install.md", "install-configuration", "version="+fromVersion); err != nil {
		t.Fatal(err)
	}
	for _, p := range []pkg{pkgs[0], pkgs[2]} {
		waitFor(ctx, t, fromVersion+"'s pod of "+p.name, func() error {
			pod, err := packagePod(ctx, p)
			if err == nil && !strings.HasSuffix(pod.Spec.Containers[0].Image, ":"+fromVersion) {
				err = fmt.Errorf("pod %s runs %s", pod.Name, pod.Spec.Containers[0].Image)
			}
			if err == nil && !ready(pod) {
				err = fmt.Errorf("pod %s is not ready", pod.Name)
			}
			return err
		})
	}
	xrd := &unstructured.Unstructured{}
	xrd.SetAPIVersion("apiextensions.crossplane.io/v2")
	xrd.SetKind("CompositeResourceDefinition")
	if err := mgmt.Get(ctx, client.ObjectKey{Name: "clustermeshes.kilomesh.io"}, xrd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(xrd.Object, "spec", "versions")
	if len(versions) == 0 {
		t.Fatal("the XRD has no version")
	}
	spec, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
	delivery, _, _ := unstructured.NestedString(spec, "delivery", "default")
	kind, _, _ := unstructured.NestedString(spec, "clusters", "items", "properties", "providerConfigRef", "properties", "kind", "default")
	if delivery != "Objects" || kind != "ClusterProviderConfig" {
		t.Errorf("the installed XRD defaults delivery to %q and providerConfigRef.kind to %q: not %s's Objects and ClusterProviderConfig", delivery, kind, fromVersion)
	}
	report.notef("%s (commit %s, from the %s) installed as its users installed it %.1fs after this tree's kilomesh was uninstalled", fromVersion, r.commit, r.from, time.Since(start).Seconds())
}

// releaseOnly are the Peers of the upgrade's meshes (member/name) that
// fromVersion delivers and this tree does not plan: those of nodes Kilo
// leaves out of its own mesh (node-c2, without an endpoint), which v0.1.0
// gave a Peer without an endpoint (docs/upgrade.md, notes for v0.2.0).
var releaseOnly []string

// waitReleaseConverged waits until every member holds every Peer this tree
// plans for the mesh, with every member's node networks declared, as it
// plans it, and returns the Peers each member holds beyond them.
func waitReleaseConverged(ctx context.Context, t *testing.T, ref meshRef) map[string][]string {
	t.Helper()
	var extra map[string][]string
	// The release's own Peers may come a moment after the planned ones
	// (provider-kubernetes writes each Object on its own): the extras
	// count once they stayed the same for five checks in a row.
	same := 0
	wait.Eventually(ctx, t, fmt.Sprintf("%s to hold this tree's plan with the node networks declared, and the same Peers beyond it for 5 s", ref), convergeTimeout, time.Second, func() (bool, error) {
		got, why := releaseDiff(ctx, ref)
		if why != "" {
			same = 0
			return false, errors.New(why)
		}
		if reflect.DeepEqual(got, extra) {
			same++
		} else {
			extra, same = got, 0
		}
		return same >= 5, fmt.Errorf("the Peers beyond the plan %v, the same for %d checks", extra, same)
	})
	return extra
}

func releaseDiff(ctx context.Context, ref meshRef) (map[string][]string, string) {
	_, spec, err := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
	if err != nil {
		return nil, err.Error()
	}
	withNodeNetworks(spec)
	plan, err := stack.Want(ctx, kube, ref.ns, ref.name, spec)
	if err != nil {
		return nil, "cannot plan: " + err.Error()
	}
	extra := map[string][]string{}
	for _, m := range rec.memberNames() {
		want := map[string]bool{}
		for _, p := range plan.Peers[m] {
			want[p.Name] = true
		}
		var held []kilov1alpha1.Peer
		for _, p := range meshPeers(m, ref) {
			if want[p.Name] {
				held = append(held, p)
			} else {
				extra[m] = append(extra[m], p.Name)
			}
		}
		if d := stack.Diff(plan.Peers[m], held); d != "" {
			return nil, fmt.Sprintf("%s (-want +got):\n%s", m, d)
		}
	}
	return extra, ""
}

// upgradeConfig is the ClusterProviderConfig of a member in the upgrade's
// meshes: the member's kubeconfig Secret of namespace upgrade.
func upgradeConfig(member string) string { return "upgrade-" + member }

// nodeNetworks are the networks the internal addresses of a member's nodes
// lie in: the fixture's 192.168.<n>.0/24 and the real node's link. v0.1.0
// routed every node's internal address; v0.2.0 routes those inside the
// member's nodeCIDRs, which docs/upgrade.md declares during the upgrade.
func nodeNetworks(member string) []string {
	out := []string{fmt.Sprintf("192.168.%d.0/24", int(member[len(member)-1]-'a')+1)}
	if n, ok := env.RealNode(member); ok {
		out = append(out, netip.MustParsePrefix(n.InternalIP).Masked().String())
	}
	return out
}

// withNodeNetworks declares every member's nodeNetworks in a mesh's spec:
// with them, this tree plans the Peers v0.1.0 did.
func withNodeNetworks(spec *meshv1alpha1.ClusterMeshSpec) {
	for i, c := range spec.Clusters {
		spec.Clusters[i].NodeCIDRs = nil
		for _, n := range nodeNetworks(c.Name) {
			spec.Clusters[i].NodeCIDRs = append(spec.Clusters[i].NodeCIDRs, meshv1alpha1.CIDR(n))
		}
	}
}

// testUpgradeMeshes creates two meshes on fromVersion. pm: PeerSet
// delivery (so that provider-kilomesh writes the Peers) of cluster-a,
// reached through a ProviderConfig, and cluster-b, through a
// ClusterProviderConfig. dm: what a manifest of v0.1.0's users left out is
// left out, delivery and providerConfigRef.kind, so v0.1.0's defaults
// apply: Objects delivery (provider-kubernetes writes its Peers) of
// cluster-a and cluster-c, each through a ClusterProviderConfig. No member
// holds Peers of both meshes for one node, so their keys never meet.
func testUpgradeMeshes(ctx context.Context, t *testing.T, pm, dm meshRef) {
	resetNodes(ctx, t)
	if err := script(ctx, "providerconfigs.sh", append([]string{pm.ns}, meshMembers...)...); err != nil {
		t.Fatal(err)
	}
	for _, m := range meshMembers {
		cpc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
			"kind":       "ClusterProviderConfig",
			"metadata":   map[string]any{"name": upgradeConfig(m)},
			"spec": map[string]any{"credentials": map[string]any{
				"source":    "Secret",
				"secretRef": map[string]any{"namespace": pm.ns, "name": m + "-kubeconfig", "key": "kubeconfig"},
			}},
		}}
		if err := mgmt.Create(ctx, cpc); err != nil && !kerrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	b := member("cluster-b", upgradeConfig("cluster-b"))
	b.ProviderConfigRef.Kind = "ClusterProviderConfig"
	start := time.Now()
	if err := mgmt.Create(ctx, newMesh(pm, "PeerSet", member("cluster-a", "cluster-a"), b)); err != nil {
		t.Fatal(err)
	}
	var clusters []any
	for _, m := range []string{"cluster-a", "cluster-c"} {
		c := member(m, upgradeConfig(m))
		clusters = append(clusters, map[string]any{
			"name":              c.Name,
			"providerConfigRef": map[string]any{"name": c.ProviderConfigRef.Name},
			"podCIDRs":          []any{string(c.PodCIDRs[0])},
			"wireguardCIDR":     string(c.WireguardCIDR),
		})
	}
	d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"clusters": clusters}}}
	d.SetGroupVersionKind(stack.MeshGVK)
	d.SetNamespace(dm.ns)
	d.SetName(dm.name)
	ns := &corev1.Namespace{}
	ns.Name = dm.ns
	if err := mgmt.Create(ctx, ns); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := mgmt.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	// v0.1.0's Peers are this tree's plan once the members' node networks
	// are declared, but for the Peers of nodes this tree leaves out.
	for _, ref := range []meshRef{pm, dm} {
		for m, names := range waitReleaseConverged(ctx, t, ref) {
			for _, n := range names {
				releaseOnly = append(releaseOnly, m+"/"+n)
			}
		}
		waitCondition(ctx, t, ref, "Ready", "True", convergeTimeout)
	}
	sort.Strings(releaseOnly)
	report.notef("upgrade: two meshes on %s, one of PeerSet delivery (a member through a ClusterProviderConfig), one with %s's defaults (Objects), Ready %.1fs after they were created", fromVersion, fromVersion, time.Since(start).Seconds())

	// The API server wrote v0.1.0's defaults into the mesh that left them
	// out.
	if err := mgmt.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(d.Object, "spec", "delivery"); got != "Objects" {
		t.Errorf("%s: delivery %q, want %s's default Objects", dm, got, fromVersion)
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "clusters")
	for _, c := range cs {
		if kind, _, _ := unstructured.NestedString(c.(map[string]any), "providerConfigRef", "kind"); kind != "ClusterProviderConfig" {
			t.Errorf("%s: providerConfigRef.kind %q, want %s's default ClusterProviderConfig", dm, kind, fromVersion)
		}
	}

	// crossplane resource trace shows the mesh and everything it composes.
	trace := exec.CommandContext(ctx, filepath.Join(env.Vars["STACK_BIN"], "crossplane"), "resource", "trace", "clustermesh.kilomesh.io/"+pm.name, "-n", pm.ns)
	trace.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig(env.Management()))
	tb, err := trace.CombinedOutput()
	if err != nil {
		t.Fatalf("crossplane resource trace: %v: %s", err, tb)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(tb), "\n") {
		f := strings.Fields(strings.TrimLeft(line, "├└─ "))
		if len(f) >= 5 && f[2] == "True" && f[3] == "True" {
			counts[strings.SplitN(f[0], "/", 2)[0]]++
		}
	}
	if counts["ClusterMesh"] != 1 || counts["NodeInventory"] != 2 || counts["PeerSet"] != 2 {
		t.Errorf("crossplane resource trace shows %v synced and ready, want a ClusterMesh, 2 NodeInventories and 2 PeerSets:\n%s", counts, tb)
	}
}

// checkNodesColumn checks the NODES column of kubectl get nodeinventories
// (the API server's Table, a printer column of v0.2.0's CRD): each
// inventory's node count.
func checkNodesColumn(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	out, err := kubectl(ctx, env.Management(), "get", "nodeinventories.kube.kilomesh.io", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kube.kilomesh.io/v1alpha1")
	l.SetKind("NodeInventoryList")
	if err := mgmt.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(out)
	for _, inv := range l.Items {
		nodes, _, _ := unstructured.NestedSlice(inv.Object, "status", "atProvider", "nodes")
		if got, want := rows[inv.GetName()]["NODES"], strconv.Itoa(len(nodes)); got != want || len(nodes) == 0 {
			t.Errorf("kubectl get nodeinventories shows NODES=%q for %s, which publishes %s nodes:\n%s", got, inv.GetName(), want, out)
		}
	}
}

// tableRows reads a kubectl table into name -> column -> value.
func tableRows(table string) map[string]map[string]string {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	out := map[string]map[string]string{}
	if len(lines) < 2 {
		return out
	}
	head := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		row := strings.Fields(l)
		cols := map[string]string{}
		for i, h := range head {
			if i < len(row) {
				cols[h] = row[i]
			}
		}
		out[cols["NAME"]] = cols
	}
	return out
}

// readySampler watches a mesh's Ready condition until stopped, and keeps
// every moment it was not True.
type readySampler struct {
	mu   sync.Mutex
	not  []string
	seen int
	stop chan struct{}
	done chan struct{}
}

func sampleReady(ctx context.Context, ref meshRef) *readySampler {
	s := &readySampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			st, reason, msg, err := condition(ctx, ref, "Ready")
			s.mu.Lock()
			s.seen++
			if err == nil && st != "True" {
				s.not = append(s.not, fmt.Sprintf("%s Ready=%s %s: %s", time.Now().Format("15:04:05.000"), st, reason, msg))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *readySampler) end() (samples int, notReady []string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen, s.not
}

// testUpgrade upgrades the Configuration, the function and the provider
// from fromVersion to this tree with the block of docs/upgrade.md, and
// checks that their pods run it, that the meshes stay Ready, and that no
// Peer of any member is deleted, created or written again.
func testUpgrade(ctx context.Context, t *testing.T, refs []meshRef) {
	before := map[string]map[string]kilov1alpha1.Peer{}
	owned := func(p *kilov1alpha1.Peer) bool {
		return slices.ContainsFunc(refs, func(r meshRef) bool { return stack.Owned(p, r.ns, r.name) })
	}
	for _, m := range rec.memberNames() {
		before[m] = map[string]kilov1alpha1.Peer{}
		for _, p := range rec.snapshot(m) {
			if owned(&p) {
				before[m][p.Name] = p
			}
		}
	}
	for _, m := range meshMembers {
		if len(before[m]) == 0 {
			t.Fatalf("%s holds no Peer of %v before the upgrade: nothing to keep", m, refs)
		}
	}
	oldPods := packagePods(ctx, t)
	var samplers []*readySampler
	for _, ref := range refs {
		samplers = append(samplers, sampleReady(ctx, ref))
	}
	t0 := time.Now()
	if err := script(ctx, "doc.sh", "docs/upgrade.md", "pause"); err != nil {
		t.Fatal(err)
	}
	if err := script(ctx, "doc.sh", "docs/upgrade.md", "upgrade", "version="+toVersion()); err != nil {
		t.Fatal(err)
	}
	upgraded := time.Since(t0)

	// The new revisions' pods run, and the old ones' are gone.
	for _, p := range pkgs {
		waitFor(ctx, t, "the pod of "+p.name+"'s new revision", func() error {
			pod, err := packagePod(ctx, p)
			switch {
			case err != nil:
				return err
			case p.upgrades && !strings.HasSuffix(pod.Spec.Containers[0].Image, ":"+toVersion()):
				return fmt.Errorf("pod %s of the active revision runs %s", pod.Name, pod.Spec.Containers[0].Image)
			case !ready(pod):
				return fmt.Errorf("pod %s is not ready", pod.Name)
			}
			return nil
		})
	}
	waitFor(ctx, t, "the pods of the old revisions to go", func() error {
		now := packagePods(ctx, t)
		for name, p := range oldPods {
			if _, ok := now[name]; ok && (p.Labels["pkg.crossplane.io/function"] == pkgs[0].name || p.Labels["pkg.crossplane.io/provider"] == pkgs[2].name) {
				return fmt.Errorf("pod %s of an old revision still runs", name)
			}
		}
		return nil
	})
	switched := time.Since(t0)

	// docs/upgrade.md from v0.1.0: every member's node networks, then the
	// meshes resume.
	for _, ref := range refs {
		_, spec, err := stack.GetMesh(ctx, mgmt, ref.ns, ref.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range spec.Clusters {
			if err := script(ctx, "doc.sh", "docs/upgrade.md", "node-cidrs", "ns="+ref.ns, "mesh="+ref.name, "member="+c.Name,
				"cidrs="+strings.Join(nodeNetworks(c.Name), ",")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := script(ctx, "doc.sh", "docs/upgrade.md", "resume"); err != nil {
		t.Fatal(err)
	}

	// Every managed resource of provider-kilomesh went through the new
	// provider, and the new function ran for each mesh: a Peer they would
	// write again is written by now.
	mrs := 0
	for _, ref := range refs {
		for _, mr := range managedResources(ctx, t, ref.ns) {
			if !strings.HasPrefix(mr, "Object ") {
				mrs++
			}
		}
	}
	calls, _ := metric(crossplaneMetrics(), "function_run_function_request_total")
	for _, ref := range refs {
		if err := patchMesh(ctx, ref, fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{"e2e.kilomesh.io/upgraded":%q}}]`, toVersion())); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "the new provider and function to run", func() error {
		n, err := metric(pkmMetrics.get(), "controller_runtime_reconcile_total")
		c, cerr := metric(crossplaneMetrics(), "function_run_function_request_total")
		if err == nil && cerr == nil && int(n) >= mrs && c >= calls+float64(len(refs)) {
			return nil
		}
		return fmt.Errorf("the upgraded provider reconciled %.0f times for %d managed resources, the function ran %.0f times since: %w", n, mrs, c-calls, errors.Join(err, cerr))
	})
	// Crossplane's probe and the function's response TTL come by as well.
	time.Sleep(15 * time.Second)
	var notReady []string
	samples := 0
	for _, s := range samplers {
		n, not := s.end()
		samples += n
		notReady = append(notReady, not...)
	}

	// The Peers of nodes this tree leaves out go; every other Peer stays
	// as it was.
	var lost, dropped, rewritten, created []string
	for _, m := range rec.memberNames() {
		rv := map[string]string{}
		for name, p := range before[m] {
			rv[name] = p.ResourceVersion
		}
		for _, e := range rec.since(m, t0, owned) {
			what := m + "/" + e.Peer.Name
			switch {
			case e.Type == "Deleted" && slices.Contains(releaseOnly, what):
				dropped = append(dropped, what)
			case e.Type == "Deleted":
				lost = append(lost, what)
			case e.Type == "Added":
				created = append(created, what)
			case rv[e.Peer.Name] != e.Peer.ResourceVersion:
				rewritten = append(rewritten, what)
			}
			rv[e.Peer.Name] = e.Peer.ResourceVersion
		}
		now := rec.snapshot(m)
		for n, p := range before[m] {
			if slices.Contains(releaseOnly, m+"/"+n) {
				continue
			}
			if q, ok := now[n]; !ok || q.UID != p.UID || q.ResourceVersion != p.ResourceVersion {
				t.Errorf("%s: Peer %s was not kept as it was (uid %s -> %s, resourceVersion %s -> %s)", m, n, p.UID, q.UID, p.ResourceVersion, q.ResourceVersion)
			}
		}
	}
	sort.Strings(dropped)
	if len(lost)+len(rewritten)+len(created) > 0 {
		t.Errorf("the packages were upgraded, yet Peers were deleted: %v; written again: %v; made: %v", lost, rewritten, created)
	}
	if strings.Join(dropped, " ") != strings.Join(releaseOnly, " ") {
		t.Errorf("the upgrade deleted the Peers %v of %s's that this tree does not plan, want %v", dropped, fromVersion, releaseOnly)
	}
	if len(notReady) > 0 {
		t.Errorf("a mesh was not Ready during the upgrade:\n%s", strings.Join(notReady, "\n"))
	}
	report.fault("both", fmt.Sprintf("packages upgraded from %s to %s", fromVersion, toVersion()), len(lost), len(rewritten), switched,
		fmt.Sprintf("docs/upgrade.md: packages healthy after %.1fs, the new revisions' pods running after %.1fs; Peers made: %d; deleted as v0.2.0 plans (nodes Kilo leaves out): %v; the meshes were Ready in %d of %d samples", upgraded.Seconds(), switched.Seconds(), len(created), dropped, samples-len(notReady), samples))

	// The upgraded packages deliver a change, through either delivery.
	key := fixture.Key("node-a1 after the upgrade")
	var ws []*waiter
	for _, c := range []struct {
		target string
		ref    meshRef
	}{{"cluster-b", refs[0]}, {"cluster-c", refs[1]}} {
		peer := peerName(c.ref, "cluster-a", "node-a1")
		w, err := rec.expect(c.target, func(ps map[string]*kilov1alpha1.Peer) bool { p := ps[peer]; return p != nil && p.Spec.PublicKey == key })
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if err := fixture.Apply(ctx, kube["cluster-a"], nodeOf(ctx, t, "cluster-a", "node-a1").With(kilov1alpha1.AnnotationKey, key)); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		wctx, cancel := context.WithTimeout(ctx, convergeTimeout)
		_, err := w.wait(wctx)
		cancel()
		if err != nil {
			t.Fatalf("a key rotated in cluster-a did not reach the other members after the upgrade: %v", err)
		}
	}
	for _, ref := range refs {
		waitConverged(ctx, t, ref, convergeTimeout)
	}
	checkNodesColumn(ctx, t, refs[0].ns)
}

// testConfigFollowed points the ProviderConfig of cluster-a, then the
// ClusterProviderConfig of cluster-b, at a kubeconfig without RBAC and
// back: the member's NodeInventory must report the refusal, and recover,
// well before provider-kilomesh's poll (10 minutes), which only its watches
// of the configs can do; no Peer may be deleted meanwhile.
func testConfigFollowed(ctx context.Context, t *testing.T, ref meshRef) {
	t0 := time.Now()
	for _, c := range []configOf{
		{"cluster-a", "ProviderConfig", "cluster-a", ref.ns},
		{"cluster-b", "ClusterProviderConfig", upgradeConfig("cluster-b"), ""},
	} {
		followConfig(ctx, t, ref, c)
	}
	waitCondition(ctx, t, ref, "ClustersReachable", "True", convergeTimeout)
	noDeletes(t, t0, ownedBy(ref), "members' configs were pointed at credentials without RBAC")
	waitConverged(ctx, t, ref, convergeTimeout)
}

// configOf names the provider-kubernetes config of a member.
type configOf struct {
	member, kind, name, ns string
}

// followConfig points a member's config at credentials without RBAC and
// back, and times how its NodeInventory follows.
func followConfig(ctx context.Context, t *testing.T, ref meshRef, c configOf) {
	t.Helper()
	noRBACProviderConfig(ctx, t, ref.ns, c.member)
	pc := &unstructured.Unstructured{}
	pc.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	pc.SetKind(c.kind)
	pc.SetNamespace(c.ns)
	pc.SetName(c.name)
	point := func(secret string) error {
		patch := fmt.Sprintf(`{"spec":{"credentials":{"secretRef":{"name":%q}}}}`, secret)
		return mgmt.Patch(ctx, pc, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	start := time.Now()
	if err := point(c.member + "-norbac-kubeconfig"); err != nil {
		t.Fatal(err)
	}
	// Pointed back even when a check fails, so that the uninstall can
	// still reach the member.
	defer func() {
		if err := point(c.member + "-kubeconfig"); err != nil {
			t.Error(err)
		}
	}()
	waitInventorySynced(ctx, t, ref, c.member, "False", "forbidden")
	refused := time.Since(start)
	if err := point(c.member + "-kubeconfig"); err != nil {
		t.Fatal(err)
	}
	waitInventorySynced(ctx, t, ref, c.member, "True")
	report.notef("%s %s pointed at credentials without RBAC: the NodeInventory of %s reported the refusal after %.1fs, and was synced again %.1fs after the config was pointed back",
		c.kind, c.name, c.member, refused.Seconds(), time.Since(start).Seconds()-refused.Seconds())
}

// waitInventorySynced waits until the NodeInventory of a member of a mesh
// has the Synced status, with every word of contains in its message.
func waitInventorySynced(ctx context.Context, t *testing.T, ref meshRef, member, status string, contains ...string) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("the NodeInventory of %s to be Synced=%s %v", member, status, contains), func() error {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("kube.kilomesh.io/v1alpha1")
		l.SetKind("NodeInventoryList")
		if err := mgmt.List(ctx, l, client.InNamespace(ref.ns)); err != nil {
			return err
		}
		for i := range l.Items {
			if l.Items[i].GetAnnotations()["crossplane.io/composition-resource-name"] != "inventory-"+member {
				continue
			}
			st, _, msg := conditionOf(&l.Items[i], "Synced")
			if st == status && containsAll(msg, contains) {
				return nil
			}
			return fmt.Errorf("Synced=%s: %s", st, msg)
		}
		return errors.New("no NodeInventory")
	})
}

// The managed resources of kilomesh, and the provider-kubernetes Objects
// that deliver Peers.
var managedKinds = []schema.GroupVersionKind{
	{Group: "kube.kilomesh.io", Version: "v1alpha1", Kind: "NodeInventoryList"},
	{Group: "kube.kilomesh.io", Version: "v1alpha1", Kind: "PeerSetList"},
	{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "ObjectList"},
}

// managedResources lists them, in a namespace or in all; a kind whose CRD
// is gone has none.
func managedResources(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, gvk := range managedKinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		opts := []client.ListOption{}
		if ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if gvk.Group == "kubernetes.m.crossplane.io" {
			opts = append(opts, client.HasLabels{"kilomesh.io/target-cluster"})
		}
		if err := mgmt.List(ctx, l, opts...); err != nil {
			if meta.IsNoMatchError(err) || kerrors.IsNotFound(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, u := range l.Items {
			out = append(out, strings.TrimSuffix(gvk.Kind, "List")+" "+u.GetNamespace()+"/"+u.GetName())
		}
	}
	return out
}

// waitKilomeshGone waits until kilomesh's packages, their pods and their
// CRDs are gone.
func waitKilomeshGone(ctx context.Context, t *testing.T) {
	t.Helper()
	waitFor(ctx, t, "kilomesh's packages to go", func() error {
		for _, p := range pkgs {
			if !p.upgrades {
				continue
			}
			if _, err := activeRevision(ctx, p); err == nil {
				return fmt.Errorf("%s is still installed", p.name)
			}
			l := &corev1.PodList{}
			if err := mgmt.List(ctx, l, client.InNamespace(crossplaneNamespace()), client.MatchingLabels{"pkg.crossplane.io/" + p.kind: p.name}); err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%s still has the pod %s", p.name, l.Items[0].Name)
			}
		}
		for _, crd := range []string{"nodeinventories.kube.kilomesh.io", "peersets.kube.kilomesh.io", "clustermeshes.kilomesh.io"} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("apiextensions.k8s.io/v1")
			u.SetKind("CustomResourceDefinition")
			if err := mgmt.Get(ctx, client.ObjectKey{Name: crd}, u); !kerrors.IsNotFound(err) {
				return fmt.Errorf("the CRD %s is still there (%w)", crd, err)
			}
		}
		return nil
	})
}

// testUninstall runs the uninstall of docs/install.md and checks that no
// Peer of kilomesh is left in any member, no managed resource, no usage of a
// config, no package and no pod.
func testUninstall(ctx context.Context, t *testing.T) {
	vpn := handMadePeer(ctx, t)
	start := time.Now()
	if err := script(ctx, "doc.sh", "docs/install.md", "uninstall"); err != nil {
		t.Fatal(err)
	}
	waitKilomeshGone(ctx, t)
	report.notef("uninstall (docs/install.md): kilomesh's packages, CRDs and pods were gone %.1fs after it began", time.Since(start).Seconds())

	for _, m := range rec.memberNames() {
		ps, err := stack.Peers(ctx, kube[m])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Labels[meshv1alpha1.LabelManagedBy] == meshv1alpha1.ManagedByValue {
				t.Errorf("%s still holds the kilomesh Peer %s", m, p.Name)
			}
		}
	}
	if vpn != nil {
		checkVPN(ctx, t, vpn)
	}
	if left := managedResources(ctx, t, ""); len(left) > 0 {
		t.Errorf("managed resources are left: %s", strings.Join(left, ", "))
	}
	usages := &unstructured.UnstructuredList{}
	usages.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	usages.SetKind("ProviderConfigUsageList")
	if err := mgmt.List(ctx, usages); err != nil {
		t.Fatal(err)
	}
	for _, u := range usages.Items {
		if api, _, _ := unstructured.NestedString(u.Object, "resourceRef", "apiVersion"); strings.HasPrefix(api, "kube.kilomesh.io/") {
			t.Errorf("the usage %s/%s of a kilomesh managed resource is left", u.GetNamespace(), u.GetName())
		}
	}

	// Then what the members' credentials and provider-kubernetes leave.
	pcs := &unstructured.UnstructuredList{}
	pcs.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	pcs.SetKind("ProviderConfigList")
	if err := mgmt.List(ctx, pcs); err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{}
	for _, pc := range pcs.Items {
		namespaces[pc.GetNamespace()] = true
	}
	for ns := range namespaces {
		if err := script(ctx, "doc.sh", "docs/install.md", "uninstall-providerconfigs", "ns="+ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range meshMembers {
		cpc := &unstructured.Unstructured{}
		cpc.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
		cpc.SetKind("ClusterProviderConfig")
		cpc.SetName(upgradeConfig(m))
		if err := mgmt.Delete(ctx, cpc); err != nil && !kerrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	// What is left are the tests' own: the bad-input test's member without
	// RBAC and the member without the Peer CRD.
	if err := mgmt.List(ctx, pcs); err != nil {
		t.Fatal(err)
	}
	for i := range pcs.Items {
		if err := mgmt.Delete(ctx, &pcs.Items[i]); err != nil && !kerrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "the ProviderConfigs to go", func() error {
		if err := mgmt.List(ctx, pcs); err != nil {
			return err
		}
		if len(pcs.Items) > 0 {
			return fmt.Errorf("%d ProviderConfigs are left", len(pcs.Items))
		}
		return nil
	})
	if err := script(ctx, "doc.sh", "docs/install.md", "uninstall-provider-kubernetes"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "provider-kubernetes to go", func() error {
		if _, err := activeRevision(ctx, pkgs[1]); err == nil {
			return errors.New("provider-kubernetes is still installed")
		}
		for _, kind := range []string{"Provider", "Function", "Configuration"} {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("pkg.crossplane.io/v1")
			l.SetKind(kind + "List")
			if err := mgmt.List(ctx, l); err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%d %ss are left", len(l.Items), kind)
			}
		}
		return nil
	})
	report.notef("uninstall (docs/install.md): nothing of kilomesh or provider-kubernetes was left %.1fs after it began", time.Since(start).Seconds())
}

// handMadePeer reads the hand-made Peer as the phase ClusterMesh left it, if it
// ran.
func handMadePeer(ctx context.Context, t *testing.T) *kilov1alpha1.Peer {
	t.Helper()
	if vpnPeer.Name == "" {
		return nil
	}
	p := &kilov1alpha1.Peer{}
	if err := kube[vpnMember].Get(ctx, types.NamespacedName{Name: vpnPeer.Name}, p); err != nil {
		t.Fatalf("the hand-made Peer %s in %s: %v", vpnPeer.Name, vpnMember, err)
	}
	return p
}
