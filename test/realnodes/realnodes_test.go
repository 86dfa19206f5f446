//go:build realnodes

// Package realnodes checks the real nodes of the local stack
// (test/stack/node.sh, STACK_REAL_NODES=1): pods run, a Deployment behind a
// ClusterIP Service answers a client pod by its ClusterIP and by its DNS
// name, and the stack's teardown leaves nothing on the machine.
//
//	go test -tags realnodes -count=1 -v ./test/realnodes/   (root)
package realnodes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// kernelSettings are what a kubelet sets at start unless told not to; the
// nodes' kubelets must leave the machine's as they are.
var kernelSettings = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostPaths are paths shared by every kubelet and containerd of the
// machine; a node of the stack must not create them.
var hostPaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/var/log/containers", "/var/log/pods"}

func TestRealNodes(t *testing.T) {
	run(t, []string{"cluster-a", "cluster-b"}, func(top, dir string) {
		for _, c := range []string{"cluster-a", "cluster-b"} {
			t.Run(c, func(t *testing.T) { services(t, top, dir, c) })
		}
	})
}

// TestCrossplaneOnRealNodes installs Crossplane by its Helm chart on the
// management cluster's node and kilomesh as docs/install.md says
// (crossplane-up.sh), and a ClusterMesh of three members converges.
func TestCrossplaneOnRealNodes(t *testing.T) {
	members := []string{"cluster-a", "cluster-b", "cluster-c"}
	run(t, members, func(top, dir string) {
		if err := script(t, top, dir, "crossplane-up.sh"); err != nil {
			t.Fatalf("crossplane-up.sh: %v", err)
		}
		kc := func(args ...string) string {
			t.Helper()
			out, err := kubectl(t.Context(), top, dir, "cluster-a", nil, args...)
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return strings.TrimSpace(out)
		}
		if got := kc("-n", "crossplane-system", "get", "deployment", "crossplane", "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}`); got != "Helm" {
			t.Errorf("Deployment crossplane is managed by %q, want Helm", got)
		}
		// The packages' runtimes are pods on the node, their images pulled
		// from the registry at the node's address; nothing runs them as
		// local processes.
		env := readEnv(t, dir)
		registry := env["REGISTRY_NODE_ADDRESS"]
		if registry == "" {
			t.Fatal("no REGISTRY_NODE_ADDRESS in the env file")
		}
		images := kc("-n", "crossplane-system", "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} {.spec.containers[0].image}{"\n"}{end}`)
		for _, want := range []string{"kilomesh-function-kilomesh-", "kilomesh-provider-kilomesh-", "crossplane-contrib-provider-kubernetes-"} {
			found := false
			for _, l := range strings.Split(images, "\n") {
				f := strings.Fields(l)
				if len(f) == 4 && strings.HasPrefix(f[0], want) {
					found = true
					if f[1] != "cluster-a-node" || f[2] != "Running" || !strings.HasPrefix(f[3], registry+"/") {
						t.Errorf("pod %s: node %s, phase %s, image %s; want cluster-a-node, Running, from %s", f[0], f[1], f[2], f[3], registry)
					}
				}
			}
			if !found {
				t.Errorf("no pod %s* in crossplane-system:\n%s", want, images)
			}
		}
		for _, p := range []string{"package-runtime", "function-kilomesh", "provider-kilomesh", "provider-kubernetes", "crossplane", "rbac-manager"} {
			if _, err := os.Stat(filepath.Join(dir, "pids", p+".pid")); err == nil {
				t.Errorf("%s runs as a local process", p)
			}
		}
		// The apiserver calls a webhook of a pod: provider-kubernetes
		// converts a v1alpha1 Object to its stored version.
		obj := "apiVersion: kubernetes.crossplane.io/v1alpha1\nkind: Object\nmetadata: {name: conversion}\nspec:\n  forProvider:\n    manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: default}}\n"
		if out, err := kubectl(t.Context(), top, dir, "cluster-a", strings.NewReader(obj), "apply", "--dry-run=server", "-f", "-"); err != nil {
			t.Errorf("an Object through provider-kubernetes' conversion webhook: %v\n%s", err, out)
		}

		if err := script(t, top, dir, "providerconfigs.sh", append([]string{"network"}, members...)...); err != nil {
			t.Fatalf("providerconfigs.sh: %v", err)
		}
		meshtool := filepath.Join(dir, "meshtool")
		build := exec.CommandContext(t.Context(), "go", "build", "-o", meshtool, "./test/stack/meshtool")
		build.Dir = top
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building meshtool: %v\n%s", err, out)
		}
		tool := func(args ...string) error {
			cmd := exec.CommandContext(t.Context(), meshtool, args...)
			cmd.Env = append(os.Environ(), "STACK_DIR="+dir)
			out, err := cmd.CombinedOutput()
			t.Logf("meshtool %s:\n%s", strings.Join(args, " "), out)
			return err
		}
		if err := tool(append([]string{"seed"}, members...)...); err != nil {
			t.Fatalf("meshtool seed: %v", err)
		}
		if err := script(t, top, dir, "doc.sh", "docs/install.md", "mesh"); err != nil {
			t.Fatalf("docs/install.md mesh: %v", err)
		}
		if err := tool("wait", "--namespace", "network", "--name", "mesh", "--timeout", "5m"); err != nil {
			t.Fatalf("the ClusterMesh did not converge: %v", err)
		}
		for _, c := range members {
			out, err := kubectl(t.Context(), top, dir, c, nil, "get", "peers.kilo.squat.ai", "-o", "name")
			if err != nil || len(strings.Fields(out)) == 0 {
				t.Errorf("Peers in %s: %v %q", c, err, out)
			}
		}
	})
}

