package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A NAT is a router between one machine and the network between clusters,
// as a home or cloud NAT stands in front of a node: it masquerades what the
// machine sends there, lets in nothing but the replies, and forgets a UDP
// mapping that carried no packet for UDPTimeout. No other machine can reach
// the machine's own addresses; what it sends arrives from Public.
type NAT struct {
	// Public is the router's address on the network between clusters.
	Public netip.Addr
	// UDPTimeout is how long the router keeps a UDP mapping without a
	// packet, in whole seconds (conntrack's UDP timeouts in its
	// namespace).
	UDPTimeout time.Duration
}

// The router's links: to the network between clusters, and to its machine
// (whose end is the machine's publicLink).
const (
	routerWAN = "wan"
	routerLAN = "lan"
)

// natRules masquerade what leaves through the WAN link and forward from it
// only what conntrack knows as a reply: the rules of a home router.
const natRules = `table ip kilomesh-nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "` + routerWAN + `" masquerade
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		iifname "` + routerLAN + `" oifname "` + routerWAN + `" accept
		iifname "` + routerWAN + `" oifname "` + routerLAN + `" ct state established,related accept
	}
}
`

// natRequirements says why a router cannot be made here, or nothing.
func natRequirements() error {
	for _, bin := range []string{"nft", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("a machine behind NAT needs %s on PATH: %w", bin, err)
		}
	}
	return nil
}

// makeRouter makes the router namespace of machine m, behind which m
// reaches the network between clusters: its WAN link on the hub's pub
// bridge with the router's public address, its LAN link to the machine's
// publicLink. It answers ARP for the machine (proxy_arp), so that the
// machine's on-link routes to other public addresses lead to it, and routes
// the private ranges, where a machine behind NAT has its addresses, to the
// machine. Its default route on the network between clusters carries only
// what the forward rules let through: the machine's own packets out, their
// replies in.
func (h *Harness) makeRouter(ctx context.Context, m *machine, nat *NAT) error {
	if err := natRequirements(); err != nil {
		return err
	}
	secs := int(nat.UDPTimeout / time.Second)
	if secs < 1 || !nat.Public.Is4() {
		return fmt.Errorf("%s/%s: a NAT needs an IPv4 public address and a UDP timeout of a second or more", m.cluster, m.node)
	}
	m.router = m.ns + "-nat"
	if err := ipCmd(ctx, "netns", "add", m.router); err != nil {
		return err
	}
	e := "e" + strconv.Itoa(m.index)
	if err := ipBatch(ctx, h.hub, []string{
		fmt.Sprintf("link add %s type veth peer name %s netns %s", e, routerWAN, m.router),
		fmt.Sprintf("link set %s master pub up", e),
	}); err != nil {
		return err
	}
	if err := ipBatch(ctx, m.router, []string{
		fmt.Sprintf("link add %s type veth peer name %s netns %s", routerLAN, publicLink, m.ns),
		"link set lo up",
		"link set " + routerWAN + " up",
		"link set " + routerLAN + " up",
		fmt.Sprintf("address add %s/32 dev %s", nat.Public, routerWAN),
		"route add default dev " + routerWAN,
		"route add 10.0.0.0/8 dev " + routerLAN,
		"route add 172.16.0.0/12 dev " + routerLAN,
		"route add 192.168.0.0/16 dev " + routerLAN,
	}); err != nil {
		return err
	}
	nft := exec.CommandContext(ctx, "nsenter", "--net="+filepath.Join(netnsDir, m.router), "nft", "-f", "-") //nolint:gosec // G204: the harness's own namespace
	nft.Stdin = strings.NewReader(natRules)
	if out, err := nft.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot load the NAT rules in %s: %w: %s", m.router, err, out)
	}
	// The masquerade rule loads conntrack, whose timeouts are then the
	// namespace's own: a UDP mapping, answered (stream) or not, lasts
	// UDPTimeout without a packet.
	t := strconv.Itoa(secs)
	return sysctls(m.router, [][2]string{
		{"ipv4/ip_forward", "1"},
		{"ipv4/conf/all/rp_filter", "0"},
		{"ipv4/conf/" + routerWAN + "/rp_filter", "0"},
		{"ipv4/conf/" + routerLAN + "/rp_filter", "0"},
		{"ipv4/conf/" + routerLAN + "/proxy_arp", "1"},
		{"ipv4/conf/" + routerWAN + "/arp_ignore", "1"},
		{"netfilter/nf_conntrack_udp_timeout", t},
		{"netfilter/nf_conntrack_udp_timeout_stream", t},
	})
}
