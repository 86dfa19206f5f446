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

// Package nodefixture builds the member-cluster Nodes of the tests. One
// description of a node (a Node: name, pod CIDRs, addresses, labels, Kilo's
// annotations, readiness and heartbeat) gives every form the tests need:
// the Node as the API holds it (Object), the entry an inventory publishes
// of it (ObservedAt), and that entry as the function's request carries it
// (Struct).
//
// It imports only kilomesh's API types, so that the tests of every package,
// the planner's and the provider's included, may use it.
package nodefixture

import (
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// A Node is one member-cluster Node as Kilo and the kubelet would leave it.
// The zero Node but its name is a Node only created through the API: no
// addresses, no conditions, no annotations.
type Node struct {
	Name        string
	PodCIDRs    []string
	InternalIPs []string
	ExternalIPs []string
	Labels      map[string]string
	// Annotations by their full key, e.g. kilo.squat.ai/key. Kilo's
	// heartbeat, kilo.squat.ai/last-seen, is one of them (Seen).
	Annotations map[string]string
	// Ready is the status of the Ready condition a kubelet reports. Empty
	// is a Node no kubelet has reported on: no conditions and no hostname
	// address.
	Ready corev1.ConditionStatus
}

// New returns a Node with only a name.
func New(name string) Node {
	return Node{Name: name}
}

// keys holds the private key of every public key Key made in this
// process, by public key.
var keys sync.Map

// Key is the WireGuard public key of a key pair derived from seed: standard
// base64 of 32 bytes, different for every seed, the same in every run. The
// process that made it holds the private key (PrivateKey), so that the
// data-plane harness can run the node that carries it.
func Key(seed string) string {
	priv := sha256.Sum256([]byte("kilomesh fixture key " + seed))
	// WireGuard's clamping, so that the private key is in its canonical form.
	priv[0] &= 248
	priv[31] = (priv[31] & 127) | 64
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		panic(err) // every 32-byte string is an X25519 private key
	}
	pub := base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
	keys.Store(pub, priv)
	return pub
}

// PrivateKey is the private key of a public key that Key made in this
// process.
func PrivateKey(pub string) ([32]byte, bool) {
	v, ok := keys.Load(pub)
	if !ok {
		return [32]byte{}, false
	}
	return v.([32]byte), true //nolint:forcetypeassert // only Key stores, and only this type
}

// Clone returns a deep copy of n, for changing it without changing the
// original.
func (n Node) Clone() Node {
	out := n
	out.PodCIDRs = cloneSlice(n.PodCIDRs)
	out.InternalIPs = cloneSlice(n.InternalIPs)
	out.ExternalIPs = cloneSlice(n.ExternalIPs)
	out.Labels = cloneMap(n.Labels)
	out.Annotations = cloneMap(n.Annotations)
	return out
}

// Pods returns a copy of n with these pod CIDRs.
func (n Node) Pods(cidrs ...string) Node {
	out := n.Clone()
	out.PodCIDRs = cloneSlice(cidrs)
	return out
}

// Internal returns a copy of n with these InternalIP addresses.
func (n Node) Internal(ips ...string) Node {
	out := n.Clone()
	out.InternalIPs = cloneSlice(ips)
	return out
}

// External returns a copy of n with these ExternalIP addresses.
func (n Node) External(ips ...string) Node {
	out := n.Clone()
	out.ExternalIPs = cloneSlice(ips)
	return out
}

// Label returns a copy of n with the label k set to v.
func (n Node) Label(k, v string) Node {
	out := n.Clone()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[k] = v
	return out
}

// With returns a copy of n with the annotation k set to v. An empty v is an
// annotation present but empty, which Kilo reads apart from a missing one
// for some keys (kilo.squat.ai/location, kilo.squat.ai/force-internal-ip).
func (n Node) With(k, v string) Node {
	out := n.Clone()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[k] = v
	return out
}

// Without returns a copy of n without the annotation k.
func (n Node) Without(k string) Node {
	out := n.Clone()
	delete(out.Annotations, k)
	return out
}

