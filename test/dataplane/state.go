package dataplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateDir holds, per harness folder, a record of what the harness made:
// for probes from another process (LoadState), and for the next harness of
// the same folder to clean up after one that died (cleanLeftovers). It is
// outside the folder, which the stack's up.sh empties, and on the tmpfs
// that, like network namespaces, does not outlive a reboot.
const stateDir = "/run/kilomesh-dataplane"

// statePath is the record of the harness of folder dir.
func statePath(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(stateDir, hex.EncodeToString(sum[:8])+".json")
}

// State is what the harness has made.
type State struct {
	PID int `json:"pid"`
	// Namespaces are every network namespace of the harness, the hub's
	// first; none without a data plane.
	Namespaces []string `json:"namespaces"`
	// WireGuard are the running wireguard-go processes.
	WireGuard []Process `json:"wireguard,omitempty"`
	// Adopted are the links the harness added to namespaces it did not
	// make (real nodes); the namespaces themselves are not its own.
	Adopted []Link `json:"adopted,omitempty"`
	// Pods are the pod addresses of the machines.
	Pods []Pod `json:"pods"`
}

// A Link is a link the harness added to a network namespace it did not
// make.
type Link struct {
	Netns string `json:"netns"`
	Name  string `json:"name"`
}

// A Process is a wireguard-go process and its interface.
type Process struct {
	PID   int    `json:"pid"`
	Iface string `json:"iface"`
}

// A Pod is the pod address of one node's machine.
type Pod struct {
	Cluster string     `json:"cluster"`
	Node    string     `json:"node"`
	Netns   string     `json:"netns"`
	Addr    netip.Addr `json:"addr"`
	// Granularity is the node's kilo.squat.ai/granularity.
	Granularity string `json:"granularity,omitempty"`
}

func (p Pod) String() string { return p.Cluster + "/" + p.Node + " (" + p.Addr.String() + ")" }

// state describes the harness now.
func (h *Harness) state() State {
	s := State{PID: os.Getpid()}
	if h.cfg.dataPlane() {
		s.Namespaces = []string{h.hub}
	}
	for _, mb := range h.members {
		for _, m := range mb.machines {
			if m.adopted {
				s.Adopted = append(s.Adopted, Link{Netns: m.ns, Name: m.pubLink})
			} else {
				s.Namespaces = append(s.Namespaces, m.ns)
			}
			if m.router != "" {
				s.Namespaces = append(s.Namespaces, m.router)
			}
			if m.wg != nil && m.wg.Process != nil {
				s.WireGuard = append(s.WireGuard, Process{PID: m.wg.Process.Pid, Iface: m.iface})
			}
			if m.pod.IsValid() {
				s.Pods = append(s.Pods, Pod{Cluster: m.cluster, Node: m.node, Netns: m.ns, Addr: m.pod, Granularity: m.granularity})
			}
		}
	}
	sortPods(s.Pods)
	if len(s.Namespaces) > 1 {
		sort.Strings(s.Namespaces[1:])
	}
	return s
}

func sortPods(ps []Pod) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Cluster != ps[j].Cluster {
			return ps[i].Cluster < ps[j].Cluster
		}
		return ps[i].Node < ps[j].Node
	})
}

