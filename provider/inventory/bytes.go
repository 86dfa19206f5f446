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
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// The memory of the parts of a slim object, in bytes, as a 64-bit Go
// runtime lays them out. A map entry costs its key and value headers and
// about as much again of bucket; the estimate is for bounds, not for
// accounting to the byte.
var (
	nodeSize    = int(reflect.TypeFor[corev1.Node]().Size())
	peerSize    = int(reflect.TypeFor[kilov1alpha1.Peer]().Size())
	addressSize = int(reflect.TypeFor[corev1.NodeAddress]().Size())
	condSize    = int(reflect.TypeFor[corev1.NodeCondition]().Size())
	stringSize  = int(reflect.TypeFor[string]().Size())
	endpointSz  = int(reflect.TypeFor[kilov1alpha1.PeerEndpoint]().Size())
)

// mapEntrySize is what a map[string]string spends on an entry besides the
// bytes of its key and value.
const mapEntrySize = 64

// NodeBytes estimates the memory a slim Node takes in the provider's cache.
func NodeBytes(n *corev1.Node) int {
	b := nodeSize + metaBytes(&n.ObjectMeta) + len(n.Spec.PodCIDR)
	b += stringsBytes(n.Spec.PodCIDRs)
	b += len(n.Status.Addresses) * addressSize
	for _, a := range n.Status.Addresses {
		b += len(a.Address)
	}
	b += len(n.Status.Conditions) * condSize
	return b
}

// PeerBytes estimates the memory a slim Peer takes in the provider's cache.
func PeerBytes(p *kilov1alpha1.Peer) int {
	b := peerSize + metaBytes(&p.ObjectMeta) + stringsBytes(p.Spec.AllowedIPs)
	b += len(p.Spec.PublicKey) + len(p.Spec.PresharedKey)
	if e := p.Spec.Endpoint; e != nil {
		b += endpointSz + len(e.DNSOrIP.DNS) + len(e.DNSOrIP.IP)
	}
	return b
}

func metaBytes(m *metav1.ObjectMeta) int {
	return len(m.Name) + len(m.UID) + len(m.ResourceVersion) + mapBytes(m.Labels) + mapBytes(m.Annotations)
}

func mapBytes(m map[string]string) int {
	b := 0
	for k, v := range m {
		b += mapEntrySize + len(k) + len(v)
	}
	return b
}

func stringsBytes(s []string) int {
	b := len(s) * stringSize
	for _, x := range s {
		b += len(x)
	}
	return b
}