// Reported returns a copy of n as a kubelet reports it, with a Ready
// condition of status ready.
func (n Node) Reported(ready corev1.ConditionStatus) Node {
	out := n.Clone()
	out.Ready = ready
	return out
}

// Seen returns a copy of n whose Kilo heartbeat is at t.
func (n Node) Seen(t time.Time) Node {
	return n.With(kilov1alpha1.AnnotationLastSeen, strconv.FormatInt(t.Unix(), 10))
}

// Object is the Node as the API holds it. The heartbeat times of its Ready
// condition are the current time, as a kubelet that just reported writes
// them.
func (n Node) Object() *corev1.Node {
	o := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: cloneMap(n.Labels), Annotations: cloneMap(n.Annotations)},
		Spec:       corev1.NodeSpec{PodCIDRs: cloneSlice(n.PodCIDRs)},
	}
	if len(n.PodCIDRs) > 0 {
		o.Spec.PodCIDR = n.PodCIDRs[0]
	}
	for _, a := range n.InternalIPs {
		o.Status.Addresses = append(o.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	for _, a := range n.ExternalIPs {
		o.Status.Addresses = append(o.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a})
	}
	if n.Ready == "" {
		return o
	}
	o.Status.Addresses = append(o.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	now := metav1.Now()
	o.Status.Conditions = []corev1.NodeCondition{{
		Type:               corev1.NodeReady,
		Status:             n.Ready,
		Reason:             "KubeletReady",
		LastHeartbeatTime:  now,
		LastTransitionTime: now,
	}}
	if n.Ready != corev1.ConditionTrue {
		o.Status.Conditions[0].Reason = "KubeletNotReady"
	}
	return o
}

// FromObject reads a Node of the API back into a Node.
func FromObject(o *corev1.Node) Node {
	n := Node{
		Name:        o.Name,
		PodCIDRs:    cloneSlice(o.Spec.PodCIDRs),
		Labels:      cloneMap(o.Labels),
		Annotations: cloneMap(o.Annotations),
	}
	if len(n.PodCIDRs) == 0 && o.Spec.PodCIDR != "" {
		n.PodCIDRs = []string{o.Spec.PodCIDR}
	}
	for _, a := range o.Status.Addresses {
		switch a.Type { //nolint:exhaustive // only these two are published
		case corev1.NodeInternalIP:
			n.InternalIPs = append(n.InternalIPs, a.Address)
		case corev1.NodeExternalIP:
			n.ExternalIPs = append(n.ExternalIPs, a.Address)
		}
	}
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready = c.Status
		}
	}
	return n
}

// StaleAfter is Kilo's limit for a node's heartbeat: two check-in periods of
// 30 s (Node.Ready in Kilo's pkg/mesh/backend.go). A node whose
// kilo.squat.ai/last-seen is missing or at least this old is left out.
const StaleAfter = 60 * time.Second

// lastSeen is the node's heartbeat in unix seconds, and whether it has one
// Kilo can read.
func (n Node) lastSeen() (int64, bool) {
	s, err := strconv.ParseInt(n.Annotations[kilov1alpha1.AnnotationLastSeen], 10, 64)
	return s, err == nil
}

// Stale tells whether the node's Kilo heartbeat is missing or at least
// StaleAfter old at now.
func (n Node) Stale(now time.Time) bool {
	s, ok := n.lastSeen()
	return !ok || now.Unix()-s >= int64(StaleAfter/time.Second)
}

