/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package inventory

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// The most bytes of each published value. Node data is written by whoever
// may annotate a Node, a node's own kubelet included, so every value is cut
// before it reaches a watch cache or a status. Each cap is above the
// longest valid value, so a value that had to be cut is still invalid and
// the planner rejects it instead of reading a different, valid value.
const (
	// MaxKeyBytes caps kilo.squat.ai/key; a WireGuard key is 44 bytes.
	MaxKeyBytes = 64
	// MaxAddressBytes caps kilo.squat.ai/wireguard-ip, internal-ip and
	// force-internal-ip, and each of a Node's addresses; the longest IPv6
	// prefix is 43 bytes.
	MaxAddressBytes = 64
	// MaxEndpointBytes caps kilo.squat.ai/endpoint, force-endpoint and
	// clustermesh-endpoint: a DNS name of 253 bytes, a colon and a port.
	MaxEndpointBytes = 320
	// MaxWordBytes caps kilo.squat.ai/granularity and persistent-keepalive.
	MaxWordBytes = 64
	// MaxLocationBytes caps the location: a DNS subdomain's length.
	MaxLocationBytes = 253
	// MaxAllowedLocationIPsBytes caps kilo.squat.ai/allowed-location-ips,
	// a comma-separated list: about 200 IPv4 or 90 IPv6 prefixes.
	MaxAllowedLocationIPsBytes = 4096
	// MaxDiscoveredEndpointsBytes caps kilo.squat.ai/discovered-endpoints,
	// JSON of about 100 bytes per remote peer whose endpoint WireGuard
	// learned: a leader of a mesh of about 650 segments.
	MaxDiscoveredEndpointsBytes = 64 << 10
	// MaxAddresses caps how many addresses of each type (InternalIP,
	// ExternalIP) of a Node are published.
	MaxAddresses = 16

	// MaxPeerAllowedIPs caps the allowed IPs published of one foreign Peer,
	// Kilo's own limit on a Peer.
	MaxPeerAllowedIPs = 4096
	// MaxForeignAllowedIPs caps the allowed IPs published of all foreign
	// Peers of an inventory together (about 330 KB of status); Peers
	// later by name lose theirs first.
	MaxForeignAllowedIPs = 16384
	// MaxForeignPeers caps how many foreign Peers an inventory publishes,
	// with their names and keys; Peers later by name are left out. A Peer
	// past the route budget still counts, and is published without routes.
	MaxForeignPeers = 2048
	// MaxForeignBytes caps the JSON of an inventory's foreignPeers, names,
	// keys and routes together, so that a member's Peers can never push an
	// inventory past MaxStatusBytes of the controller: realistic Peers (a
	// name of 40 bytes, a key, /24 routes) reach the other bounds first, at
	// about 540 KB. Names and keys are counted before any route, so routes
	// never crowd a Peer's name and key out.
	MaxForeignBytes = 768 << 10

	// MaxNameBytes caps a Node's or a Peer's name: a DNS subdomain, the
	// only name the API server accepts for either. A longer name is kept
	// cut, with a digest of the whole and a character no name may hold, so
	// that it stays unique and invalid; it is never published.
	MaxNameBytes = 253
	// MaxLabels and MaxLabelBytes cap the labels kept of a Node or a Peer
	// (keys and values together): node selectors, the region and Peer
	// ownership read them. An object with more is kept without its labels
	// and is not published, since a cut label set could change what a
	// selector selects. Node Feature Discovery gives a Node a few hundred.
	MaxLabels     = 512
	MaxLabelBytes = 32 << 10
	// MaxMetaBytes caps a UID and a resource version: a UID is 36 bytes,
	// a version a decimal number.
	MaxMetaBytes = 64
)

// Bounds on what is read of one member cluster, whatever its API server
// sends. Each is reported, never silently applied: in an inventory's
// status.atProvider.nodesIncomplete or foreignPeersIncomplete, and on a
// PeerSet, which then writes no new route.
const (
	// MaxNodes caps the Nodes kept of a member: Kubernetes' own limit of
	// a cluster.
	MaxNodes = 5000
	// MaxNodeCacheBytes caps the memory the Nodes of a member take in the
	// provider (see Bytes): 26 KiB a Node at MaxNodes, several times a
	// realistic slim Node.
	MaxNodeCacheBytes = 128 << 20
	// MaxPeers caps the Peers kept of a member: a PeerSet holds at most
	// about 2,000, so this is several meshes' worth.
	MaxPeers = 16384
	// MaxPeerCacheBytes caps the memory the Peers of a member take in the
	// provider (see Bytes).
	MaxPeerCacheBytes = 32 << 20
)

