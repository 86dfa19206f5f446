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

package clusterset

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The import of the benchmarks: a headless Service of 1,000 ready
// endpoints in 200 EndpointSlices of 5, from 4 clusters.
const (
	benchSlices    = 200
	benchPerSlice  = 5
	benchNamespace = "shop"
	benchService   = "db"
)

// benchSlice is slice i of the import, its endpoints' addresses moved by
// shift so that a change changes them.
func benchSlice(i, shift int) *discoveryv1.EndpointSlice {
	var endpoints []discoveryv1.Endpoint
	for j := range benchPerSlice {
		n := i*benchPerSlice + j + shift
		endpoints = append(endpoints, ep(fmt.Sprintf("10.%d.%d.%d", 1+n/65536, n/256%256, n%256), ptr.To(true), fmt.Sprintf("pod-%d", n)))
	}
	return eps(benchNamespace, fmt.Sprintf("%s-%03d", benchService, i), benchService, fmt.Sprintf("cluster-%d", i%4),
		discoveryv1.AddressTypeIPv4, map[string]int32{"http": 8080}, endpoints...)
}

func benchIndex() *Index {
	x := NewIndex()
	x.SetImport(imp(benchNamespace, benchService, mcsv1beta1.Headless, nil, port("http", corev1.ProtocolTCP, 80)))
	for i := range benchSlices {
		x.SetSlice(benchSlice(i, 0))
	}
	return x
}

// tcpWriter records a reply to a client over TCP, which reads up to 64 KiB.
type tcpWriter struct{ writer }

func (w *tcpWriter) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }

// BenchmarkAnswer measures the CPU of one answer of the plugin, over UDP
// (512 bytes, as most clients ask first) and over TCP, for the SRV names
// of a headless import of 1,000 endpoints in 200 slices, and its A name.
// bytes/answer is the size of the reply, uncompressed, before CoreDNS cuts
// it to what the client reads.
//
//	go test ./dns/clusterset/ -run '^$' -bench 'Answer|Rebuild' -benchmem
func BenchmarkAnswer(b *testing.B) {
	h := &Handler{Zone: Zone{Index: benchIndex(), Origin: DefaultZone, TTL: DefaultTTL}}
	svc := benchService + "." + benchNamespace + ".svc." + DefaultZone
	cases := []struct {
		name, qname string
		qtype       uint16
	}{
		{"SRVPort", "_http._tcp." + svc, dns.TypeSRV},
		{"SRVName", svc, dns.TypeSRV},
		{"A", svc, dns.TypeA},
	}
	for _, c := range cases {
		for _, tcp := range []bool{false, true} {
			proto := "UDP"
			var w dns.ResponseWriter = &writer{}
			if tcp {
				proto, w = "TCP", &tcpWriter{}
			}
			b.Run(c.name+"/"+proto, func(b *testing.B) {
				r := new(dns.Msg)
				r.SetQuestion(c.qname, c.qtype)
				size := 0
				for b.Loop() {
					if _, err := h.ServeDNS(context.Background(), w, r); err != nil {
						b.Fatal(err)
					}
				}
				switch rw := w.(type) {
				case *writer:
					size = rw.msg.Len()
				case *tcpWriter:
					size = rw.msg.Len()
				}
				b.ReportMetric(float64(size), "bytes/answer")
			})
		}
	}
}

// BenchmarkRebuild measures what a change of one of the 200 slices of an
// import of 1,000 endpoints costs: the CPU of SetSlice (ns/op), and how
// long queries of the import wait meanwhile. Queries run all along on
// another goroutine; p99-query-ns and p999-query-ns are the 99th and
// 99.9th percentile of the time one A query took, its own CPU included: a
// query that waits for the lock of a rebuild takes as long as the rebuild
// holds it. (The longest query is left out: on a shared machine it is the
// longest the goroutine was not scheduled.)
func BenchmarkRebuild(b *testing.B) {
	x := benchIndex()
	z := Zone{Index: x, Origin: DefaultZone, TTL: DefaultTTL}
	qname := "pod-1.cluster-1." + benchService + "." + benchNamespace + ".svc." + DefaultZone
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		waits []time.Duration
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			start := time.Now()
			z.Lookup(qname, dns.TypeA)
			waits = append(waits, time.Since(start))
		}
	}()
	i := 0
	for b.Loop() {
		i++
		x.SetSlice(benchSlice(i%benchSlices, i%2))
	}
	stop.Store(true)
	wg.Wait()
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)*99/100].Nanoseconds()), "p99-query-ns")
		b.ReportMetric(float64(waits[len(waits)*999/1000].Nanoseconds()), "p999-query-ns")
	}
}

// BenchmarkPublish measures how long a change of the import of
// BenchmarkRebuild holds the locks of queries, every one of its 1,000
// addresses changed: Swap, the lock of every question of the zone, which
// the change holds to replace the Service; Reindex, the lock of PTR
// questions, which it holds to record the addresses that came and went.
// Nothing else of a change is done under a lock that a query takes.
func BenchmarkPublish(b *testing.B) {
	k := key{benchNamespace, benchService}
	services := make([]*service, 2)
	for shift := range services {
		x := NewIndex()
		x.SetImport(imp(benchNamespace, benchService, mcsv1beta1.Headless, nil, port("http", corev1.ProtocolTCP, 80)))
		for i := range benchSlices {
			x.SetSlice(benchSlice(i, shift*benchSlices*benchPerSlice))
		}
		services[shift] = x.services[k]
	}
	b.Run("Swap", func(b *testing.B) {
		x := benchIndex()
		i := 0
		for b.Loop() {
			i++
			x.swap(k, services[i%2])
		}
	})
	b.Run("Reindex", func(b *testing.B) {
		x := benchIndex()
		x.reindex(k, x.services[k], services[0])
		i := 0
		for b.Loop() {
			i++
			x.reindex(k, services[(i+1)%2], services[i%2])
		}
	})
}