// The Kilo annotations an inventory publishes verbatim, and where.
var kiloFields = map[string]func(*kubev1alpha1.KiloAnnotations) *string{
	kilov1alpha1.AnnotationKey:                 func(k *kubev1alpha1.KiloAnnotations) *string { return &k.Key },
	kilov1alpha1.AnnotationWireguardIP:         func(k *kubev1alpha1.KiloAnnotations) *string { return &k.WireguardIP },
	kilov1alpha1.AnnotationEndpoint:            func(k *kubev1alpha1.KiloAnnotations) *string { return &k.Endpoint },
	kilov1alpha1.AnnotationInternalIP:          func(k *kubev1alpha1.KiloAnnotations) *string { return &k.InternalIP },
	kilov1alpha1.AnnotationForceEndpoint:       func(k *kubev1alpha1.KiloAnnotations) *string { return &k.ForceEndpoint },
	kilov1alpha1.AnnotationClustermeshEndpoint: func(k *kubev1alpha1.KiloAnnotations) *string { return &k.ClustermeshEndpoint },
	kilov1alpha1.AnnotationGranularity:         func(k *kubev1alpha1.KiloAnnotations) *string { return &k.Granularity },
	kilov1alpha1.AnnotationPersistentKeepalive: func(k *kubev1alpha1.KiloAnnotations) *string { return &k.PersistentKeepalive },
	kilov1alpha1.AnnotationDiscoveredEndpoints: func(k *kubev1alpha1.KiloAnnotations) *string { return &k.DiscoveredEndpoints },
	kilov1alpha1.AnnotationForceInternalIP:     func(k *kubev1alpha1.KiloAnnotations) *string { return &k.ForceInternalIP },
	kilov1alpha1.AnnotationAllowedLocationIPs:  func(k *kubev1alpha1.KiloAnnotations) *string { return &k.AllowedLocationIPs },
}

// ObservedAt is what an inventory publishes of n at now: the NodeInventory
// contract of provider/inventory (ObserveNode), whose tests hold the two
// equal. Values are not cut to the inventory's bounds: a fixture stays
// within them. A stale node with a heartbeat says since when it is stale; one
// without says nothing, since an inventory counts from the Node's creation,
// which a Node does not describe.
func (n Node) ObservedAt(now time.Time) kubev1alpha1.ObservedNode {
	o := kubev1alpha1.ObservedNode{
		Name:        n.Name,
		PodCIDRs:    cloneSlice(n.PodCIDRs),
		InternalIPs: cloneSlice(n.InternalIPs),
		ExternalIPs: cloneSlice(n.ExternalIPs),
		Ready:       n.Ready == corev1.ConditionTrue,
		Stale:       n.Stale(now),
	}
	if l, ok := n.Annotations[kilov1alpha1.AnnotationLocation]; ok {
		o.Location = l
	} else {
		o.Location = n.Labels[kilov1alpha1.LabelRegion]
	}
	if s, ok := n.lastSeen(); o.Stale && ok && s != 0 {
		at := time.Unix(max(s, 0), 0).Add(StaleAfter)
		if at.After(now) {
			at = now
		}
		since := metav1.NewTime(at.UTC().Truncate(time.Second))
		o.StaleSince = &since
	}
	k := kubev1alpha1.KiloAnnotations{}
	for key, f := range kiloFields {
		if v, ok := n.Annotations[key]; ok {
			*f(&k) = v
		}
	}
	// Kilo reads a present but empty force-internal-ip as "no internal IP",
	// and only the presence of the leader annotation.
	if v, ok := n.Annotations[kilov1alpha1.AnnotationForceInternalIP]; ok && v == "" {
		k.ForceInternalIP = "-"
	}
	if _, ok := n.Annotations[kilov1alpha1.AnnotationLeader]; ok {
		k.Leader = "true"
	}
	if k != (kubev1alpha1.KiloAnnotations{}) {
		o.Kilo = &k
	}
	return o
}

// Observed is what an inventory publishes of n now.
func (n Node) Observed() kubev1alpha1.ObservedNode {
	return n.ObservedAt(time.Now())
}

// Struct is ObservedAt(now) in the form the function's request carries it:
// an element of status.atProvider.nodes of a NodeInventory among the
// observed resources of a RunFunctionRequest.
func (n Node) Struct(now time.Time) *structpb.Struct {
	j, err := json.Marshal(n.ObservedAt(now))
	if err != nil {
		panic(err) // an ObservedNode is plain strings, bools and a time
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		panic(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err) // JSON objects are protobuf Structs
	}
	return s
}

// Structs is Struct(now) of every node, as the list status.atProvider.nodes
// carries them.
func Structs(now time.Time, nodes ...Node) *structpb.Value {
	l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(nodes))}
	for _, n := range nodes {
		l.Values = append(l.Values, structpb.NewStructValue(n.Struct(now)))
	}
	return structpb.NewListValue(l)
}

func cloneSlice(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