// Texts of the bounds an inventory reports as reached.
const (
	fmtMorePeerRoutes   = "more than %d routes in one Peer"
	fmtMoreRoutes       = "more than %d routes"
	fmtMorePeers        = "more than %d Peers"
	fmtMoreForeignBytes = "more than %d bytes of foreign Peers"
	fmtMoreLabels       = "more than %d labels or %d bytes of labels on one object"
	// ReasonBadName is reported for a Node or Peer whose name is not a DNS
	// subdomain of at most 253 bytes: the API server accepts no such
	// object, so only a server that is not one sends it.
	ReasonBadName = "a name that is not a DNS subdomain of at most 253 bytes"
)

// ReasonLabels is reported for an object kept without its labels.
var ReasonLabels = fmt.Sprintf(fmtMoreLabels, MaxLabels, MaxLabelBytes)

// A Field is a Node annotation that an inventory reads, and the most bytes
// of its value it keeps.
type Field struct {
	// Annotation is the annotation's key.
	Annotation string
	// Max is the most bytes of its value that are kept.
	Max int
	// List is true for a comma-separated list, which is cut after its last
	// whole element, so that a cut never turns a prefix into a wider one.
	List bool
}

// Cut returns the value as it is kept: valid UTF-8, cut to the field's cap.
func (f Field) Cut(v string) string {
	if f.List {
		return safetext.CutList(v, f.Max)
	}
	return safetext.Cut(v, f.Max)
}

// Fields are every Node annotation an inventory reads, with their caps.
// Kilo's heartbeat is read too, but only to tell whether it is stale.
var Fields = []Field{
	{Annotation: kilov1alpha1.AnnotationKey, Max: MaxKeyBytes},
	{Annotation: kilov1alpha1.AnnotationWireguardIP, Max: MaxAddressBytes},
	{Annotation: kilov1alpha1.AnnotationEndpoint, Max: MaxEndpointBytes},
	{Annotation: kilov1alpha1.AnnotationInternalIP, Max: MaxAddressBytes},
	{Annotation: kilov1alpha1.AnnotationForceEndpoint, Max: MaxEndpointBytes},
	{Annotation: kilov1alpha1.AnnotationClustermeshEndpoint, Max: MaxEndpointBytes},
	{Annotation: kilov1alpha1.AnnotationGranularity, Max: MaxWordBytes},
	{Annotation: kilov1alpha1.AnnotationPersistentKeepalive, Max: MaxWordBytes},
	{Annotation: kilov1alpha1.AnnotationDiscoveredEndpoints, Max: MaxDiscoveredEndpointsBytes},
	{Annotation: kilov1alpha1.AnnotationForceInternalIP, Max: MaxAddressBytes},
	{Annotation: kilov1alpha1.AnnotationAllowedLocationIPs, Max: MaxAllowedLocationIPsBytes, List: true},
	// Only the presence of the leader annotation counts.
	{Annotation: kilov1alpha1.AnnotationLeader, Max: 0},
	{Annotation: kilov1alpha1.AnnotationLocation, Max: MaxLocationBytes},
}

// Reasons collects the bounds reached while reading, each once, in the
// order they were first reached.
type Reasons struct {
	list []string
}

// Add records a reason; an empty one, or one already recorded, is ignored.
func (r *Reasons) Add(reason string) {
	if reason == "" || slices.Contains(r.list, reason) {
		return
	}
	r.list = append(r.list, reason)
}

// String returns the reasons joined by "; ", or "" when there are none.
func (r *Reasons) String() string { return strings.Join(r.list, "; ") }

// JoinReasons joins reasons as Reasons does.
func JoinReasons(reasons ...string) string {
	var r Reasons
	for _, s := range reasons {
		for _, part := range strings.Split(s, "; ") {
			r.Add(part)
		}
	}
	return r.String()
}

// jsonLen returns the length of s as encoding/json writes it, quotes
// included: what a string costs in a status. s is valid UTF-8 (see Cut).
func jsonLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += len(`\u0000`)
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`)
		default:
			n += size
		}
		i += size
	}
	return n
}