// saveState writes the state file. The caller holds h.machines.
func (h *Harness) saveState() error {
	b, err := json.MarshalIndent(h.state(), "", "  ")
	if err != nil {
		return err
	}
	path := statePath(h.cfg.Dir)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("cannot write the harness's state: %w", err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("cannot write the harness's state: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

func (h *Harness) saveStateLogged() {
	if err := h.saveState(); err != nil {
		h.cfg.Log("%v", err)
	}
}

// Pods are the pod addresses of every machine, by cluster and node name.
func (h *Harness) Pods() []Pod {
	h.machines.Lock()
	defer h.machines.Unlock()
	return h.state().Pods
}

// Device reads the WireGuard interface of a node: nil while the node has
// never led its segment.
func (h *Harness) Device(ctx context.Context, cluster, node string) (*Device, error) {
	for _, mb := range h.members {
		if mb.Name != cluster {
			continue
		}
		h.machines.Lock()
		m := mb.machines[node]
		var iface string
		if m != nil && m.wg != nil {
			iface = m.iface
		}
		h.machines.Unlock()
		if m == nil {
			return nil, fmt.Errorf("no machine for %s/%s", cluster, node)
		}
		if iface == "" {
			return nil, nil //nolint:nilnil // no interface is no error
		}
		return getDevice(ctx, iface)
	}
	return nil, fmt.Errorf("no member %s", cluster)
}

// Note says why the agent of a node runs nothing, or nothing.
func (h *Harness) Note(cluster, node string) string {
	h.machines.Lock()
	defer h.machines.Unlock()
	for _, mb := range h.members {
		if m := mb.machines[node]; mb.Name == cluster && m != nil {
			return m.note
		}
	}
	return ""
}

// LoadState reads the record of the harness of a folder.
func LoadState(dir string) (*State, error) {
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		return nil, fmt.Errorf("cannot read the data-plane harness's state (does it run?): %w", err)
	}
	s := &State{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", statePath(dir), err)
	}
	return s, nil
}

// alive tells whether a process exists and is no zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z'
}

// cleanLeftovers removes what a harness that died left in dir: its
// wireguard-go processes (by PID, only while the PID still runs
// wireguard-go for that interface) and its namespaces. A harness that still
// runs in dir is an error.
func cleanLeftovers(ctx context.Context, dir string, log func(string, ...any)) error {
	s, err := LoadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.PID != os.Getpid() && alive(s.PID) {
		return fmt.Errorf("a data-plane harness runs in %s already (pid %d)", dir, s.PID)
	}
	for _, p := range s.WireGuard {
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "wireguard-go") || !strings.Contains(string(cmd), p.Iface) {
			continue
		}
		log("stopping wireguard-go %d (%s) of a harness that stopped without cleaning up", p.PID, p.Iface)
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	// The harness's links in namespaces it did not make go before its hub
	// (which would take them along), so that they are named in the log.
	// Its routes there went with its links and with wireguard-go's
	// interfaces.
	for _, l := range s.Adopted {
		if !netnsExists(l.Netns) || ipBatch(ctx, l.Netns, []string{"link show " + l.Name}) != nil {
			continue
		}
		log("deleting link %s in network namespace %s of a harness that stopped without cleaning up", l.Name, l.Netns)
		if err := ipBatch(ctx, l.Netns, []string{"link del " + l.Name}); err != nil {
			return err
		}
	}
	for i := len(s.Namespaces) - 1; i >= 0; i-- {
		ns := s.Namespaces[i]
		if !netnsExists(ns) {
			continue
		}
		log("deleting network namespace %s of a harness that stopped without cleaning up", ns)
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := ipCmd(ctx, "netns", "delete", ns)
		cancel()
		if err != nil {
			return err
		}
	}
	return os.Remove(statePath(dir))
}

// Dump describes every machine: its agent's note, addresses, routes and
// WireGuard peers, for a test that fails.
func (h *Harness) Dump(ctx context.Context) string {
	h.machines.Lock()
	defer h.machines.Unlock()
	var b strings.Builder
	for _, mb := range h.members {
		names := make([]string, 0, len(mb.machines))
		for n := range mb.machines {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			mb.machines[n].dump(ctx, &b)
		}
	}
	return b.String()
}

func (m *machine) dump(ctx context.Context, b *strings.Builder) {
	fmt.Fprintf(b, "%s/%s (namespace %s)", m.cluster, m.node, m.ns)
	if m.note != "" {
		fmt.Fprintf(b, ": runs nothing: %s", m.note)
	}
	if m.skipped != "" {
		fmt.Fprintf(b, ": Kilo would not write: %s", m.skipped)
	}
	if m.adopted {
		fmt.Fprintf(b, ": a namespace of its own (link %s added)", m.pubLink)
	}
	if len(m.held) > 0 {
		fmt.Fprintf(b, ": routes left to the node: %v", m.held)
	}
	b.WriteString("\n")
	if m.router != "" {
		fmt.Fprintf(b, "  behind NAT %s (namespace %s)\n", m.routerPublic, m.router)
	}
	for _, args := range [][]string{{"-br", "address"}, {"route"}} {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"-n", m.ns}, args...)...).CombinedOutput() //nolint:gosec // G204: the harness's own namespace
		if err != nil {
			fmt.Fprintf(b, "  ip %s: %v\n", strings.Join(args, " "), err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	if m.wg == nil {
		return
	}
	d, err := getDevice(ctx, m.iface)
	if err != nil {
		fmt.Fprintf(b, "  wireguard: %v\n", err)
		return
	}
	fmt.Fprintf(b, "  wireguard %s: key %s, port %d\n", m.iface, d.PublicKey(), d.ListenPort)
	for _, p := range d.Peers {
		fmt.Fprintf(b, "    peer %s endpoint %s allowed %v keepalive %d handshake %s\n", p.PublicKey, p.Endpoint, p.AllowedIPs, p.Keepalive, p.LastHandshake.Format(time.TimeOnly))
	}
}
