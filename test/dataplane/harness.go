package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// A Config configures a Harness.
type Config struct {
	// Dir holds the logs of the harness's wireguard-go processes, and names
	// its record of what it made (in /run/kilomesh-dataplane). One harness
	// runs per folder at a time.
	Dir string
	// WireguardGo is the wireguard-go binary.
	WireguardGo string
	// Members are the clusters whose Nodes the harness runs.
	Members []Member
	// Hosts is the name service of endpoints: name to address.
	Hosts map[string]string
	// Keys returns the private key of a public key (base64), when the
	// harness may hold it: a node whose key it cannot hold runs nothing.
	Keys func(pub string) ([32]byte, bool)
	// Log receives a line for each thing worth telling; nil drops them.
	Log func(format string, args ...any)
	// HeartbeatOnly, when set, picks Nodes that only get heartbeats: they
	// get no namespace and no agent, and no agent sees them. It serves
	// Nodes that stand for a control-plane test only (hundreds of them,
	// where a namespace each would cost more than the test measures).
	HeartbeatOnly func(*corev1.Node) bool
	// NAT, when set, puts the machine of a Node for which it returns a NAT
	// behind a router of its own (see NAT), from the moment the machine is
	// made; nil leaves it on the network between clusters.
	NAT func(*corev1.Node) *NAT
	// Discovered, when set, makes every periodic check-in also write what
	// the node's agent learned from WireGuard handshakes, in Kilo's
	// kilo.squat.ai/discovered-endpoints ("{}" before any handshake), as
	// Kilo's check-in does: the load Kilo's agents put on a mesh.
	Discovered bool
}

// dataPlane tells whether a member has a data plane; without one the
// harness only writes heartbeats, and needs neither root nor wireguard-go.
func (c Config) dataPlane() bool {
	for _, m := range c.Members {
		if m.Subnet != "" {
			return true
		}
	}
	return false
}

// A Member is one member cluster.
type Member struct {
	Name   string
	Config *rest.Config
	// Subnet is Kilo's --subnet in this cluster (its mesh entry's
	// wireguardCIDR). Empty: the member has no data plane, and its Nodes
	// only get heartbeats.
	Subnet string
	// Netns names, by Node name, the network namespaces of Nodes that
	// have one already: the real nodes of the stack (node.sh), with their
	// kubelet, CNI bridge and pods. The harness runs Kilo's agent there
	// instead of making a namespace (see adoptMachine).
	Netns map[string]string
}

