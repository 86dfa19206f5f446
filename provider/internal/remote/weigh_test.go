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
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// huge is a string a hostile member's API server sends where the API holds
// a short one.
func huge(c byte, n int) string { return strings.Repeat(string(c), n) }

// hostileMeta is an object's metadata as a hostile API server may send it:
// every string far past its limit, every label kilomesh keeps too.
func hostileMeta(i int) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name: strconv.Itoa(i) + huge('n', 64<<10), Namespace: huge('s', 16<<10), UID: types.UID(huge('u', 16<<10)),
		ResourceVersion: huge('9', 16<<10), Labels: map[string]string{}, Annotations: map[string]string{"a": huge('a', 64<<10)},
	}
	for _, k := range keptLabels {
		m.Labels[k] = huge('l', 16<<10)
	}
	return m
}

// hostileSlice is an EndpointSlice like the one that once held 14 MB slim
// and weighed 20 KB (x728): 200 endpoints whose host names and addresses
// are 72 KB each, its port's name as long, its metadata too.
func hostileSlice(i int) kruntime.Object {
	s := &discoveryv1.EndpointSlice{ObjectMeta: hostileMeta(i), AddressType: discoveryv1.AddressTypeIPv4}
	for range 200 {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1" + huge('1', 8<<10), huge('2', 1<<10)},
			Hostname:   ptr.To(huge('h', 64<<10)),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(huge('x', 1<<10)),
		})
	}
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To(huge('p', 64<<10)), Port: ptr.To(int32(80)), Protocol: ptr.To(corev1.Protocol(huge('t', 1<<10))), AppProtocol: ptr.To(huge('a', 4<<10))}}
	return s
}

func hostileService(i int) kruntime.Object {
	s := &corev1.Service{ObjectMeta: hostileMeta(i), Spec: corev1.ServiceSpec{
		Type: corev1.ServiceType(huge('t', 16<<10)), ClusterIP: huge('1', 16<<10), SessionAffinity: corev1.ServiceAffinity(huge('s', 16<<10)),
		Selector:              map[string]string{"app": huge('a', 16<<10)},
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicy(huge('i', 16<<10))), TrafficDistribution: ptr.To(huge('d', 16<<10)),
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(10))}},
	}}
	for range 1000 {
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, huge('1', 1<<10))
		s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPFamily(huge('f', 1<<10)))
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: huge('p', 4<<10), Protocol: corev1.Protocol(huge('t', 1<<10)), AppProtocol: ptr.To(huge('a', 4<<10)), Port: 80})
	}
	return s
}

func hostileExport(i int) kruntime.Object {
	e := &mcsv1beta1.ServiceExport{ObjectMeta: hostileMeta(i)}
	for range 1000 {
		e.Status.Conditions = append(e.Status.Conditions, metav1.Condition{Type: huge('t', 8<<10), Status: metav1.ConditionStatus(huge('s', 8<<10)), Reason: huge('r', 8<<10), Message: huge('m', 8<<10)})
	}
	return e
}

// fullExport is a ServiceExport that exports as many labels and
// annotations as are kept, of as many bytes: many small strings in maps.
func fullExport(i int) kruntime.Object {
	e := &mcsv1beta1.ServiceExport{ObjectMeta: hostileMeta(i), Spec: mcsv1beta1.ServiceExportSpec{
		ExportedLabels: map[string]string{}, ExportedAnnotations: map[string]string{},
	}}
	for j := range MaxExportedEntries {
		e.Spec.ExportedLabels[fmt.Sprintf("l%03d", j)+huge('k', 100)] = huge('v', 63)
		e.Spec.ExportedAnnotations[fmt.Sprintf("a%03d", j)+huge('k', 100)] = huge('w', 160)
	}
	return e
}

func hostileImport(i int) kruntime.Object {
	s := &mcsv1beta1.ServiceImport{ObjectMeta: hostileMeta(i), Spec: mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ServiceImportType(huge('t', 16<<10)), SessionAffinity: corev1.ServiceAffinity(huge('s', 16<<10)),
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicy(huge('i', 16<<10))), TrafficDistribution: ptr.To(huge('d', 16<<10)),
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(10))}},
	}}
	for range 2000 {
		s.Spec.IPs = append(s.Spec.IPs, huge('1', 1<<10))
		s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPFamily(huge('f', 1<<10)))
		s.Spec.Ports = append(s.Spec.Ports, mcsv1beta1.ServicePort{Name: huge('p', 4<<10), Protocol: corev1.Protocol(huge('t', 1<<10)), AppProtocol: ptr.To(huge('a', 1<<10)), Port: 80})
		s.Status.Clusters = append(s.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: huge('c', 4<<10)})
	}
	return s
}

