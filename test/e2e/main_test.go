//go:build e2e

// Package e2e tests kilomesh end to end on the local stack (test/stack):
// several kube-apiservers as member clusters, Crossplane core, provider-
// kubernetes, provider-kilomesh and function-kilomesh as local processes,
// installed from their packages by Crossplane's package manager. Every
// assertion reads the member clusters' API servers.
//
//	go test -tags e2e -count=1 -v -timeout 120m ./test/e2e/...
//
// TestMain brings the stack up in E2E_STACK_DIR (default .run/e2e) and down
// at the end, with the data-plane harness (test/dataplane) standing in for
// Kilo's agent on every Node. Environment:
//
//	E2E_STACK_DIR  run folder of the stack
//	E2E_REUSE=1    use the stack running in E2E_STACK_DIR, and leave it up
//	               (TestUpgradeAndUninstall uninstalls kilomesh from it)
//	E2E_KEEP=1     leave the stack up after the tests (for debugging)
//	E2E_MODES      delivery modes to test (default "Objects PeerSet")
//	E2E_OUTAGE     how long a member API server stays down (default 2m)
//	E2E_REPS       batches of changes of each kind measured per mode (default 3; Objects 1)
//	E2E_BATCH      node changes made at once in a batch (default 8; Objects 24)
//	E2E_GAP        pause between two measured batches (default 20s)
//	E2E_CONVERGE   how long a mesh may take to converge (default 3m)
//	E2E_RESTORE_REPS     Peers broken by hand per kind, in PeerSet delivery (default 3)
//	E2E_RESTORE_OBJECTS  how long Objects delivery gets to restore one (default 30s)
//	E2E_SCALE_NODES      nodes per member of the large mesh (default 50)
//	E2E_KNOWN_BUGS=1  run the checks of known bugs instead of skipping them
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kilomesh/kilomesh/test/stack"
)

// The clusters of the stack: cluster-a is the management cluster and a
// member; cluster-d has no Kilo Peer CRD; cluster-e and cluster-f are
// members of the large mesh only (TestScale), with no data plane.
var clusters = []string{"cluster-a", "cluster-b", "cluster-c", "cluster-d", "cluster-e", "cluster-f"}

const noPeerCRD = "cluster-d"

// Shared by every test.
var (
	top     string
	env     *stack.Env
	kube    map[string]client.WithWatch
	rec     *recorder
	xrTrace *xrTracer
	mgmt    client.WithWatch
	report  *reporter
	started = time.Now()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	// Deferred first, so it runs last: the stack is stopped before.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	top, err = filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := os.Getenv("E2E_STACK_DIR")
	if dir == "" {
		dir = filepath.Join(top, ".run", "e2e")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("STACK_DIR", dir)
	if os.Getenv("E2E_REUSE") != "1" {
		if os.Getenv("E2E_KEEP") != "1" {
			defer func() {
				if err := script(ctx, "down.sh"); err != nil {
					fmt.Fprintln(os.Stderr, "e2e: stopping the stack:", err)
				}
			}()
		}
		t0 := time.Now()
		if err := scriptEnv(ctx, []string{"STACK_NO_PEER_CRD=" + noPeerCRD}, "up.sh", clusters...); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cannot start the stack:", err)
			return 1
		}
		t1 := time.Now()
		if err := script(ctx, "crossplane-up.sh"); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cannot install kilomesh:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: stack up in %.1fs, kilomesh installed in %.1fs\n", t1.Sub(t0).Seconds(), time.Since(t1).Seconds())
	}
	env, err = stack.Load(dir)
	if err == nil {
		kube, err = env.Clients()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	mgmt = kube[env.Management()]
	var members []string
	for _, c := range clusters {
		if c != noPeerCRD {
			members = append(members, c)
		}
	}
	rec, err = newRecorder(ctx, env, members)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if xrTrace, err = traceXREvents(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if dp, err = startDataplane(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer dp.Close()
	report = newReporter(filepath.Join(dir, "e2e-report.txt"))
	if pluginBin, err = buildPlugin(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	xpBreaker = watchBreaker(ctx)
	code := m.Run()
	report.write()
	return code
}

// script runs a script of test/stack with the stack's settings, its
// progress (stderr) going to the test's output. Its stdout is dropped: up.sh
// prints the env file there, tokens included.
func script(ctx context.Context, name string, args ...string) error {
	return scriptEnv(ctx, nil, name, args...)
}

func scriptEnv(ctx context.Context, extra []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(top, "test", "stack", name), args...)
	cmd.Env = append(os.Environ(), extra...)
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// pluginBin is kubectl-kilomesh, built from this tree.
var pluginBin string

// buildPlugin builds kubectl-kilomesh into dir/bin.
func buildPlugin(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bin", "kubectl-kilomesh")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-kilomesh")
	cmd.Dir = top
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cannot build kubectl-kilomesh: %w: %s", err, out)
	}
	return bin, nil
}

// kilomesh runs kubectl-kilomesh against the management cluster, as its
// admin, the way a user runs `kubectl kilomesh`, and returns its output and
// exit code (0 converged or no finding, 1 could not run, 2 not converged or
// an error found).
func kilomesh(ctx context.Context, args ...string) (string, int) {
	cmd := exec.CommandContext(ctx, pluginBin, append([]string{"--kubeconfig", env.Kubeconfig(env.Management())}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		code = 1
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
	}
	return string(out), code
}

// kubectl runs the stack's kubectl against a cluster as its admin.
func kubectl(ctx context.Context, cluster string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(env.Vars["STACK_BIN"], "kubectl"), append([]string{"--kubeconfig", env.Kubeconfig(cluster)}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// envDuration reads a duration setting.
func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// envInt reads a count setting.
func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// knownBug reports err, the symptom of a bug that is reported but not
// fixed yet: the test is skipped with "BUG:" and the description, unless
// E2E_KNOWN_BUGS=1, which makes it fail. Once the bug is fixed err is nil
// and the check passes.
func knownBug(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("E2E_KNOWN_BUGS") == "1" {
		t.Errorf("%s: %v", what, err)
		return
	}
	t.Skipf("BUG: %s: %v (E2E_KNOWN_BUGS=1 makes this fail)", what, err)
}