// A Harness stands in for Kilo's agent on every Node of its members: it
// gives each Node a network namespace, runs Kilo's rules from the Node's
// point of view, programs wireguard-go and routes accordingly, and writes
// Kilo's heartbeat on every Node.
type Harness struct {
	cfg   Config
	run   string // prefix of every name the harness makes
	hub   string // namespace of the bridges
	hosts map[string]netip.Addr

	// machines guards every member's machines: one member applies at a
	// time.
	machines sync.Mutex
	mu       sync.Mutex // guards what follows
	members  []*member
	next     int                   // index of the next machine
	public   map[netip.Addr]string // public address -> machine
	paused   map[string]bool       // "cluster/node" whose agent is stopped
	// discovered is, by "cluster/node", what the node's agent last learned
	// from handshakes, in Kilo's kilo.squat.ai/discovered-endpoints: its
	// check-ins write it, as Kilo's do.
	discovered map[string]string
	stopped    bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// member is the harness's side of one member cluster.
type member struct {
	Member
	h       *Harness
	index   int
	subnet  netip.Prefix
	client  client.Client
	cache   cache.Cache // nil without a data plane
	trigger chan struct{}

	machines map[string]*machine
	failing  string        // the last apply error, told once
	applied  chan struct{} // closed once the member applied once
}

// Start checks that the harness can run, removes what a harness that
// stopped without cleaning up left in the same folder, and starts. Close
// stops it and removes everything it made.
func Start(ctx context.Context, cfg Config) (*Harness, error) {
	if cfg.dataPlane() {
		if err := Requirements(); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(cfg.WireguardGo); err != nil || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("the data-plane harness needs the wireguard-go binary (test/tools/build.sh wireguard-go): %s is not executable", cfg.WireguardGo)
		}
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Keys == nil {
		cfg.Keys = func(string) ([32]byte, bool) { return [32]byte{}, false }
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot make the harness's folder: %w", err)
	}
	if err := cleanLeftovers(ctx, cfg.Dir, cfg.Log); err != nil {
		return nil, err
	}
	id := make([]byte, 2)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	h := &Harness{cfg: cfg, run: "km" + hex.EncodeToString(id), public: map[netip.Addr]string{}, paused: map[string]bool{}, discovered: map[string]string{}, hosts: map[string]netip.Addr{}}
	h.hub = h.run + "-hub"
	for name, a := range cfg.Hosts {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("hosts: %s: %w", name, err)
		}
		h.hosts[name] = addr
	}
	ctx, h.cancel = context.WithCancel(ctx)
	if err := h.start(ctx); err != nil {
		h.shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	return h, nil
}

// newScheme knows Nodes and Kilo's Peer.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := kilov1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (h *Harness) start(ctx context.Context) error {
	s, err := newScheme()
	if err != nil {
		return err
	}
	if h.cfg.dataPlane() {
		if err := ipCmd(ctx, "netns", "add", h.hub); err != nil {
			return err
		}
	}
	if err := h.saveState(); err != nil {
		return err
	}
	cmds := []string{"link set lo up", "link add pub type bridge", "link set pub up"}
	for i, m := range h.cfg.Members {
		mb := &member{Member: m, h: h, index: i, trigger: make(chan struct{}, 1), machines: map[string]*machine{}, applied: make(chan struct{})}
		c, err := client.New(m.Config, client.Options{Scheme: s})
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		mb.client = c
		if m.Subnet != "" {
			if mb.subnet, err = netip.ParsePrefix(m.Subnet); err != nil {
				return fmt.Errorf("%s: subnet: %w", m.Name, err)
			}
			cmds = append(cmds, fmt.Sprintf("link add %s type bridge", mb.bridge()), fmt.Sprintf("link set %s up", mb.bridge()))
		}
		h.members = append(h.members, mb)
	}
	if h.cfg.dataPlane() {
		if err := ipBatch(ctx, h.hub, cmds); err != nil {
			return err
		}
	}
	for _, mb := range h.members {
		if mb.Subnet == "" {
			continue
		}
		if err := mb.watch(ctx, s); err != nil {
			return err
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			mb.loop(ctx)
		}()
	}
	beat := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.heartbeats(ctx, beat)
	}()
	// Start returns once every Node got a heartbeat and every node's
	// agent ran once.
	select {
	case <-beat:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, mb := range h.members {
		if mb.Subnet == "" {
			continue
		}
		select {
		case <-mb.applied:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// bridge is the member's network in the hub namespace.
func (mb *member) bridge() string { return "m" + strconv.Itoa(mb.index) }

// watch starts the informers the member's agents read, as Kilo's agent
// watches Nodes and Peers; every event makes the agents apply again.
func (mb *member) watch(ctx context.Context, s *runtime.Scheme) error {
	ca, err := cache.New(mb.Config, cache.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("%s: %w", mb.Name, err)
	}
	poke := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mb.poke() },
		UpdateFunc: func(any, any) { mb.poke() },
		DeleteFunc: func(any) { mb.poke() },
	}
	for _, o := range []client.Object{&corev1.Node{}, &kilov1alpha1.Peer{}} {
		inf, err := ca.GetInformer(ctx, o)
		if err != nil {
			return fmt.Errorf("%s: cannot watch %T: %w", mb.Name, o, err)
		}
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
	}
	mb.h.wg.Add(1)
	go func() {
		defer mb.h.wg.Done()
		_ = ca.Start(ctx)
	}()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("%s: the Node and Peer watches did not sync", mb.Name)
	}
	mb.cache = ca
	return nil
}

func (mb *member) poke() {
	select {
	case mb.trigger <- struct{}{}:
	default:
	}
}

// loop applies on every event, and every resync period as Kilo does
// (--resync-period, 30 s): readiness depends on the time, too.
func (mb *member) loop(ctx context.Context) {
	t := time.NewTicker(checkInPeriod)
	defer t.Stop()
	mb.poke()
	for {
		select {
		case <-ctx.Done():
			return
		case <-mb.trigger:
		case <-t.C:
		}
		mb.h.machines.Lock()
		err := mb.reconcile(ctx)
		switch {
		case err != nil && err.Error() != mb.failing:
			mb.h.cfg.Log("%s: %v", mb.Name, err)
			mb.failing = err.Error()
		case err == nil:
			mb.failing = ""
		}
		mb.h.machines.Unlock()
		select {
		case <-mb.applied:
		default:
			close(mb.applied)
		}
	}
}

