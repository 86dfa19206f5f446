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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/test/stack"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// The release the stack installs, and the one the test upgrades to; both
// are built from this tree.
const (
	fromVersion = "v0.1.0"
	toVersion   = "v0.2.0"
)

// A pkg is one package of kilomesh as the stack runs it.
type pkg struct {
	process  string // the local process (test/stack/runtime.sh)
	name     string // the package's name in Crossplane
	kind     string // function or provider
	upgrades bool   // part of a kilomesh release
}

var pkgs = []pkg{
	{"function-kilomesh", "kilomesh-function-kilomesh", "function", true},
	{"provider-kubernetes", "crossplane-contrib-provider-kubernetes", "provider", false},
	{"provider-kilomesh", "kilomesh-provider-kilomesh", "provider", true},
}

// TestUpgradeAndUninstall checks what users get from the packages: both
// platforms in the registry, every package process under the identity
// Crossplane gives it, a mesh that survives the upgrade from v0.1.0 to
// v0.2.0 the way docs/upgrade.md does it without a Peer written again, and
// docs/install.md's uninstall that leaves nothing of kilomesh behind. It
// uninstalls kilomesh, so it runs last; a stack reused with E2E_REUSE=1
// needs crossplane-up.sh again afterwards.
func TestUpgradeAndUninstall(t *testing.T) {
	ctx := context.Background()
	// v0.2.0 is built and published while the mesh converges.
	published := make(chan error, 1)
	go func() { published <- publish(ctx, toVersion) }()

	t.Run("multi-platform packages in the registry", func(t *testing.T) { testPlatforms(ctx, t) })
	t.Run("packages run as their ServiceAccounts", func(t *testing.T) { testIdentities(ctx, t) })
	t.Run("the mesh of docs/install.md", func(t *testing.T) { testInstallGuideMesh(ctx, t) })
	ref := meshRef{ns: "upgrade", name: "mesh"}
	if !t.Run("a mesh on "+fromVersion, func(t *testing.T) { testUpgradeMesh(ctx, t, ref) }) {
		t.FailNow()
	}
	if err := <-published; err != nil {
		t.Fatalf("cannot publish %s: %v", toVersion, err)
	}
	if !t.Run("upgrade to "+toVersion, func(t *testing.T) { testUpgrade(ctx, t, ref) }) {
		t.FailNow()
	}
	t.Run("packages run as their ServiceAccounts after the upgrade", func(t *testing.T) { testIdentities(ctx, t) })
	t.Run("a changed config takes effect at once", func(t *testing.T) { testConfigFollowed(ctx, t, ref) })
	t.Run("uninstall", func(t *testing.T) { testUninstall(ctx, t) })
	t.Run("no credentials in status, events or logs", func(t *testing.T) { checkNoCredentials(ctx, t) })
}

// publish builds the packages of a release of kilomesh and pushes them to
// the stack's registry, the function and the provider as multi-platform
// indexes.
func publish(ctx context.Context, version string) error {
	start := time.Now()
	log, err := os.Create(filepath.Join(env.Dir, "logs", "publish-"+version+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, filepath.Join(top, args[0]), args[1:]...)
		cmd.Env = append(os.Environ(), "VERSION="+version)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w (log: %s)", strings.Join(args, " "), err, log.Name())
		}
		return nil
	}
	for _, p := range []string{"function", "provider", "configuration"} {
		if err := run("package/build.sh", p); err != nil {
			return err
		}
	}
	if err := run("package/push.sh", env.Vars["REGISTRY_ADDRESS"], "function", "provider", "configuration"); err != nil {
		return err
	}
	report.notef("built and published kilomesh %s (linux/amd64 and linux/arm64) in %.1fs", version, time.Since(start).Seconds())
	return nil
}

