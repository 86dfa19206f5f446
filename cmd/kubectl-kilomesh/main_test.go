package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kilomesh/kilomesh/internal/testing/meshfixture"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// now is the clock of every snapshot in the tests: five minutes after the
// render scenarios' members were observed.
var now = time.Date(2026, 11, 22, 1, 5, 0, 0, time.UTC)

// The API server every test of this package shares, when one can start.
var (
	apiConfig  *rest.Config
	apiClient  client.Client
	kubeconfig string
)

// namespace is the namespace of every render scenario.
const namespace = "network"

func TestMain(m *testing.M) {
	flag.Parse()
	if !meshfixture.Enabled() {
		os.Exit(m.Run())
	}
	env, cfg, err := meshfixture.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer func() { _ = env.Stop() }()
		apiConfig = cfg
		if apiClient, err = client.New(cfg, client.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "kubectl-kilomesh")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		if kubeconfig, err = writeKubeconfig(dir, cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// writeKubeconfig writes a kubeconfig for a client configuration, with
// namespace network as its context's namespace.
func writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin", Namespace: namespace}
	kc.CurrentContext = "test"
	file := filepath.Join(dir, "kubeconfig")
	return file, clientcmd.WriteToFile(*kc, file)
}

// needAPIServer skips a test without an API server.
func needAPIServer(t testing.TB) {
	t.Helper()
	if apiConfig == nil {
		t.Skip(meshfixture.SkipMessage)
	}
}

// result is what one run of the plugin did.
type result struct {
	code           int
	stdout, stderr string
}

// plugin runs the plugin against the test API server, with the fixed
// clock, and with lookPath finding Graphviz's dot unless the test says
// otherwise.
func plugin(t testing.TB, e *env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if e == nil {
		e = &env{}
	}
	e.stdout, e.stderr = &stdout, &stderr
	if e.clock == nil {
		e.clock = func() time.Time { return now }
	}
	if e.lookPath == nil {
		e.lookPath = exec.LookPath
	}
	code := run(context.Background(), append([]string{"--kubeconfig", kubeconfig}, args...), e)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// loadScenario clears namespace network and loads a render scenario into
// it.
func loadScenario(t testing.TB, name string) *meshfixture.Scenario {
	t.Helper()
	ctx := context.Background()
	if err := meshfixture.Clear(ctx, apiClient, namespace); err != nil {
		t.Fatal(err)
	}
	sc, err := meshfixture.ReadScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := meshfixture.Load(ctx, apiClient, sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// golden compares output with a file of testdata, or rewrites the file
// with -update.
func golden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read the golden file (run go test with -update to write it): %v", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run go test with -update to rewrite it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where two texts differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// ensureDot makes Graphviz's dot available: installed with apt-get when it
// is missing; the test is skipped only where apt-get is not.
func ensureDot(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("dot"); err == nil {
		return bin
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("Graphviz's dot is not installed and apt-get is not available to install it: install Graphviz to check the pictures")
	}
	if os.Geteuid() != 0 && exec.CommandContext(context.Background(), "sudo", "-n", "true").Run() != nil {
		t.Skip("Graphviz's dot is not installed, and apt-get cannot install it without root: install Graphviz to check the pictures")
	}
	install := func(args ...string) error {
		if os.Geteuid() != 0 {
			args = append([]string{"sudo", "-n", "apt-get"}, args...)
		} else {
			args = append([]string{"apt-get"}, args...)
		}
		cmd := exec.CommandContext(context.Background(), args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return err
	}
	lock := []string{"-o", "DPkg::Lock::Timeout=300"}
	if err := install(append(lock, "install", "-y", "--no-install-recommends", "graphviz")...); err != nil {
		if err := install(append(lock, "update")...); err != nil {
			t.Fatal("cannot update apt's package lists to install Graphviz")
		}
		if err := install(append(lock, "install", "-y", "--no-install-recommends", "graphviz")...); err != nil {
			t.Fatal("cannot install Graphviz with apt-get")
		}
	}
	bin, err := exec.LookPath("dot")
	if err != nil {
		t.Fatal("Graphviz is installed but dot is not on PATH")
	}
	return bin
}
