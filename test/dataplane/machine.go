package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// The interfaces of a machine: its cluster network, the shared network
// between clusters, and its pod address.
const (
	privateLink = "eth0"
	publicLink  = "eth1"
	// EchoPort is the UDP port every pod address echoes on.
	EchoPort = 7
)

// A machine is the network namespace that stands for one Node.
type machine struct {
	cluster, node string
	ns            string
	index         int
	iface         string // WireGuard interface, once the node leads
	granularity   string
	// adopted is set for a node whose namespace the harness did not make
	// (a real node): the harness adds only its link to the network between
	// clusters there, and removes only what it added.
	adopted bool
	// privLink is the link of the node's internal IP, through which Kilo
	// routes to the other nodes of its location; empty in an adopted
	// namespace, whose own link the harness leaves alone. pubLink is the
	// link to the network between clusters.
	privLink, pubLink string
	pod               netip.Addr
	private           []netip.Prefix
	public            []netip.Addr
	echo              net.PacketConn

	wg      *exec.Cmd
	wgDone  chan struct{}
	up      bool
	addr    netip.Prefix
	routes  map[netip.Prefix]Route
	links   map[netip.Addr]bool // routes to the other machines' public addresses
	note    string              // why the agent runs nothing
	skipped string              // a change Kilo leaves unwritten
	// held are the destinations Kilo would route that an adopted
	// namespace routes already on its own (its CNI bridge, its link):
	// the harness leaves those routes to the node.
	held []netip.Prefix

	// router is the namespace of the machine's NAT, if it is behind one;
	// routerPublic the NAT's public address.
	router       string
	routerPublic netip.Addr
}

// reap notices a wireguard-go that exited, so that the next apply starts
// it again.
func (m *machine) reap(log func(string, ...any)) {
	if m.wg == nil {
		return
	}
	select {
	case <-m.wgDone:
		log("%s/%s: wireguard-go exited; starting it again", m.cluster, m.node)
		m.removeSocket()
		m.wg, m.up, m.addr, m.routes = nil, false, netip.Prefix{}, map[netip.Prefix]Route{}
	default:
	}
}

// addresses are the addresses a Node's machine has: its pod address (the
// first of its pod CIDR), its internal IP on the cluster network (Kilo's
// internal-ip, else the InternalIPs of its status), and on the network
// between clusters every other address its Node names: ExternalIPs and the
// hosts of its endpoints (names through hosts).
func addresses(n *corev1.Node, hosts map[string]netip.Addr) (pod netip.Addr, private []netip.Prefix, public []netip.Addr) {
	if p, err := netip.ParsePrefix(n.Spec.PodCIDR); err == nil {
		pod = p.Masked().Addr().Next()
	}
	own := map[netip.Addr]bool{}
	if p := hostPrefix(n.Annotations[kilov1alpha1.AnnotationInternalIP]); p.IsValid() {
		private = append(private, p)
		own[p.Addr()] = true
	}
	var pub []netip.Addr
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		switch a.Type { //nolint:exhaustive // the others are no addresses of the machine
		case corev1.NodeInternalIP:
			if !own[ip] {
				private = append(private, netip.PrefixFrom(ip, ip.BitLen()))
				own[ip] = true
			}
		case corev1.NodeExternalIP:
			pub = append(pub, ip)
		}
	}
	for _, k := range []string{kilov1alpha1.AnnotationEndpoint, kilov1alpha1.AnnotationForceEndpoint, kilov1alpha1.AnnotationClustermeshEndpoint} {
		e := parseEndpoint(n.Annotations[k])
		switch {
		case e == nil:
		case e.DNS != "":
			if a, ok := hosts[hostOf(e.DNS)]; ok {
				pub = append(pub, a)
			}
		default:
			pub = append(pub, e.Addr.Addr())
		}
	}
	for _, a := range pub {
		if a.Is4() && a.IsGlobalUnicast() && !own[a] && !slices.Contains(public, a) {
			public = append(public, a)
		}
	}
	return pod, private, public
}