// testPlatforms reads the function's and the provider's packages from the
// stack's registry with crane: each must be one index of a linux/amd64 and
// a linux/arm64 image, each image running its binary as 65532 and labelled
// with its version, and each binary must carry Go's fallback CA roots.
func testPlatforms(ctx context.Context, t *testing.T) {
	for _, n := range []string{"function-kilomesh", "provider-kilomesh"} {
		t.Run(n, func(t *testing.T) {
			ref := fmt.Sprintf("%s/kilomesh/%s:%s", env.Vars["REGISTRY_ADDRESS"], n, fromVersion)
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
	want := fmt.Sprintf("%s user=65532:65532 entrypoint=[%s] version=%s", platform, entry, fromVersion)
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

// serviceAccountOf returns the ServiceAccount a revision's runtime uses: the
// one of the Deployment Crossplane made for a provider revision, and for a
// function revision (External runtime) the one the Deployment runtime would
// make, named after the revision.
func serviceAccountOf(ctx context.Context, rev *unstructured.Unstructured, kind string) (string, error) {
	if kind == "function" {
		return rev.GetName(), nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("apps/v1")
	l.SetKind("DeploymentList")
	if err := mgmt.List(ctx, l, client.InNamespace(env.Vars["CROSSPLANE_NAMESPACE"])); err != nil {
		return "", err
	}
	for _, d := range l.Items {
		for _, o := range d.GetOwnerReferences() {
			if o.UID == rev.GetUID() {
				sa, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
				return sa, nil
			}
		}
	}
	return "", fmt.Errorf("no Deployment of %s", rev.GetName())
}

// testIdentities checks that every package process runs with a kubeconfig
// holding a TokenRequest token of the ServiceAccount Crossplane's runtime
// gives its active revision, that the process is the one of that revision,
// and that Crossplane's RBAC manager bound the revision's ClusterRole to
// that ServiceAccount.
func testIdentities(ctx context.Context, t *testing.T) {
	ns := env.Vars["CROSSPLANE_NAMESPACE"]
	for _, p := range pkgs {
		t.Run(p.process, func(t *testing.T) {
			rev, err := activeRevision(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			sa, err := serviceAccountOf(ctx, rev, p.kind)
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := os.ReadFile(filepath.Join(env.Dir, "cmd", p.process))
			if err != nil {
				t.Fatal(err)
			}
			kcfg := filepath.Join(env.Dir, "identities", p.process+".kubeconfig")
			if !strings.Contains(string(cmd), "KUBECONFIG="+kcfg) || !strings.Contains(string(cmd), "/runtime/"+rev.GetName()+"/") {
				t.Errorf("%s does not run the binary of %s with %s:\n%s", p.process, rev.GetName(), kcfg, cmd)
			}
			for _, c := range env.Clusters() {
				if strings.Contains(string(cmd), env.Kubeconfig(c)) {
					t.Errorf("%s runs with the admin kubeconfig of %s", p.process, c)
				}
			}
			user, exp, err := whoami(ctx, kcfg)
			if err != nil {
				t.Fatal(err)
			}
			if want := "system:serviceaccount:" + ns + ":" + sa; user != want {
				t.Errorf("%s runs as %s, want %s", p.process, user, want)
			}
			if !exp {
				t.Errorf("the token of %s does not expire: not a TokenRequest token", p.process)
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
		})
	}
}

// whoami asks the management cluster who a kubeconfig is, and tells
// whether its token expires.
func whoami(ctx context.Context, kubeconfig string) (string, bool, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", false, err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", false, err
	}
	r := &authv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return "", false, err
	}
	parts := strings.Split(cfg.BearerToken, ".")
	claims := struct {
		Exp int64 `json:"exp"`
	}{}
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			_ = json.Unmarshal(b, &claims)
		}
	}
	badTokens = append(badTokens, cfg.BearerToken)
	return r.Status.UserInfo.Username, claims.Exp > 0, nil
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

// upgradeMember is cluster-c's entry of the upgrade test's mesh: it is
// reached through a ClusterProviderConfig, so provider-kilomesh must be
// able to read those too.
const upgradeClusterProviderConfig = "upgrade-cluster-c"

// testUpgradeMesh creates a three-member mesh with PeerSet delivery (so
// that provider-kilomesh writes the Peers), one member reached through a
// ClusterProviderConfig, and checks what kubectl and crossplane resource
// trace show of it.
func testUpgradeMesh(ctx context.Context, t *testing.T, ref meshRef) {
	resetNodes(ctx, t)
	if err := script(ctx, "providerconfigs.sh", append([]string{ref.ns}, meshMembers...)...); err != nil {
		t.Fatal(err)
	}
	cpc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
		"kind":       "ClusterProviderConfig",
		"metadata":   map[string]any{"name": upgradeClusterProviderConfig},
		"spec": map[string]any{"credentials": map[string]any{
			"source":    "Secret",
			"secretRef": map[string]any{"namespace": ref.ns, "name": "cluster-c-kubeconfig", "key": "kubeconfig"},
		}},
	}}
	if err := mgmt.Create(ctx, cpc); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c := member("cluster-c", upgradeClusterProviderConfig)
	c.ProviderConfigRef.Kind = "ClusterProviderConfig"
	start := time.Now()
	if err := mgmt.Create(ctx, newMesh(ref, "PeerSet", member("cluster-a", "cluster-a"), member("cluster-b", "cluster-b"), c)); err != nil {
		t.Fatal(err)
	}
	waitConverged(ctx, t, ref, convergeTimeout)
	waitCondition(ctx, t, ref, "Ready", "True", convergeTimeout)
	report.notef("upgrade: the %s mesh (PeerSet delivery, one member through a ClusterProviderConfig) was Ready %.1fs after it was created", fromVersion, time.Since(start).Seconds())

	// The NODES column of the inventories, as the API server's Table says.
	out, err := kubectl(ctx, env.Management(), "get", "nodeinventories.kube.kilomesh.io", "-n", ref.ns)
	if err != nil {
		t.Fatal(err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kube.kilomesh.io/v1alpha1")
	l.SetKind("NodeInventoryList")
	if err := mgmt.List(ctx, l, client.InNamespace(ref.ns)); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(out)
	for _, inv := range l.Items {
		nodes, _, _ := unstructured.NestedSlice(inv.Object, "status", "atProvider", "nodes")
		if got, want := rows[inv.GetName()]["NODES"], strconv.Itoa(len(nodes)); got != want || len(nodes) == 0 {
			t.Errorf("kubectl get nodeinventories shows NODES=%q for %s, which publishes %s nodes:\n%s", got, inv.GetName(), want, out)
		}
	}

	// crossplane resource trace shows the mesh and everything it composes.
	trace := exec.CommandContext(ctx, filepath.Join(env.Vars["STACK_BIN"], "crossplane"), "resource", "trace", "clustermesh.kilomesh.io/"+ref.name, "-n", ref.ns)
	trace.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig(env.Management()))
	b, err := trace.CombinedOutput()
	if err != nil {
		t.Fatalf("crossplane resource trace: %v: %s", err, b)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimLeft(line, "├└─ "))
		if len(f) >= 5 && f[2] == "True" && f[3] == "True" {
			counts[strings.SplitN(f[0], "/", 2)[0]]++
		}
	}
	if counts["ClusterMesh"] != 1 || counts["NodeInventory"] != 3 || counts["PeerSet"] != 3 {
		t.Errorf("crossplane resource trace shows %v synced and ready, want a ClusterMesh, 3 NodeInventories and 3 PeerSets:\n%s", counts, b)
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

// testUpgrade upgrades the Configuration, the function and the provider to
// toVersion with the block of docs/upgrade.md, and checks that they run
// it, that the mesh stays Ready, and that no Peer of any member is deleted,
// created or written again.
func testUpgrade(ctx context.Context, t *testing.T, ref meshRef) {
	before := map[string]map[string]kilov1alpha1.Peer{}
	for _, m := range rec.memberNames() {
		before[m] = map[string]kilov1alpha1.Peer{}
		for _, p := range meshPeers(m, ref) {
			before[m][p.Name] = p
		}
	}
	for _, m := range meshMembers {
		if len(before[m]) == 0 {
			t.Fatalf("%s holds no Peer of %s before the upgrade: nothing to keep", m, ref)
		}
	}
	ready := sampleReady(ctx, ref)
	t0 := time.Now()
	if err := script(ctx, "doc.sh", "docs/upgrade.md", "upgrade", "version="+toVersion); err != nil {
		t.Fatal(err)
	}
	upgraded := time.Since(t0)

	// The processes serve the new revisions.
	deadline := time.Now().Add(convergeTimeout)
	for _, p := range pkgs {
		for {
			rev, err := activeRevision(ctx, p)
			var image string
			if err == nil {
				image, _, _ = unstructured.NestedString(rev.Object, "spec", "image")
				var fresh *stack.Env
				if fresh, err = stack.Load(env.Dir); err == nil && fresh.Vars[envName(p.process, "REVISION")] != rev.GetName() {
					err = fmt.Errorf("%s still serves %s, not %s", p.process, fresh.Vars[envName(p.process, "REVISION")], rev.GetName())
				}
			}
			if err == nil && p.upgrades && !strings.HasSuffix(image, ":"+toVersion) {
				err = fmt.Errorf("the active revision of %s is %s", p.name, image)
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the upgrade: %v", err)
			}
			time.Sleep(time.Second)
		}
	}
	switched := time.Since(t0)

	// Every managed resource went through the new provider, and the new
	// function ran: a Peer they would write again is written by now.
	mrs := len(managedResources(ctx, t, ref.ns))
	calls, _ := metric(crossplaneMetrics(), "function_run_function_request_total")
	if err := patchMesh(ctx, ref, fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{"e2e.kilomesh.io/upgraded":%q}}]`, toVersion)); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := metric(env.Vars["PROVIDER_KILOMESH_METRICS"], "controller_runtime_reconcile_total")
		c, cerr := metric(crossplaneMetrics(), "function_run_function_request_total")
		if err == nil && cerr == nil && int(n) >= mrs && c > calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upgraded provider reconciled %.0f times for %d managed resources, the function ran %.0f times since: %v %v", n, mrs, c-calls, err, cerr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	samples, notReady := ready.end()

	var rewritten, deleted, created int
	for _, m := range rec.memberNames() {
		for _, e := range rec.since(m, t0, ownedBy(ref)) {
			switch e.Type {
			case "Deleted":
				deleted++
			case "Added":
				created++
			default:
				rewritten++
			}
		}
		now := rec.snapshot(m)
		for n, p := range before[m] {
			if q, ok := now[n]; !ok || q.UID != p.UID || q.ResourceVersion != p.ResourceVersion {
				t.Errorf("%s: Peer %s was not kept as it was (uid %s -> %s, resourceVersion %s -> %s)", m, n, p.UID, q.UID, p.ResourceVersion, q.ResourceVersion)
			}
		}
	}
	noChanges(t, t0, ownedBy(ref), "the packages were upgraded")
	if len(notReady) > 0 {
		t.Errorf("the mesh was not Ready during the upgrade:\n%s", strings.Join(notReady, "\n"))
	}
	report.notef("upgrade %s -> %s (docs/upgrade.md): packages healthy after %.1fs, processes on the new revisions after %.1fs; Peers deleted: %d, created: %d, rewritten: %d; the mesh was Ready in %d of %d samples",
		fromVersion, toVersion, upgraded.Seconds(), switched.Seconds(), deleted, created, rewritten, samples-len(notReady), samples)

	// The upgraded packages deliver a change.
	key := fixture.Key("node-a1 after the upgrade")
	peer := peerName(ref, "cluster-a", "node-a1")
	w, err := rec.expect("cluster-b", func(ps map[string]*kilov1alpha1.Peer) bool { p := ps[peer]; return p != nil && p.Spec.PublicKey == key })
	if err != nil {
		t.Fatal(err)
	}
	if err := fixture.Apply(ctx, kube["cluster-a"], nodeOf(ctx, t, "cluster-a", "node-a1").With(kilov1alpha1.AnnotationKey, key)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	if _, err := w.wait(wctx); err != nil {
		t.Fatalf("a key rotated in cluster-a did not reach cluster-b after the upgrade: %v", err)
	}
	waitConverged(ctx, t, ref, convergeTimeout)
}

// testConfigFollowed points the ProviderConfig of cluster-b, then the
// ClusterProviderConfig of cluster-c, at a kubeconfig without RBAC and
// back: the member's NodeInventory must report the refusal, and recover,
// well before provider-kilomesh's poll (10 minutes), which only its watches
// of the configs can do; no Peer may be deleted meanwhile.
func testConfigFollowed(ctx context.Context, t *testing.T, ref meshRef) {
	t0 := time.Now()
	for _, c := range []configOf{
		{"cluster-b", "ProviderConfig", "cluster-b", ref.ns},
		{"cluster-c", "ClusterProviderConfig", upgradeClusterProviderConfig, ""},
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

// envName is the env file's name of a process's value.
func envName(process, suffix string) string {
	return strings.ToUpper(strings.ReplaceAll(process, "-", "_")) + "_" + suffix
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

// testUninstall runs the uninstall of docs/install.md and checks that no
// Peer of kilomesh is left in any member, no managed resource, no usage of a
// config, no package and no process.
func testUninstall(ctx context.Context, t *testing.T) {
	vpn := handMadePeer(ctx, t)
	start := time.Now()
	if err := script(ctx, "doc.sh", "docs/install.md", "uninstall"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "kilomesh's packages to go", func() error {
		for _, p := range pkgs {
			if !p.upgrades {
				continue
			}
			if _, err := activeRevision(ctx, p); err == nil {
				return fmt.Errorf("%s is still installed", p.name)
			}
			if pid, err := os.ReadFile(filepath.Join(env.Dir, "pids", p.process+".pid")); err == nil {
				return fmt.Errorf("%s is still running (pid %s)", p.process, strings.TrimSpace(string(pid)))
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
	report.notef("uninstall (docs/install.md): kilomesh's packages, CRDs and processes were gone %.1fs after it began", time.Since(start).Seconds())

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
	cpc := &unstructured.Unstructured{}
	cpc.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	cpc.SetKind("ClusterProviderConfig")
	cpc.SetName(upgradeClusterProviderConfig)
	if err := mgmt.Delete(ctx, cpc); err != nil && !kerrors.IsNotFound(err) {
		t.Fatal(err)
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

// handMadePeer reads the hand-made Peer as TestClusterMesh left it, if it
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

// waitFor retries check until it returns nil, for convergeTimeout.
func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(time.Second)
	}
}
