//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Crossplane and kilomesh's packages run as pods on the management
// cluster's real node: Crossplane as its Helm chart runs it, the function
// and the providers as the Deployments Crossplane's package runtime makes.
// The machine reaches every pod address through node.sh's route to the
// node's pod CIDR, so the tests read their metrics at <pod IP>:8080, where
// each serves them.

// crossplaneNamespace is the namespace Crossplane runs in.
func crossplaneNamespace() string {
	if xpNamespace != "" {
		return xpNamespace
	}
	return env.Vars["CROSSPLANE_NAMESPACE"]
}

// runningPod returns the one running pod of the management cluster's
// crossplane namespace with these labels.
func runningPod(ctx context.Context, labels map[string]string) (*corev1.Pod, error) {
	l := &corev1.PodList{}
	if err := mgmt.List(ctx, l, client.InNamespace(crossplaneNamespace()), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var running []corev1.Pod
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running pods with labels %v in %s", len(running), labels, crossplaneNamespace())
	}
	return &running[0], nil
}

// revisionPod returns the running pod of a package revision.
func revisionPod(ctx context.Context, revision string) (*corev1.Pod, error) {
	return runningPod(ctx, map[string]string{"pkg.crossplane.io/revision": revision})
}

// packagePod returns the running pod of a package's active revision.
func packagePod(ctx context.Context, p pkg) (*corev1.Pod, error) {
	rev, err := activeRevision(ctx, p)
	if err != nil {
		return nil, err
	}
	return revisionPod(ctx, rev.GetName())
}

// A metricsAddr is the metrics endpoint of a pod, looked up again every
// few seconds while the run lasts, so that it follows a pod that was
// replaced.
type metricsAddr struct {
	mu   sync.Mutex
	addr string
	find func(context.Context) (*corev1.Pod, error)
}

func (m *metricsAddr) get() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// refresh looks the pod up now.
func (m *metricsAddr) refresh(ctx context.Context) {
	if p, err := m.find(ctx); err == nil {
		m.mu.Lock()
		m.addr = p.Status.PodIP + ":8080"
		m.mu.Unlock()
	}
}

// follow refreshes the address every 2 s until ctx ends.
func (m *metricsAddr) follow(ctx context.Context) {
	m.refresh(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				m.refresh(ctx)
			}
		}
	}()
}

var (
	xpMetrics = &metricsAddr{find: func(ctx context.Context) (*corev1.Pod, error) {
		return runningPod(ctx, map[string]string{"app": "crossplane"})
	}}
	pkmMetrics = &metricsAddr{find: func(ctx context.Context) (*corev1.Pod, error) {
		return packagePod(ctx, pkgs[2])
	}}
)

// crossplaneMetrics is where Crossplane's pod serves its metrics.
func crossplaneMetrics() string { return xpMetrics.get() }

// nodeDir is the folder of a member's real node.
func nodeDir(c string) string { return filepath.Join(env.Dir, c, "node") }

// podLogs returns the log files of every container that ran on the real
// nodes (the kubelets' podLogsDir), for the credentials check.
func podLogs() []string {
	var out []string
	for _, c := range env.Clusters() {
		fs, _ := filepath.Glob(filepath.Join(nodeDir(c), "pod-logs", "*", "*", "*.log"))
		out = append(out, fs...)
	}
	sort.Strings(out)
	return out
}

// linkCrossplaneLog makes logs/crossplane.log of the run folder Crossplane
// pod's log, where the tests look for Crossplane's log lines.
func linkCrossplaneLog(ctx context.Context) error {
	p, err := runningPod(ctx, map[string]string{"app": "crossplane"})
	if err != nil {
		return err
	}
	dir := filepath.Join(nodeDir(env.Management()), "pod-logs", p.Namespace+"_"+p.Name+"_"+string(p.UID), "crossplane")
	link := filepath.Join(env.Dir, "logs", "crossplane.log")
	_ = os.Remove(link)
	return os.Symlink(filepath.Join(dir, strconv.Itoa(int(restarts(p, "crossplane")))+".log"), link)
}

// restarts is how often a container of a pod was restarted.
func restarts(p *corev1.Pod, container string) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.RestartCount
		}
	}
	return 0
}

// containerPIDs returns the processes of a pod's container on the
// management node: those in the cgroup the kubelet made for it
// (<cgroup root>/kubepods/<qos>/pod<uid>/<container id>).
func containerPIDs(p *corev1.Pod, container string) ([]int, error) {
	var id string
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		return nil, fmt.Errorf("pod %s has no container %s", p.Name, container)
	}
	root, err := cgroupRoot(env.Management())
	if err != nil {
		return nil, err
	}
	// Guaranteed pods sit right under kubepods, the others under their QoS.
	base := filepath.Join(cgroupMemory, root, "kubepods")
	procs, _ := filepath.Glob(filepath.Join(base, "*", "pod"+string(p.UID), id, "cgroup.procs"))
	more, _ := filepath.Glob(filepath.Join(base, "pod"+string(p.UID), id, "cgroup.procs"))
	procs = append(procs, more...)
	var out []int
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				out = append(out, pid)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process in the cgroup of container %s of pod %s", container, p.Name)
	}
	return out, nil
}

// Where the cgroup v1 hierarchies, and the memory one, are mounted.
const (
	cgroupFS     = "/sys/fs/cgroup"
	cgroupMemory = cgroupFS + "/memory"
)

// cgroupRoot is the kubelet's cgroup root of a member's real node (its
// plan's CGROOT).
func cgroupRoot(c string) (string, error) {
	b, err := os.ReadFile(filepath.Join(nodeDir(c), "plan"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CGROOT="); ok {
			return strings.Trim(v, "'"), nil
		}
	}
	return "", fmt.Errorf("no CGROOT in the plan of %s's node", c)
}

// killContainer sends SIGKILL to the processes of a pod's container, as
// the kernel's OOM killer or a crash would end them: the kubelet sees the
// container exit and starts it again in the same pod.
func killContainer(p *corev1.Pod, container string) error {
	pids, err := containerPIDs(p, container)
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}