// ensureMachine makes the machine of a Node, or brings its addresses to the
// Node's.
func (mb *member) ensureMachine(ctx context.Context, n *corev1.Node) error {
	h := mb.h
	pod, private, public := addresses(n, h.hosts)
	m := mb.machines[n.Name]
	if m == nil {
		h.mu.Lock()
		h.next++
		idx := h.next
		h.mu.Unlock()
		m = &machine{cluster: mb.Name, node: n.Name, ns: h.run + "-" + mb.Name + "-" + n.Name, index: idx, iface: h.run + "w" + strconv.Itoa(idx), privLink: privateLink, pubLink: publicLink, routes: map[netip.Prefix]Route{}, links: map[netip.Addr]bool{}}
		var err error
		if ns, ok := mb.Netns[n.Name]; ok {
			m.ns, m.adopted, m.privLink, m.pubLink = ns, true, "", h.run+"-pub"
			err = h.adoptMachine(ctx, m)
		} else {
			// Whether a machine is behind NAT is decided once, when it
			// is made.
			var nat *NAT
			if h.cfg.NAT != nil {
				nat = h.cfg.NAT(n)
			}
			err = h.makeMachine(ctx, mb, m, pod, nat)
		}
		if err != nil {
			h.removeMachine(ctx, m)
			return err
		}
		mb.machines[n.Name] = m
	}
	m.granularity = n.Annotations[kilov1alpha1.AnnotationGranularity]
	var cmds []string
	if m.adopted {
		// The node's internal IP is on its own link already.
		private = nil
	}
	for _, p := range m.private {
		if !slices.Contains(private, p) {
			cmds = append(cmds, fmt.Sprintf("address del %s dev %s", p, m.privLink))
		}
	}
	for _, p := range private {
		if !slices.Contains(m.private, p) {
			cmds = append(cmds, fmt.Sprintf("address add %s dev %s", p, m.privLink))
		}
	}
	h.mu.Lock()
	var keep []netip.Addr
	for _, a := range m.public {
		if slices.Contains(public, a) {
			keep = append(keep, a)
			continue
		}
		cmds = append(cmds, fmt.Sprintf("address del %s/32 dev %s", a, m.pubLink))
		delete(h.public, a)
	}
	for _, a := range public {
		if slices.Contains(m.public, a) {
			continue
		}
		if owner, taken := h.public[a]; taken {
			h.cfg.Log("%s/%s: address %s is %s's already; not given to this node", mb.Name, n.Name, a, owner)
			continue
		}
		h.public[a] = mb.Name + "/" + n.Name
		keep = append(keep, a)
		cmds = append(cmds, fmt.Sprintf("address add %s/32 dev %s", a, m.pubLink))
	}
	h.mu.Unlock()
	m.private, m.public = private, keep
	return ipBatch(ctx, m.ns, cmds)
}

// makeMachine makes the namespace of a machine: links to its cluster's
// network and to the network between clusters (through a router of its own
// when nat is set), in the hub namespace; its pod address on lo, with an
// echo service. ARP answers only for addresses of the link asked
// (arp_ignore), so that no packet reaches a pod address but through the
// routes Kilo sets.
func (h *Harness) makeMachine(ctx context.Context, mb *member, m *machine, pod netip.Addr, nat *NAT) error {
	if err := ipCmd(ctx, "netns", "add", m.ns); err != nil {
		return err
	}
	if err := sysctls(m.ns, [][2]string{
		{"ipv4/ip_forward", "1"},
		{"ipv4/conf/all/arp_ignore", "1"},
		{"ipv4/conf/default/arp_ignore", "1"},
		{"ipv4/conf/all/rp_filter", "0"},
		{"ipv4/conf/default/rp_filter", "0"},
	}); err != nil {
		return err
	}
	i, e := "i"+strconv.Itoa(m.index), "e"+strconv.Itoa(m.index)
	if err := ipBatch(ctx, h.hub, []string{
		fmt.Sprintf("link add %s type veth peer name %s netns %s", i, privateLink, m.ns),
		fmt.Sprintf("link set %s master %s up", i, mb.bridge()),
	}); err != nil {
		return err
	}
	if nat == nil {
		if err := ipBatch(ctx, h.hub, []string{
			fmt.Sprintf("link add %s type veth peer name %s netns %s", e, publicLink, m.ns),
			fmt.Sprintf("link set %s master pub up", e),
		}); err != nil {
			return err
		}
	} else {
		// The router's address is a public address like a machine's: the
		// other machines get a route to it.
		h.mu.Lock()
		owner, taken := h.public[nat.Public]
		if !taken {
			h.public[nat.Public] = mb.Name + "/" + m.node
			m.routerPublic = nat.Public
		}
		h.mu.Unlock()
		if taken {
			return fmt.Errorf("%s/%s: the NAT's address %s is %s's already", mb.Name, m.node, nat.Public, owner)
		}
		if err := h.makeRouter(ctx, m, nat); err != nil {
			return err
		}
	}
	cmds := []string{"link set lo up", "link set " + privateLink + " up", "link set " + publicLink + " up"}
	if pod.IsValid() {
		cmds = append(cmds, fmt.Sprintf("address add %s/32 dev lo", pod))
	}
	if err := ipBatch(ctx, m.ns, cmds); err != nil {
		return err
	}
	m.pod = pod
	if pod.IsValid() {
		return inNetns(m.ns, func() error {
			c, err := net.ListenUDP("udp", &net.UDPAddr{IP: pod.AsSlice(), Port: EchoPort})
			if err != nil {
				return fmt.Errorf("cannot listen on %s:%d: %w", pod, EchoPort, err)
			}
			m.echo = c
			go echo(c)
			return nil
		})
	}
	return nil
}

