package stack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kilomesh/kilomesh/test/dataplane"
)

// A Machine is what a run of the stack must leave as it found it, in the
// host's own namespaces: its nft tables, network namespaces and links.
type Machine struct {
	NFTables []string
	Netns    []string
	Links    []string
}

// Snapshot reads the machine's nft tables, network namespaces and links.
func Snapshot(ctx context.Context) (Machine, error) {
	var m Machine
	out, err := exec.CommandContext(ctx, "nft", "list", "tables").Output()
	if err != nil {
		return m, fmt.Errorf("nft list tables: %w", err)
	}
	m.NFTables = lines(string(out))
	out, err = exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return m, fmt.Errorf("ip netns list: %w", err)
	}
	for _, l := range lines(string(out)) {
		m.Netns = append(m.Netns, strings.Fields(l)[0])
	}
	out, err = exec.CommandContext(ctx, "ip", "-o", "link", "show").Output()
	if err != nil {
		return m, fmt.Errorf("ip link show: %w", err)
	}
	for _, l := range lines(string(out)) {
		if f := strings.Fields(l); len(f) > 1 {
			m.Links = append(m.Links, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	return m, nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	sort.Strings(out)
	return out
}

// nodePlans reads the plans of a real node (node.sh plan), also once the
// node is down (plan.down).
func nodePlans(dir string) ([]map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "node", "plan*"))
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, f := range files {
		if !strings.HasSuffix(f, "/plan") && !strings.HasSuffix(f, "/plan.down") {
			continue
		}
		b, err := os.ReadFile(f) //nolint:gosec // G304: a plan of the caller's run folder
		if err != nil {
			return nil, err
		}
		p := map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				p[k] = strings.Trim(v, "'")
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Leftovers lists what a stopped stack of folder dir, of the repository at
// top, left on the machine,
// compared with before: what node.sh leftovers finds of its real nodes
// (namespaces, links, routes, cgroups, processes, mounts under the
// folder); nft tables, network namespaces and links of the host that were
// not there before; the record of a data-plane harness of the folder that
// did not close; and every process of the run (its marker in the
// environment, the folder in its command line, a node's cgroup root).
func Leftovers(ctx context.Context, top, dir string, before Machine) ([]string, error) {
	var left []string
	cmd := exec.CommandContext(ctx, filepath.Join(top, "test", "stack", "node.sh"), "leftovers") //nolint:gosec // G204: the repository's own script
	cmd.Env = append(os.Environ(), "STACK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		for _, l := range lines(string(out)) {
			left = append(left, "node.sh leftovers: "+l)
		}
	case err != nil:
		return nil, fmt.Errorf("node.sh leftovers: %w: %s", err, out)
	}
	after, err := Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	plans, err := nodePlans(dir)
	if err != nil {
		return nil, err
	}
	// Only this run's names count: other stacks may come and go on the
	// machine meanwhile. The real nodes' names come from their plans, the
	// data plane's from its record, which names them all while it runs.
	ours := func(name string) bool {
		for _, p := range plans {
			if name == p["NODE_NETNS"] || name == p["HOST_VETH"] {
				return true
			}
		}
		return false
	}
	for _, n := range added(before.Netns, after.Netns) {
		if ours(n) {
			left = append(left, "network namespace "+n)
		}
	}
	for _, l := range added(before.Links, after.Links) {
		if ours(l) {
			left = append(left, "link "+l)
		}
	}
	for _, t := range added(before.NFTables, after.NFTables) {
		left = append(left, "nft table of the host: "+t)
	}
	if st, err := dataplane.LoadState(filepath.Join(dir, "dataplane")); err == nil {
		left = append(left, fmt.Sprintf("the data-plane harness did not close: namespaces %v, wireguard-go %v", st.Namespaces, st.WireGuard))
	}
	procs, err := runProcesses(dir, plans)
	if err != nil {
		return nil, err
	}
	left = append(left, procs...)
	return left, nil
}

// added are the entries of after that before lacks.
func added(before, after []string) []string {
	had := map[string]bool{}
	for _, b := range before {
		had[b] = true
	}
	var out []string
	for _, a := range after {
		if !had[a] {
			out = append(out, a)
		}
	}
	return out
}

// runProcesses lists the processes of a run folder: those carrying its
// marker (stack_start's KILOMESH_STACK_DIR), naming the folder in their
// command line, or living in a real node's cgroup root.
func runProcesses(dir string, plans []map[string]string) ([]string, error) {
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, p := range procs {
		pid := filepath.Base(p)
		if pid == self {
			continue
		}
		environ, _ := os.ReadFile(p + "/environ") //nolint:gosec // G304: a process's file of /proc
		cmdline, _ := os.ReadFile(p + "/cmdline") //nolint:gosec // G304: a process's file of /proc
		cg, _ := os.ReadFile(p + "/cgroup")       //nolint:gosec // G304: a process's file of /proc
		what := strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		switch {
		case bytes.Contains(environ, []byte("KILOMESH_STACK_DIR="+dir+"\x00")):
			out = append(out, "process "+pid+" of the run: "+what)
		case bytes.Contains(cmdline, []byte(dir+"/")):
			out = append(out, "process "+pid+" naming the run folder: "+what)
		default:
			for _, pl := range plans {
				r := pl["CGROOT"]
				if r != "" && (bytes.Contains(cg, []byte(":"+r+"/")) || bytes.Contains(cg, []byte(":"+r+"\n"))) {
					out = append(out, "process "+pid+" in cgroup "+r+": "+what)
					break
				}
			}
		}
	}
	return out, nil
}

// HostSockets lists the sockets of the host's network namespace that
// belong to a process of run folder dir (its marker, or the folder in its
// command line) or to this process, and break the stack's address rule:
// one listening on, bound to or connected to an address other than
// loopback, the real nodes' links (10.224.0.0/12, the host ends being the
// source of the host's connections into the nodes) and their pod CIDRs.
// Processes inside the nodes' and the data plane's namespaces have their
// own tables and are not looked at.
func HostSockets(dir string) ([]string, error) {
	plans, err := nodePlans(dir)
	if err != nil {
		return nil, err
	}
	allowed := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.224.0.0/12"),
	}
	for _, p := range plans {
		if pfx, err := netip.ParsePrefix(p["POD_CIDR"]); err == nil {
			allowed = append(allowed, pfx)
		}
	}
	owners, err := socketOwners(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		bad, err := badSockets(table, owners, allowed)
		if err != nil {
			return nil, err
		}
		out = append(out, bad...)
	}
	return out, nil
}