// run starts a stack of real nodes for clusters in a new folder, runs
// body, stops the stack and checks that it left nothing on the machine.
func run(t *testing.T, clusters []string, body func(top, dir string)) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("real nodes need root")
	}
	top, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A short folder: containerd's socket paths must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "kmrn") //nolint:usetesting // kept when the test fails, for its logs
	if err != nil {
		t.Fatal(err)
	}
	before := machine(t)

	down := func() error {
		return script(t, top, dir, "down.sh")
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := down(); err != nil {
				t.Errorf("down.sh: %v", err)
			}
		}
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("run folder kept: %s", dir)
		}
	})
	if err := script(t, top, dir, "up.sh", clusters...); err != nil {
		t.Fatalf("up.sh: %v", err)
	}

	body(top, dir)

	stopped = true
	if err := down(); err != nil {
		t.Fatalf("down.sh: %v", err)
	}
	after := machine(t)
	for _, l := range leftovers(t, dir, len(clusters), before, after) {
		t.Errorf("left behind: %s", l)
	}
}

// readEnv reads the stack's env file.
func readEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	return plan(t, filepath.Join(dir, "env"))
}

// services runs the Deployment, the Service and the client pod in one
// cluster and asks through the client.
func services(t *testing.T, top, dir, c string) {
	kc := func(args ...string) string {
		t.Helper()
		out, err := kubectl(t.Context(), top, dir, c, nil, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(out)
	}
	if out, err := kubectl(t.Context(), top, dir, c, strings.NewReader(manifests), "apply", "-f", "-"); err != nil {
		t.Fatalf("applying the manifests: %v\n%s", err, out)
	}
	kc("rollout", "status", "deployment/hello", "--timeout=120s")
	kc("wait", "--for=condition=Ready", "pod/probe", "--timeout=120s")
	// The client answers from its pod address, which the host reaches
	// through the node's link.
	probe := "http://" + kc("get", "pod", "probe", "-o", "jsonpath={.status.podIP}") + ":8080"
	clusterIP := kc("get", "service", "hello", "-o", "jsonpath={.spec.clusterIP}")
	pods := strings.Fields(kc("get", "pods", "-l", "app=hello", "-o", "jsonpath={.items[*].metadata.name}"))
	sort.Strings(pods)
	if len(pods) != 2 {
		t.Fatalf("pods of Deployment hello: %v, want two", pods)
	}
	node := kc("get", "pod", "probe", "-o", "jsonpath={.spec.nodeName}")
	if node != c+"-node" {
		t.Errorf("probe runs on %q, want %s-node", node, c)
	}

	// get asks the client pod to GET u, until the answer holds want or a
	// minute has passed (kube-proxy and CoreDNS take their time to see new
	// Services).
	get := func(u, want string) string {
		t.Helper()
		var last string
		wait.Eventually(t.Context(), t, fmt.Sprintf("GET %s from the client pod holding %q", u, want), time.Minute, 500*time.Millisecond, func() (bool, error) {
			last = ask(probe + "/get?url=" + url.QueryEscape(u))
			return strings.Contains(last, want), fmt.Errorf("answer %q", last)
		})
		return last
	}

	t.Run("ClusterIP", func(t *testing.T) {
		get("http://"+clusterIP+"/", "200\nhello from pod hello-")
		// Both replicas answer behind the ClusterIP, once kube-proxy has
		// both endpoints: requests in bursts, a pause between them.
		seen := map[string]bool{}
		for i := 0; i < 400 && len(seen) < len(pods); i++ {
			body := get("http://"+clusterIP+"/", "200\nhello from pod hello-")
			seen[strings.Fields(strings.TrimPrefix(body, "200\nhello from pod "))[0]] = true
			if i%20 == 19 {
				time.Sleep(500 * time.Millisecond)
			}
		}
		var got []string
		for n := range seen {
			got = append(got, n)
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(pods) {
			t.Errorf("replicas that answered at %s: %v, want %v", clusterIP, got, pods)
		}
	})
	t.Run("DNS", func(t *testing.T) {
		wait.Eventually(t.Context(), t, "hello.default.svc.cluster.local resolved in the client pod to "+clusterIP, time.Minute, 500*time.Millisecond, func() (bool, error) {
			resolved := strings.TrimSpace(ask(probe + "/dns?name=hello.default.svc.cluster.local"))
			return resolved == clusterIP, fmt.Errorf("resolved to %q", resolved)
		})
		get("http://hello.default.svc.cluster.local/", "200\nhello from pod hello-")
		// The short name, through the pod's search path.
		get("http://hello/", "200\nhello from pod hello-")
	})
	t.Run("LogsAndExec", func(t *testing.T) {
		// The apiserver reaches the kubelet at the node's InternalIP with
		// its client certificate.
		out, err := kubectl(t.Context(), top, dir, c, nil, "-n", "kube-system", "logs", "deployment/coredns")
		if err != nil || !strings.Contains(out, "CoreDNS-") {
			t.Errorf("kubectl logs of CoreDNS: %v\n%s", err, out)
		}
		out, err = kubectl(t.Context(), top, dir, c, nil, "-n", "kube-system", "exec", "deployment/coredns", "--", "/usr/local/bin/coredns", "-version")
		if err != nil || !strings.Contains(out, "CoreDNS-1.14.7") {
			t.Errorf("kubectl exec in CoreDNS: %v\n%s", err, out)
		}
	})
	t.Run("APIServer", func(t *testing.T) {
		// The kubernetes Service reaches the apiserver through the node's
		// forwarder, with the pod's ServiceAccount token and CA.
		wait.Eventually(t.Context(), t, "the apiserver's version from the client pod", time.Minute, 500*time.Millisecond, func() (bool, error) {
			last := ask(probe + "/api?path=/version")
			return strings.Contains(last, `"gitVersion": "v1.34.4"`), fmt.Errorf("answer %q", last)
		})
	})
}

// ask GETs u from the host and returns the body, or the error as text.
func ask(u string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

const manifests = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
      - name: hello
        image: stack.local/hello:v1
        imagePullPolicy: Never
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: hello, namespace: default}
spec:
  selector: {app: hello}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: probe, namespace: default}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532}
  containers:
  - name: probe
    image: stack.local/probe:v1
    imagePullPolicy: Never
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`

// script runs test/stack/NAME with the run folder and real nodes.
func script(t *testing.T, top, dir, name string, args ...string) error {
	t.Helper()
	// Not the test's context: down.sh also runs in a cleanup, after it ends.
	cmd := exec.CommandContext(context.Background(), filepath.Join(top, "test", "stack", name), args...)
	cmd.Env = append(os.Environ(), "STACK_DIR="+dir, "STACK_REAL_NODES=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	return err
}

func kubectl(ctx context.Context, top, dir, c string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(top, ".cache", "bin", "kubectl"),
		append([]string{"--kubeconfig", filepath.Join(dir, c, "kubeconfig")}, args...)...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// state is what the check compares before and after a run.
type state struct {
	nftTables string
	netns     map[string]bool
	links     map[string]bool
	kernel    map[string]string
	paths     map[string]bool
}

func machine(t *testing.T) state {
	t.Helper()
	s := state{netns: map[string]bool{}, links: map[string]bool{}, kernel: map[string]string{}, paths: map[string]bool{}}
	out, err := exec.CommandContext(t.Context(), "nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v\n%s", err, out)
	}
	s.nftTables = string(out)
	out, err = exec.CommandContext(t.Context(), "ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			s.netns[f[0]] = true
		}
	}
	out, err = exec.CommandContext(t.Context(), "ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			s.links[strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]] = true
		}
	}
	for _, k := range kernelSettings {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		s.kernel[k] = strings.TrimSpace(string(b))
	}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		s.paths[p] = err == nil
	}
	return s
}

// leftovers compares the machine after the run with before it, and looks
// for anything of the run's nodes: namespaces, links, routes, cgroups,
// mounts, processes.
func leftovers(t *testing.T, dir string, clusters int, before, after state) []string {
	t.Helper()
	var left []string
	if after.nftTables != before.nftTables {
		left = append(left, fmt.Sprintf("nft tables of the host: %q, before: %q", after.nftTables, before.nftTables))
	}
	for n := range after.netns {
		if !before.netns[n] {
			left = append(left, "network namespace "+n)
		}
	}
	for l := range after.links {
		if !before.links[l] {
			left = append(left, "link "+l)
		}
	}
	for k, v := range after.kernel {
		if before.kernel[k] != v {
			left = append(left, fmt.Sprintf("kernel setting %s: %s, before: %s", k, v, before.kernel[k]))
		}
	}
	for p, ok := range after.paths {
		if ok && !before.paths[p] {
			left = append(left, "host path "+p)
		}
	}
	plans, _ := filepath.Glob(filepath.Join(dir, "*", "node", "plan*"))
	if len(plans) != clusters {
		left = append(left, fmt.Sprintf("node plans: %v, want one per cluster", plans))
	}
	var cgroots []string
	for _, f := range plans {
		p := plan(t, f)
		cgroots = append(cgroots, p["CGROOT"])
		out, _ := exec.CommandContext(t.Context(), "ip", "-o", "route", "show", p["POD_CIDR"]).CombinedOutput()
		if strings.TrimSpace(string(out)) != "" {
			left = append(left, "route "+strings.TrimSpace(string(out)))
		}
		hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
		for _, h := range hierarchies {
			if _, err := os.Stat(h + p["CGROOT"]); err == nil {
				left = append(left, "cgroup "+h+p["CGROOT"])
			}
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			left = append(left, "mount "+f[4])
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, _ := os.ReadFile(p + "/environ")
		cmdline, _ := os.ReadFile(p + "/cmdline")
		cg, _ := os.ReadFile(p + "/cgroup")
		switch {
		case bytes.Contains(env, []byte("KILOMESH_STACK_DIR="+dir+"\x00")):
			left = append(left, "process "+p+" of the run: "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		case bytes.Contains(cmdline, []byte(dir+"/")):
			left = append(left, "process "+p+" naming the run folder: "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		default:
			for _, r := range cgroots {
				if bytes.Contains(cg, []byte(":"+r+"/")) || bytes.Contains(cg, []byte(":"+r+"\n")) {
					left = append(left, "process "+p+" in cgroup "+r)
					break
				}
			}
		}
	}
	return left
}

// plan reads a node's plan file (NAME='value' lines).
func plan(t *testing.T, f string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			p[k] = strings.Trim(v, "'")
		}
	}
	return p
}