// held returns what n slim objects hold in the heap once the objects they
// were made from are gone, and what they weigh. Each object is decoded from
// JSON, as a client decodes what a member sends.
func held(t *testing.T, n int, build func(int) kruntime.Object, slim func(kruntime.Object) kruntime.Object, weigh func(kruntime.Object) int) (heap, weighed int) {
	t.Helper()
	raw := make([][]byte, n)
	for i := range raw {
		b, err := json.Marshal(build(i))
		if err != nil {
			t.Fatal(err)
		}
		raw[i] = b
	}
	empty := reflectNew(build(0))
	kept := make([]kruntime.Object, n)
	var before, after runtime.MemStats
	// Twice: a sync.Pool (encoding/json's buffers) is emptied over two.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, b := range raw {
		o := reflectNew(empty)
		if err := json.Unmarshal(b, o); err != nil {
			t.Fatal(err)
		}
		kept[i] = slim(o)
		weighed += weigh(kept[i])
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	runtime.KeepAlive(raw)
	return int(after.HeapAlloc) - int(before.HeapAlloc), weighed
}

// reflectNew is a new, empty object of the type of o.
func reflectNew(o kruntime.Object) kruntime.Object {
	return reflect.New(reflect.TypeOf(o).Elem()).Interface().(kruntime.Object)
}

// TestWeighHolds pins that no slim object weighs less than it holds,
// whatever a member's API server sends: the bound of a namespace's watch
// (64 MiB) is a bound on the provider's memory. A hostile EndpointSlice
// once held 14 MB slim and weighed 20 KB: the bound admitted 45 GiB.
func TestWeighHolds(t *testing.T) {
	const copies = 4
	cases := map[string]struct {
		reason string
		build  func(int) kruntime.Object
		slim   func(kruntime.Object) kruntime.Object
	}{
		"EndpointSlice":         {reason: "Host names, addresses, port names and metadata are kept only up to their API limits, and weighed byte for byte.", build: hostileSlice, slim: slimSlice},
		"Service":               {reason: "At most two cluster IPs and IP families are kept, and 256 ports, each cut.", build: hostileService, slim: slimService},
		"ServiceExport":         {reason: "At most 16 conditions are kept, each string cut; exported labels and annotations past their bounds are not kept.", build: hostileExport, slim: slimExport},
		"ServiceExportAtBounds": {reason: "Exported labels and annotations within their bounds are kept whole, and weighed.", build: fullExport, slim: slimExport},
		"ServiceImport":         {reason: "An import's spec and clusters are kept only within their limits.", build: hostileImport, slim: slimImport},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			heap, weighed := held(t, copies, tc.build, tc.slim, weighSlim)
			t.Logf("%d slim %ss hold %d bytes and weigh %d", copies, name, heap, weighed)
			if weighed < heap {
				t.Errorf("\n%s\n%d slim %ss hold %d bytes in the heap but weigh %d: x%.1f underweight", tc.reason, copies, name, heap, weighed, float64(heap)/float64(weighed))
			}
			// What is kept is bounded whatever is sent: an honest object of
			// this kind holds no more.
			if perObject := weighed / copies; perObject > 1<<20 {
				t.Errorf("\n%s\none slim %s weighs %d bytes, want it bounded to 1 MiB", tc.reason, name, perObject)
			}
		})
	}
}

// TestSlimKeepsTheAPI pins what the slim forms keep of honest objects:
// every value the API allows, whole.
func TestSlimKeepsTheAPI(t *testing.T) {
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-abcde", Namespace: "shop", UID: "0b8d4a1e-1f34-4d1a-9a0c-6c4b1d2e3f40", ResourceVersion: "12345", Labels: map[string]string{discoveryv1.LabelServiceName: "db", "other": "x"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"fd00::1", "fd00::2"}, Hostname: ptr.To(huge('h', 63)), Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(huge('p', 63)), Port: ptr.To(int32(5432)), Protocol: ptr.To(corev1.ProtocolSCTP), AppProtocol: ptr.To("kubernetes.io/h2c")}},
	}
	want := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-abcde", Namespace: "shop", UID: "0b8d4a1e-1f34-4d1a-9a0c-6c4b1d2e3f40", ResourceVersion: "12345", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"fd00::1"}, Hostname: ptr.To(huge('h', 63)), Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(huge('p', 63)), Port: ptr.To(int32(5432)), Protocol: ptr.To(corev1.ProtocolSCTP), AppProtocol: ptr.To("kubernetes.io/h2c")}},
	}
	if diff := cmp.Diff(want, slimSlice(slice)); diff != "" {
		t.Errorf("slimSlice(...): -want, +got:\n%s", diff)
	}
	got := slimSlice(slice).(*discoveryv1.EndpointSlice)
	if got.Endpoints[0].Hostname == slice.Endpoints[0].Hostname || got.Endpoints[0].Conditions.Ready == slice.Endpoints[0].Conditions.Ready {
		t.Error("slimSlice(...): the slim form shares a pointer with the object it was made from")
	}
}