// adoptMachine makes the machine of a Node that lives in a network
// namespace of its own already (a real node of the stack, with its
// kubelet, its CNI bridge and its pods): the harness adds to it one link
// to the network between clusters, named after the harness so that it
// meets none of the node's (eth0, the CNI bridge, the pods' veths), and
// nothing else. The node keeps its internal IP on its own link, and its
// pod CIDR stays its CNI's: the machine gets no pod address and no echo
// service of the harness.
func (h *Harness) adoptMachine(ctx context.Context, m *machine) error {
	if !netnsExists(m.ns) {
		return fmt.Errorf("%s/%s: network namespace %s does not exist", m.cluster, m.node, m.ns)
	}
	// Kilo's agent forwards through the node; it is the node's (its CNI's)
	// to allow, and the harness changes none of the namespace's settings.
	fwd, err := readSysctl(m.ns, "ipv4/ip_forward")
	if err != nil {
		return err
	}
	if fwd != "1" {
		return fmt.Errorf("%s/%s: network namespace %s does not forward (net.ipv4.ip_forward=%s)", m.cluster, m.node, m.ns, fwd)
	}
	e := "e" + strconv.Itoa(m.index)
	if err := ipBatch(ctx, h.hub, []string{
		fmt.Sprintf("link add %s type veth peer name %s netns %s", e, m.pubLink, m.ns),
		fmt.Sprintf("link set %s master pub up", e),
	}); err != nil {
		return err
	}
	// The link's own settings, which go with it: ARP answers only for its
	// own addresses, as on every machine.
	if err := sysctls(m.ns, [][2]string{{"ipv4/conf/" + m.pubLink + "/arp_ignore", "1"}}); err != nil {
		return err
	}
	return ipBatch(ctx, m.ns, []string{"link set " + m.pubLink + " up"})
}