// reconcile brings the member's machines to its Nodes and runs every
// node's agent. The caller holds h.machines.
func (mb *member) reconcile(ctx context.Context) error {
	nodes := &corev1.NodeList{}
	if err := mb.cache.List(ctx, nodes); err != nil {
		return err
	}
	peers := &kilov1alpha1.PeerList{}
	if err := mb.cache.List(ctx, peers); err != nil {
		return err
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	if mb.h.isStopped() {
		return nil
	}
	var errs []error
	if err := mb.checkIn(ctx, nodes.Items, true); err != nil {
		errs = append(errs, err)
	}
	if only := mb.h.cfg.HeartbeatOnly; only != nil {
		kept := nodes.Items[:0]
		for i := range nodes.Items {
			if !only(&nodes.Items[i]) {
				kept = append(kept, nodes.Items[i])
			}
		}
		nodes.Items = kept
	}
	seen := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		seen[n.Name] = true
		if err := mb.ensureMachine(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	for name, m := range mb.machines {
		if !seen[name] {
			mb.h.removeMachine(ctx, m)
			delete(mb.machines, name)
			mb.h.forget(mb.Name, name)
		}
	}
	if err := mb.h.linkPublic(ctx); err != nil {
		errs = append(errs, err)
	}
	mb.h.saveStateLogged()
	now := time.Now()
	view := map[string]*Node{}
	for i := range nodes.Items {
		view[nodes.Items[i].Name] = translateNode(&nodes.Items[i])
	}
	kpeers := map[string]*Peer{}
	for k, p := range kiloPeers(peers.Items) {
		if p.ready() {
			kpeers[k] = p
		}
	}
	for i := range nodes.Items {
		name := nodes.Items[i].Name
		m := mb.machines[name]
		if m == nil || mb.h.isPaused(mb.Name, name) {
			continue
		}
		if err := mb.agent(ctx, m, view, kpeers, now); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// agent does what Kilo's agent on node m does with what it reads
// (Mesh.applyTopology of Kilo's pkg/mesh/mesh.go).
func (mb *member) agent(ctx context.Context, m *machine, view map[string]*Node, peers map[string]*Peer, now time.Time) error {
	local := view[m.node]
	priv, why := mb.runnable(local)
	if why != "" {
		m.note = why
		return nil
	}
	m.note = ""
	m.reap(mb.h.cfg.Log)
	nodes, ps := readyView(view, peers, m.node, now)
	if err := resolveEndpoints(nodes, ps, mb.h.hosts); err != nil {
		return err
	}
	var dev *Device
	if m.wg != nil {
		d, err := getDevice(ctx, m.iface)
		if err != nil {
			return err
		}
		dev = d
	}
	nodes[m.node].DiscoveredEndpoints = discoverNATEndpoints(nodes, ps, dev)
	mb.h.learned(mb.Name, m.node, nodes[m.node].DiscoveredEndpoints)
	granularity := local.Granularity
	if granularity == "" {
		granularity = defaultGranularity
	}
	t, err := newTopology(nodes, ps, granularity, m.node, local.Endpoint.port(), priv, mb.subnet, local.PersistentKeepalive)
	if err != nil {
		return err
	}
	routes := t.routes()
	if m.privLink == "" && slices.ContainsFunc(routes, func(r Route) bool { return r.Dev == devPrivate }) {
		// In a namespace it did not make, the harness has no link to the
		// other nodes' internal IPs: the node's own link leads to the
		// machine that hosts it.
		m.note = "it shares its location with other nodes, and its namespace has no link to their internal IPs"
		return nil
	}
	if t.leader {
		if err := mb.h.lead(ctx, m, t, dev); err != nil {
			return err
		}
	} else if m.up {
		if err := ipBatch(ctx, m.ns, []string{"link set " + m.iface + " down"}); err != nil {
			return err
		}
		// A link set down loses its routes.
		m.up, m.routes = false, map[netip.Prefix]Route{}
	}
	held := fmt.Sprint(m.held)
	if err := m.setRoutes(ctx, routes); err != nil {
		return err
	}
	if fmt.Sprint(m.held) != held && len(m.held) > 0 {
		mb.h.cfg.Log("%s/%s: routes the node's namespace has already, left to it: %v", m.cluster, m.node, m.held)
	}
	return nil
}

// runnable returns the private key of a node's agent, or why the agent
// runs nothing. Its interfaces then stay as they are, as Kilo's do while
// it cannot apply.
func (mb *member) runnable(local *Node) (Key, string) {
	priv, held := mb.h.cfg.Keys(local.Key.String())
	switch {
	case local.AllowedLocationIPs != "":
		return Key{}, "it carries kilo.squat.ai/allowed-location-ips, which the harness does not follow"
	case local.Key == Key{}:
		return Key{}, "it has no valid kilo.squat.ai/key"
	case !held:
		return Key{}, "the harness does not hold the private key of its kilo.squat.ai/key " + local.Key.String()
	case !local.Endpoint.ready() || !local.Subnet.IsValid():
		// Kilo's agent waits until its own node is ready; the heartbeat is
		// its own, so only the endpoint and the pod CIDR count.
		return Key{}, "Kilo does not run it: it has no endpoint or no pod CIDR"
	}
	return Key(priv), ""
}

// readyView is what the agent of node local works on: copies of the ready
// nodes (and of the local node, whose own heartbeat does not count) and of
// the Peers, which it may resolve and change.
func readyView(view map[string]*Node, peers map[string]*Peer, local string, now time.Time) (map[string]*Node, map[string]*Peer) {
	nodes := map[string]*Node{}
	for name, n := range view {
		if name == local || n.ready(now) {
			c := *n
			c.Endpoint = n.Endpoint.clone()
			nodes[name] = &c
		}
	}
	ps := map[string]*Peer{}
	for k, p := range peers {
		c := *p
		c.Endpoint = p.Endpoint.clone()
		ps[k] = &c
	}
	return nodes, ps
}

// lead programs a leader's WireGuard interface: the configuration only
// when Kilo would write it (equal), its address and the link up.
func (h *Harness) lead(ctx context.Context, m *machine, t *Topology, dev *Device) error {
	if m.wg == nil {
		if err := h.startWireGuard(ctx, m); err != nil {
			return err
		}
	}
	c := t.conf()
	if same, why := equal(c, dev); !same {
		if err := setDevice(ctx, m.iface, c); err != nil {
			return err
		}
		m.skipped = ""
		h.cfg.Log("%s/%s: WireGuard configured (%s): %d peers", m.cluster, m.node, why, len(c.Peers))
	} else if d := differs(c, dev); d != "" && d != m.skipped {
		m.skipped = d
		h.cfg.Log("%s/%s: Kilo would not write this change (its Conf.Equal stops at a peer without an endpoint): %s", m.cluster, m.node, d)
	}
	var cmds []string
	if m.addr != t.wireGuardCIDR {
		if m.addr.IsValid() {
			cmds = append(cmds, fmt.Sprintf("address del %s dev %s", m.addr, m.iface))
		}
		cmds = append(cmds, fmt.Sprintf("address add %s dev %s", t.wireGuardCIDR, m.iface))
		// Deleting the last address of an interface flushes its routes,
		// as with Kilo's SetAddress; Kilo's route table puts them back
		// (route.Table.Run watches deletions), the next setRoutes here.
		m.routes = map[netip.Prefix]Route{}
	}
	if !m.up {
		cmds = append(cmds, "link set "+m.iface+" up")
	}
	if err := ipBatch(ctx, m.ns, cmds); err != nil {
		return err
	}
	m.addr, m.up = t.wireGuardCIDR, true
	return nil
}

// differs compares a configuration with a device peer by peer, without
// Kilo's early stop: the difference Kilo leaves unwritten, or nothing.
func differs(c Conf, d *Device) string {
	want := map[Key]PeerConf{}
	for _, p := range c.Peers {
		want[p.PublicKey] = p
	}
	for _, p := range d.Peers {
		w, ok := want[p.PublicKey]
		switch {
		case !ok:
			return "the interface has peer " + p.PublicKey.String() + ", which is no longer wanted"
		case fmt.Sprint(sortedCIDRs(w.AllowedIPs)) != fmt.Sprint(sortedCIDRs(p.AllowedIPs)):
			return "the allowed IPs of peer " + p.PublicKey.String() + " changed"
		case w.Endpoint != p.Endpoint:
			return "the endpoint of peer " + p.PublicKey.String() + " changed"
		}
	}
	return ""
}

// resync runs the agents of a member once, as Kilo's resync does, for a
// test that needs to know one ran after something happened.
func (h *Harness) resync(ctx context.Context, cluster string) error {
	h.machines.Lock()
	defer h.machines.Unlock()
	for _, mb := range h.members {
		if mb.Name == cluster && mb.cache != nil {
			return mb.reconcile(ctx)
		}
	}
	return fmt.Errorf("no member %s with a data plane", cluster)
}

// Pause stops the agent of a node, as if Kilo died on it: no heartbeat, no
// change to its interfaces. Resume starts it again.
func (h *Harness) Pause(cluster, node string) {
	h.mu.Lock()
	h.paused[cluster+"/"+node] = true
	h.mu.Unlock()
}

// Resume starts the agent of a node again.
func (h *Harness) Resume(cluster, node string) {
	h.mu.Lock()
	delete(h.paused, cluster+"/"+node)
	h.mu.Unlock()
	for _, mb := range h.members {
		if mb.Name == cluster && mb.cache != nil {
			mb.poke()
		}
	}
}

// learned keeps what the agent of a node learned from handshakes in Kilo's
// form of kilo.squat.ai/discovered-endpoints (a JSON object of Go's
// net.UDPAddr by public key; "{}" before the first handshake), for its next
// check-in: Kilo's applyTopology puts it on its local node, and only its
// checkIn writes it.
func (h *Harness) learned(cluster, node string, endpoints map[string]netip.AddrPort) {
	d := mesh.FormatDiscoveredEndpoints(endpoints)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.discovered[cluster+"/"+node] = d
}

// forget drops what the agent of a removed node learned.
func (h *Harness) forget(cluster, node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.discovered, cluster+"/"+node)
}

// checkInPatch is the merge patch of a node's check-in at now: its
// heartbeat and, on a periodic check-in of a node whose agent applied, what
// it learned from handshakes, as Kilo's checkIn writes its local node.
func (h *Harness) checkInPatch(cluster, node string, now time.Time, periodic bool) []byte {
	ann := map[string]string{kilov1alpha1.AnnotationLastSeen: strconv.FormatInt(now.Unix(), 10)}
	if periodic && h.cfg.Discovered {
		h.mu.Lock()
		if d, ok := h.discovered[cluster+"/"+node]; ok {
			ann[kilov1alpha1.AnnotationDiscoveredEndpoints] = d
		}
		h.mu.Unlock()
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}}) //nolint:errchkjson // Strings only.
	return b
}

func (h *Harness) isPaused(cluster, node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused[cluster+"/"+node]
}

func (h *Harness) isStopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// heartbeats writes kilo.squat.ai/last-seen on every Node of every member
// every check-in period, as Kilo's agent does (Mesh.checkIn), except on
// nodes whose agent is paused; first is closed after the first round.
func (h *Harness) heartbeats(ctx context.Context, first chan<- struct{}) {
	t := time.NewTicker(checkInPeriod)
	defer t.Stop()
	failing := map[string]bool{}
	for {
		for _, mb := range h.members {
			err := mb.heartbeat(ctx)
			if err != nil && !failing[mb.Name] {
				h.cfg.Log("%s: heartbeat: %v", mb.Name, err)
			}
			failing[mb.Name] = err != nil
		}
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (mb *member) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes := &corev1.NodeList{}
	if err := mb.client.List(ctx, nodes); err != nil {
		return err
	}
	return mb.checkIn(ctx, nodes.Items, false)
}

// checkIn writes the current time as kilo.squat.ai/last-seen on the Nodes
// whose agent runs (with what each learned from handshakes,
// kilo.squat.ai/discovered-endpoints, as Kilo's check-in every 30 s
// writes it), or with stale on those whose heartbeat, as the API
// holds it, is too old for Kilo, and then only the heartbeat: Kilo's agent, on an event of its own Node,
// writes the Node at once when it is not ready as the API holds it
// (Mesh.handleLocal compares readiness, nodesAreEqual), e.g. after its API
// server was away for longer than two check-in periods.
func (mb *member) checkIn(ctx context.Context, nodes []corev1.Node, stale bool) error {
	now := time.Now()
	var errs []error
	for i := range nodes {
		n := &nodes[i]
		if mb.h.isPaused(mb.Name, n.Name) {
			continue
		}
		if stale && now.Unix()-translateNode(n).LastSeen < int64(2*checkInPeriod/time.Second) {
			continue
		}
		patch := mb.h.checkInPatch(mb.Name, n.Name, now, !stale)
		if err := mb.client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
			errs = append(errs, fmt.Errorf("%s: heartbeat: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every agent and wireguard-go process and removes every
// namespace the harness made.
func (h *Harness) Close() { h.shutdown(context.Background()) }

func (h *Harness) shutdown(ctx context.Context) {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	h.machines.Lock()
	for _, mb := range h.members {
		for name, m := range mb.machines {
			h.removeMachine(ctx, m)
			delete(mb.machines, name)
		}
	}
	h.machines.Unlock()
	if netnsExists(h.hub) {
		if err := ipCmd(ctx, "netns", "delete", h.hub); err != nil {
			h.cfg.Log("%v", err)
		}
	}
	if err := os.Remove(statePath(h.cfg.Dir)); err != nil && !os.IsNotExist(err) {
		h.cfg.Log("%v", err)
	}
}
