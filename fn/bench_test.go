package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// meshSizes are the benchmarked meshes: clusters x nodes per cluster, every
// node its own Peer (Node granularity). Each case is named by its delivery
// and size (PeerSet/20x250) and reports its response size (rsp-bytes).
var meshSizes = []struct{ clusters, nodes int }{{3, 20}, {5, 200}, {10, 500}, {20, 250}}

// BenchmarkRunFunction measures RunFunction, and reports the size of its
// response and its time relative to proto.Marshal of that response (the
// least any function must spend to answer). Meshes past the response limit
// are measured with the limit lifted.
//
//	go test ./fn/ -run='^$' -bench=RunFunction -benchmem
func BenchmarkRunFunction(b *testing.B) {
	for _, size := range meshSizes {
		for _, delivery := range []string{"Objects", "PeerSet"} {
			b.Run(fmt.Sprintf("%s/%dx%d", delivery, size.clusters, size.nodes), func(b *testing.B) {
				req := largeMesh(b, delivery, size.clusters, size.nodes)
				f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, maxResponse: 1 << 30, maxPeerSet: 1 << 30}
				rsp, err := f.RunFunction(context.Background(), req)
				if err != nil || len(rsp.GetResults()) > 0 && rsp.GetResults()[0].GetSeverity() == 1 {
					b.Fatalf("RunFunction: %v %v", err, rsp.GetResults())
				}
				// The mesh as it runs: the SegmentSets of the shared form
				// exist, so the PeerSets reference them.
				for name, r := range rsp.GetDesired().GetResources() {
					if isSegments(name) {
						req.Observed.Resources[name] = &fnv1.Resource{Resource: r.GetResource()}
					}
				}
				if rsp, err = f.RunFunction(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				marshal := timeMarshal(b, rsp)
				b.ResetTimer()
				for b.Loop() {
					if _, err := f.RunFunction(context.Background(), req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(proto.Size(rsp)), "rsp-bytes")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(marshal.Nanoseconds()), "x-marshal")
			})
		}
	}
}

// timeMarshal is the mean time of proto.Marshal of a message.
func timeMarshal(b *testing.B, m proto.Message) time.Duration {
	b.Helper()
	const rounds = 5
	start := time.Now()
	for range rounds {
		if _, err := proto.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / rounds
}

// BenchmarkServicesResponse measures what sharing Services adds to the
// response of a 5 x 200 PeerSet mesh: one ServiceSync per member, which
// names the members, the shared namespaces and the networks, never a
// Service. Its rsp-bytes do not depend on how many Services the members
// export; extra-bytes is the difference from the same mesh without
// spec.services.
//
//	go test ./fn/ -run='^$' -bench=ServicesResponse -benchmem
func BenchmarkServicesResponse(b *testing.B) {
	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, maxResponse: 1 << 30, maxPeerSet: 1 << 30}
	run := func(req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
		rsp, err := f.RunFunction(context.Background(), req)
		if err != nil || len(rsp.GetResults()) > 0 && rsp.GetResults()[0].GetSeverity() == 1 {
			b.Fatalf("RunFunction: %v %v", err, rsp.GetResults())
		}
		return rsp
	}
	without := proto.Size(run(largeMesh(b, "PeerSet", 5, 200)))
	req := largeMesh(b, "PeerSet", 5, 200)
	shared := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"namespaces": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("shop"), structpb.NewStringValue("web")}}),
	}})
	req.GetObserved().GetComposite().GetResource().GetFields()["spec"].GetStructValue().Fields["services"] = shared
	rsp := run(req)
	with := proto.Size(rsp)
	syncs := 0
	for name := range rsp.GetDesired().GetResources() {
		if strings.HasPrefix(name, "services-") {
			syncs++
		}
	}
	if syncs != 5 {
		b.Fatalf("%d ServiceSyncs composed, want one per member (5)", syncs)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.RunFunction(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(with), "rsp-bytes")
	b.ReportMetric(float64(with-without), "extra-bytes")
}