// linkPublic gives every machine a route to every other machine's public
// addresses on the network between clusters, and no other route there: a
// default route would let two machines that both lack a route to each
// other's pod address resolve it by ARP (each one's request names its own
// pod address as sender, which fills the other's pending entry) and talk
// without WireGuard. The caller holds h.machines.
func (h *Harness) linkPublic(ctx context.Context) error {
	h.mu.Lock()
	owner := make(map[netip.Addr]string, len(h.public))
	for a, o := range h.public {
		owner[a] = o
	}
	h.mu.Unlock()
	var errs []error
	for _, mb := range h.members {
		for _, m := range mb.machines {
			var del, cmds []string
			for a := range m.links {
				if _, ok := owner[a]; !ok || owner[a] == m.cluster+"/"+m.node {
					del = append(del, fmt.Sprintf("route del %s/32 dev %s", a, m.pubLink))
					delete(m.links, a)
				}
			}
			// A route the kernel dropped already is no error.
			_ = ipBatch(ctx, m.ns, del, "-force")
			for a, o := range owner {
				if o != m.cluster+"/"+m.node && !m.links[a] {
					cmds = append(cmds, fmt.Sprintf("route replace %s/32 dev %s", a, m.pubLink))
					m.links[a] = true
				}
			}
			if err := ipBatch(ctx, m.ns, cmds); err != nil {
				m.links = map[netip.Addr]bool{} // unknown now: written again next time
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// echo answers every datagram with itself.
func echo(c net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteTo(buf[:n], from)
	}
}

// startWireGuard starts wireguard-go in the machine's namespace, in the
// foreground (-f: it re-executes itself without end when told to
// daemonise), and waits for its configuration socket.
func (h *Harness) startWireGuard(ctx context.Context, m *machine) error {
	sock := filepath.Join(socketDir, m.iface+".sock")
	if _, err := os.Stat(sock); err == nil {
		return fmt.Errorf("interface %s exists already (%s): another process uses the name", m.iface, sock)
	}
	log, err := os.OpenFile(filepath.Join(h.cfg.Dir, m.iface+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	// The process lives as long as the machine, not as the apply that
	// starts it.
	// nsenter enters the network namespace only: wireguard-go keeps the
	// harness's mounts (its socket folder), and in a real node's namespace
	// it stays out of the node's mount namespace.
	c := exec.CommandContext(context.WithoutCancel(ctx), "nsenter", "--net="+filepath.Join(netnsDir, m.ns), h.cfg.WireguardGo, "-f", m.iface) //nolint:gosec // G204: the harness's own namespace and binary
	env := []string{"LOG_LEVEL=error"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WG_") && !strings.HasPrefix(kv, "LOG_LEVEL=") {
			env = append(env, kv)
		}
	}
	c.Env = env
	c.Stdout, c.Stderr = log, log
	// Should the harness die without Close, its children die with it.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return fmt.Errorf("cannot start wireguard-go in %s: %w", m.ns, err)
	}
	m.wg, m.wgDone = c, make(chan struct{})
	go func(done chan struct{}) {
		_ = c.Wait()
		close(done)
	}(m.wgDone)
	h.saveStateLogged()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		select {
		case <-m.wgDone:
			return fmt.Errorf("wireguard-go for %s/%s exited at once (log: %s)", m.cluster, m.node, filepath.Join(h.cfg.Dir, m.iface+".log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wireguard-go for %s/%s made no configuration socket in 10s", m.cluster, m.node)
		}
	}
}

// stopWireGuard stops a machine's wireguard-go by its PID: TERM, then KILL.
func stopWireGuard(m *machine) {
	if m.wg == nil {
		return
	}
	_ = m.wg.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.wgDone:
	case <-time.After(3 * time.Second):
		_ = m.wg.Process.Kill()
		<-m.wgDone
	}
	m.removeSocket()
	m.wg, m.up, m.addr = nil, false, netip.Prefix{}
}

// removeSocket removes the configuration socket of the machine's
// wireguard-go once the process has gone: one that died before it could
// listen (e.g. out of inotify instances: "too many open files"), or was
// killed, leaves it behind, and a socket of the name stops the next start.
// The interface's name is the harness's own, so nothing else serves it.
func (m *machine) removeSocket() {
	_ = os.Remove(filepath.Join(socketDir, m.iface+".sock"))
}

// removeMachine stops what runs in a machine and deletes its namespace
// (which takes its links along); of an adopted namespace it removes only
// what the harness added: its routes, its WireGuard interface (which goes
// with wireguard-go) and its link.
func (h *Harness) removeMachine(ctx context.Context, m *machine) {
	if m.adopted {
		if netnsExists(m.ns) {
			if err := m.setRoutes(ctx, nil); err != nil {
				h.cfg.Log("%s/%s: %v", m.cluster, m.node, err)
			}
		}
		stopWireGuard(m)
		h.mu.Lock()
		for _, a := range m.public {
			delete(h.public, a)
		}
		h.mu.Unlock()
		if netnsExists(m.ns) {
			_ = ipBatch(ctx, m.ns, []string{"link del " + m.pubLink})
		}
		if netnsExists(h.hub) {
			_ = ipBatch(ctx, h.hub, []string{"link del e" + strconv.Itoa(m.index)})
		}
		h.saveStateLogged()
		return
	}
	stopWireGuard(m)
	if m.echo != nil {
		_ = m.echo.Close()
	}
	h.mu.Lock()
	for _, a := range m.public {
		delete(h.public, a)
	}
	if m.routerPublic.IsValid() {
		delete(h.public, m.routerPublic)
	}
	h.mu.Unlock()
	for _, ns := range []string{m.ns, m.router} {
		if ns != "" && netnsExists(ns) {
			if err := ipCmd(ctx, "netns", "delete", ns); err != nil {
				h.cfg.Log("%v", err)
			}
		}
	}
	if netnsExists(h.hub) {
		// The hub's ends of the links go with the namespace's; this is for
		// a machine that failed half way.
		_ = ipBatch(ctx, h.hub, []string{"link del i" + strconv.Itoa(m.index)})
		_ = ipBatch(ctx, h.hub, []string{"link del e" + strconv.Itoa(m.index)})
	}
	h.saveStateLogged()
}

// setRoutes makes a machine's routes the ones given, as Kilo's route table
// does: new and changed ones replaced, the ones no longer wanted deleted.
// Of two routes to one destination the later wins, as with Kilo's
// replacing writes.
//
// In an adopted namespace a destination that the node routes on its own
// (a route of another protocol than the harness's static ones: its link's,
// its CNI bridge's, one of node.sh's) is left to the node, where Kilo would
// replace it: the harness never changes what the kubelet and the CNI set.
// Those destinations are kept in m.held.
func (m *machine) setRoutes(ctx context.Context, rs []Route) error {
	want := map[netip.Prefix]Route{}
	for _, r := range rs {
		want[r.Dst] = r
	}
	m.held = nil
	if m.adopted && len(want) > 0 {
		own, err := nodeRoutes(ctx, m.ns)
		if err != nil {
			return err
		}
		for dst := range want {
			if own[dst] {
				delete(want, dst)
				m.held = append(m.held, dst)
			}
		}
		slices.SortFunc(m.held, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	}
	var del []string
	for dst, r := range m.routes {
		if _, ok := want[dst]; !ok {
			del = append(del, "route del "+m.routeSpec(r))
		}
	}
	// A route the kernel already dropped (with its link or its device's
	// last address) is no error.
	_ = ipBatch(ctx, m.ns, del, "-force")
	var cmds []string
	dsts := make([]netip.Prefix, 0, len(want))
	for dst := range want {
		dsts = append(dsts, dst)
	}
	sort.Slice(dsts, func(i, j int) bool { return dsts[i].String() < dsts[j].String() })
	for _, dst := range dsts {
		if old, ok := m.routes[dst]; !ok || old != want[dst] {
			cmds = append(cmds, "route replace "+m.routeSpec(want[dst]))
		}
	}
	if err := ipBatch(ctx, m.ns, cmds); err != nil {
		m.routes = map[netip.Prefix]Route{} // unknown now: written again next time
		return err
	}
	m.routes = want
	return nil
}

func (m *machine) routeSpec(r Route) string {
	dev := m.privLink
	if r.Dev == devWireGuard {
		dev = m.iface
	}
	s := r.Dst.String() + " dev " + dev
	if r.Gw.IsValid() {
		s += " via " + r.Gw.String() + " onlink"
	}
	if r.Src.IsValid() {
		s += " src " + r.Src.String()
	}
	return s + " proto static"
}

// nodeRoutes are the destinations of the routes of namespace ns's main
// table that are not the harness's (any protocol but static).
func nodeRoutes(ctx context.Context, ns string) (map[netip.Prefix]bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-4", "-j", "route", "show", "table", "main").Output() //nolint:gosec // G204: ip with the harness's own arguments
	if err != nil {
		return nil, fmt.Errorf("cannot list the routes of %s: %w", ns, err)
	}
	var routes []struct {
		Dst      string `json:"dst"`
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("cannot read the routes of %s: %w", ns, err)
	}
	own := map[netip.Prefix]bool{}
	for _, r := range routes {
		if r.Protocol == "static" {
			continue
		}
		p, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			a, aerr := netip.ParseAddr(r.Dst)
			if aerr != nil {
				continue // "default", which the harness never routes
			}
			p = host(a)
		}
		own[p] = true
	}
	return own, nil
}
