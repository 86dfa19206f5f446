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

package remote

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

// NodeAnnotations are the Node annotations a watch keeps: the Kilo
// annotations of the inventory contract and the location. Kilo's heartbeat
// (kilo.squat.ai/last-seen) is deliberately not among them.
var NodeAnnotations = []string{
	kilov1alpha1.AnnotationKey,
	kilov1alpha1.AnnotationWireguardIP,
	kilov1alpha1.AnnotationEndpoint,
	kilov1alpha1.AnnotationInternalIP,
	kilov1alpha1.AnnotationForceEndpoint,
	kilov1alpha1.AnnotationClustermeshEndpoint,
	kilov1alpha1.AnnotationGranularity,
	kilov1alpha1.AnnotationPersistentKeepalive,
	kilov1alpha1.AnnotationDiscoveredEndpoints,
	kilov1alpha1.AnnotationLocation,
}

// SlimNode keeps only what the inventory contract reads of a Node: its name,
// labels (for node selectors and the region), the annotations above, pod
// CIDRs, internal and external addresses, and the status of the Ready
// condition without its heartbeat times. A Node of 5-20 KB becomes a few
// hundred bytes, and Kilo's and the kubelet's heartbeats leave it unchanged.
// It is idempotent, as a watch's transform must be.
func SlimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:            n.Name,
		UID:             n.UID,
		ResourceVersion: n.ResourceVersion,
		Labels:          n.Labels,
	}}
	for _, k := range NodeAnnotations {
		if v, ok := n.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = make(map[string]string, 4)
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.PodCIDR = n.Spec.PodCIDR
	out.Spec.PodCIDRs = n.Spec.PodCIDRs
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// SlimPeer keeps a Peer's name, identity, version, labels and spec.
func SlimPeer(obj any) (any, error) {
	p, ok := obj.(*kilov1alpha1.Peer)
	if !ok {
		return obj, nil
	}
	return &kilov1alpha1.Peer{
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
			Labels:          p.Labels,
		},
		Spec: p.Spec,
	}, nil
}

// sameButVersion reports whether two slim objects differ only in their
// resource version, i.e. whether an update carries nothing anyone reads.
func sameButVersion(a, b any) bool {
	switch x := a.(type) {
	case *corev1.Node:
		y, ok := b.(*corev1.Node)
		if !ok {
			return false
		}
		xc, yc := *x, *y
		xc.ResourceVersion, yc.ResourceVersion = "", ""
		return equality.Semantic.DeepEqual(&xc, &yc)
	case *kilov1alpha1.Peer:
		y, ok := b.(*kilov1alpha1.Peer)
		if !ok {
			return false
		}
		xc, yc := *x, *y
		xc.ResourceVersion, yc.ResourceVersion = "", ""
		return equality.Semantic.DeepEqual(&xc, &yc)
	}
	return false
}
