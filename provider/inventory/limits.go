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
	"strings"
	"unicode/utf8"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
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
)

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
		return CutList(v, f.Max)
	}
	return Cut(v, f.Max)
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

// Cut returns s as valid UTF-8 of at most max bytes. Invalid bytes become
// U+FFFD, and a cut never splits a character: what is published must
// survive JSON and protobuf encoding unchanged.
func Cut(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	return s[:cutAt(s, maxBytes)]
}

// cutAt returns the length of the longest start of the valid UTF-8 s that
// holds whole characters only and at most max bytes.
func cutAt(s string, maxBytes int) int {
	if len(s) <= maxBytes {
		return len(s)
	}
	end := 0
	for i, r := range s {
		n := i + utf8.RuneLen(r)
		if n > maxBytes {
			break
		}
		end = n
	}
	return end
}

// CutList returns a comma-separated list as valid UTF-8 of at most max
// bytes, made of whole elements only: an element that lost its last
// characters could still parse, as another value (a prefix that lost a
// digit of its length is a wider one).
func CutList(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	end := cutAt(s, maxBytes)
	if end == len(s) || s[end] == ',' {
		return s[:end]
	}
	if i := strings.LastIndexByte(s[:end], ','); i >= 0 {
		return s[:i]
	}
	return ""
}
