//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kilomesh/kilomesh/test/stack"
)

// The pods whose CPU and memory the run follows, by the labels of their
// pods in Crossplane's namespace.
var usagePods = []struct {
	name   string
	labels map[string]string
}{
	{"function-kilomesh", map[string]string{"pkg.crossplane.io/function": "kilomesh-function-kilomesh"}},
	{"provider-kilomesh", map[string]string{"pkg.crossplane.io/provider": "kilomesh-provider-kilomesh"}},
	{"provider-kubernetes", map[string]string{"pkg.crossplane.io/provider": "crossplane-contrib-provider-kubernetes"}},
	{"crossplane", map[string]string{"app": "crossplane"}},
}

// A usageSampler reads, every few seconds, the CPU time (cpuacct.usage)
// and resident memory (memory.stat's total_rss) of the pods' cgroups on
// the management node, and sums them up per phase of the run: the large
// mesh present (the phase Scale), or no ClusterMesh at all (kilomesh installed
// and idle). Figures go into the report.
type usageSampler struct {
	mu     sync.Mutex
	phases map[string]map[string]*usage // phase -> pod -> usage
	last   map[string]cgroupSample      // pod -> previous sample
}

type cgroupSample struct {
	uid   string
	at    time.Time
	cpuNS uint64
}

type usage struct {
	cpu, wall time.Duration
	rssMax    uint64
	rssSum    uint64
	n         int
}

const (
	phaseIdle  = "installed, no ClusterMesh"
	phaseScale = "the 5 x 50 mesh (phase Scale)"
)

var usageOf *usageSampler

func sampleUsage(ctx context.Context) *usageSampler {
	s := &usageSampler{phases: map[string]map[string]*usage{}, last: map[string]cgroupSample{}}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			s.sample(ctx)
		}
	}()
	return s
}

// phase names what the control plane does now, or "" for a phase the
// report leaves out.
func phase(ctx context.Context) string {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(stack.MeshGVK.GroupVersion().WithKind("ClusterMeshList"))
	if err := mgmt.List(ctx, l); err != nil {
		return ""
	}
	switch {
	case len(l.Items) == 0:
		return phaseIdle
	case len(l.Items) == 1 && l.Items[0].GetNamespace() == smallScale.ref.ns:
		return phaseScale
	}
	return ""
}

func (s *usageSampler) sample(ctx context.Context) {
	ph := phase(ctx)
	root, err := cgroupRoot(env.Management())
	if err != nil {
		return
	}
	for _, p := range usagePods {
		pod, err := runningPod(ctx, p.labels)
		if err != nil {
			continue
		}
		cpu, rss, err := podCgroup(root, pod)
		if err != nil {
			continue
		}
		now := cgroupSample{uid: string(pod.UID), at: time.Now(), cpuNS: cpu}
		s.mu.Lock()
		prev, ok := s.last[p.name]
		s.last[p.name] = now
		if ph != "" && ok && prev.uid == now.uid && cpu >= prev.cpuNS {
			if s.phases[ph] == nil {
				s.phases[ph] = map[string]*usage{}
			}
			u := s.phases[ph][p.name]
			if u == nil {
				u = &usage{}
				s.phases[ph][p.name] = u
			}
			u.cpu += time.Duration(cpu - prev.cpuNS)
			u.wall += now.at.Sub(prev.at)
			u.rssMax = max(u.rssMax, rss)
			u.rssSum += rss
			u.n++
		}
		s.mu.Unlock()
	}
}

// podCgroup reads a pod's CPU time in ns and its resident memory in bytes
// from its cgroups (cgroup v1, the kubelet's cgroupfs layout).
func podCgroup(root string, p *corev1.Pod) (uint64, uint64, error) {
	var dirs []string
	for _, h := range []string{"cpuacct", "memory"} {
		base := filepath.Join(cgroupFS, h, root, "kubepods")
		ds, _ := filepath.Glob(filepath.Join(base, "*", "pod"+string(p.UID)))
		more, _ := filepath.Glob(filepath.Join(base, "pod"+string(p.UID)))
		ds = append(ds, more...)
		if len(ds) != 1 {
			return 0, 0, fmt.Errorf("the %s cgroup of pod %s: %v", h, p.Name, ds)
		}
		dirs = append(dirs, ds[0])
	}
	b, err := os.ReadFile(filepath.Join(dirs[0], "cpuacct.usage"))
	if err != nil {
		return 0, 0, err
	}
	cpu, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, err
	}
	b, err = os.ReadFile(filepath.Join(dirs[1], "memory.stat"))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "total_rss "); ok {
			rss, err := strconv.ParseUint(v, 10, 64)
			return cpu, rss, err
		}
	}
	return 0, 0, fmt.Errorf("no total_rss in the memory.stat of pod %s", p.Name)
}

// text is the report's section.
func (s *usageSampler) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	phases := make([]string, 0, len(s.phases))
	for ph := range s.phases {
		phases = append(phases, ph)
	}
	sort.Strings(phases)
	for _, ph := range phases {
		fmt.Fprintf(&b, "  %s:\n", ph)
		for _, p := range usagePods {
			u := s.phases[ph][p.name]
			if u == nil || u.wall == 0 {
				continue
			}
			fmt.Fprintf(&b, "    %-20s CPU %5.2f%% of a core over %4.0fs, RSS mean %5.1f MiB, max %5.1f MiB (%d samples)\n",
				p.name, 100*u.cpu.Seconds()/u.wall.Seconds(), u.wall.Seconds(), float64(u.rssSum)/float64(u.n)/(1<<20), float64(u.rssMax)/(1<<20), u.n)
		}
	}
	return b.String()
}