// badSockets reads one table of /proc/self/net and lists the sockets of
// owners bound to, listening on or connected to an address outside
// allowed.
func badSockets(table string, owners map[string]string, allowed []netip.Prefix) ([]string, error) {
	ok := func(a netip.Addr) bool {
		for _, p := range allowed {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	f, err := os.Open("/proc/self/net/" + table) //nolint:gosec // G304: one of four tables of /proc
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		who, mine := owners[fs[9]]
		local, lerr := procAddr(fs[1])
		remote, rerr := procAddr(fs[2])
		if !mine || lerr != nil || rerr != nil {
			continue
		}
		tcp := strings.HasPrefix(table, "tcp")
		listening := tcp && fs[3] == "0A" || !tcp && remote.Addr().IsUnspecified()
		switch {
		case !ok(local.Addr()) && listening:
			out = append(out, fmt.Sprintf("%s listening on %s (%s)", who, local, table))
		case !ok(local.Addr()):
			out = append(out, fmt.Sprintf("%s bound to %s (%s)", who, local, table))
		case !listening && !remote.Addr().IsUnspecified() && !ok(remote.Addr()):
			out = append(out, fmt.Sprintf("%s connected to %s from %s (%s)", who, remote, local, table))
		}
	}
	return out, sc.Err()
}

// socketOwners maps the socket inodes of the run's processes, and of this
// process, to a description of their owner.
func socketOwners(dir string) (map[string]string, error) {
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	out := map[string]string{}
	for _, p := range procs {
		pid := filepath.Base(p)
		environ, _ := os.ReadFile(p + "/environ") //nolint:gosec // G304: a process's file of /proc
		cmdline, _ := os.ReadFile(p + "/cmdline") //nolint:gosec // G304: a process's file of /proc
		if pid != self && !bytes.Contains(environ, []byte("KILOMESH_STACK_DIR="+dir+"\x00")) && !bytes.Contains(cmdline, []byte(dir+"/")) {
			continue
		}
		comm, _ := os.ReadFile(p + "/comm") //nolint:gosec // G304: a process's file of /proc
		who := "process " + pid + " (" + strings.TrimSpace(string(comm)) + ")"
		fds, _ := filepath.Glob(p + "/fd/*")
		for _, fd := range fds {
			l, err := os.Readlink(fd)
			if err == nil && strings.HasPrefix(l, "socket:[") {
				out[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = who
			}
		}
	}
	return out, nil
}

// procAddr parses an address of /proc/net/{tcp,udp}[6]: hex of the
// address in the kernel's byte order, a colon, hex of the port.
func procAddr(s string) (netip.AddrPort, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return netip.AddrPort{}, err
	}
	// Each 32-bit word is in host (little-endian) order.
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}
