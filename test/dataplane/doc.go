// Package dataplane is a data plane for the member clusters of the local
// stack: it carries packets between their pods through real WireGuard
// tunnels (the userspace wireguard-go), programmed from the Nodes and the
// Kilo Peers that the members' API servers hold, so that a test sees
// whether the Peers kilomesh writes carry traffic, not only whether they
// look right.
//
// It stands in for Kilo's agent (kg), which cannot be built here (its
// module is not served by the module proxy), and follows Kilo's own rules,
// read from Kilo 0.7.0. It must do nothing Kilo does not: each rule names
// the function of Kilo it follows, and README.md lists them with what is
// left out. It never reads the planner (fn/mesh): what it routes comes from
// the Peer objects alone.
//
// Per member cluster with a data plane, every Node gets a network
// namespace (a "machine"): its internal IP on the cluster's network (a
// bridge), its public addresses (ExternalIPs and endpoint hosts) on a
// network shared by every cluster (or behind a NAT router of its own, when
// Config.NAT says so), its pod address (the first address of
// its pod CIDR) on lo with a UDP echo service. A real node of the stack,
// which has a namespace of its own with its kubelet, CNI bridge and pods
// (Member.Netns), is adopted instead: the harness adds its link to the
// network between clusters, its WireGuard interface and routes there, and
// removes only those. Every node's agent computes
// Kilo's topology from that node's point of view; a segment leader runs
// wireguard-go with the configuration Kilo writes, and every node gets the
// routes Kilo sets. Every Node of every member, with or without a data
// plane, gets Kilo's heartbeat (kilo.squat.ai/last-seen) every 30 s.
//
// Probe, Run and Matrix send UDP datagrams between pod addresses and report
// which pairs got their echo.
package dataplane
