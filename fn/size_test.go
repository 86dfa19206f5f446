package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// TestSizedFields fails when a message sized by hand gains or renumbers a
// field: its sizer must then learn it.
func TestSizedFields(t *testing.T) {
	want := map[protoreflect.FullName]string{
		"apiextensions.fn.proto.v1.State":    "composite:1 resources:2",
		"apiextensions.fn.proto.v1.Resource": "resource:1 connection_details:2 ready:3",
		"google.protobuf.Struct":             "fields:1",
		"google.protobuf.Value":              "null_value:1 number_value:2 string_value:3 bool_value:4 struct_value:5 list_value:6",
		"google.protobuf.ListValue":          "values:1",
	}
	for _, m := range []proto.Message{&fnv1.State{}, &fnv1.Resource{}, &structpb.Struct{}, &structpb.Value{}, &structpb.ListValue{}} {
		d := m.ProtoReflect().Descriptor()
		var got []string
		for i := range d.Fields().Len() {
			f := d.Fields().Get(i)
			got = append(got, fmt.Sprintf("%s:%d", f.Name(), f.Number()))
		}
		if g := strings.Join(got, " "); g != want[d.FullName()] {
			t.Errorf("%s has fields %q, the sizer knows %q", d.FullName(), g, want[d.FullName()])
		}
	}
}

// withUnknown adds unknown fields to a message, as a newer sender's
// fields are kept by protobuf.
func withUnknown[M proto.Message](m M, n int) M {
	var b []byte
	for i := range n {
		b = protowire.AppendTag(b, protowire.Number(1000+i), protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(strings.Repeat("u", i*40)))
	}
	m.ProtoReflect().SetUnknown(b)
	return m
}

// randomValue is a Value of every kind, with the sizes where a length
// takes one more byte, nil and empty parts, and unknown fields.
func randomValue(r *rand.Rand, depth int) *structpb.Value {
	lengths := []int{0, 1, 127, 128, 200, 16383, 16384}
	var v *structpb.Value
	switch k := r.IntN(12); {
	case k == 0:
		return nil
	case k == 1:
		v = &structpb.Value{}
	case k == 2:
		v = &structpb.Value{Kind: (*structpb.Value_StructValue)(nil)}
	case k == 3:
		v = structpb.NewNullValue()
		if r.IntN(2) == 0 {
			v.Kind = &structpb.Value_NullValue{NullValue: structpb.NullValue(-1 - r.IntN(3))}
		}
	case k == 4:
		v = structpb.NewNumberValue([]float64{0, -1.5, math.NaN(), math.Inf(1)}[r.IntN(4)])
	case k == 5:
		v = structpb.NewStringValue(strings.Repeat("\xffa", lengths[r.IntN(len(lengths))]/2))
	case k == 6:
		v = structpb.NewBoolValue(r.IntN(2) == 0)
	case k == 7:
		v = &structpb.Value{Kind: &structpb.Value_StructValue{}}
	case k == 8:
		v = &structpb.Value{Kind: &structpb.Value_ListValue{}}
	case k < 10 && depth > 0:
		v = structpb.NewStructValue(randomStruct(r, depth-1))
	case depth > 0:
		l := &structpb.ListValue{}
		for range r.IntN(5) {
			l.Values = append(l.Values, randomValue(r, depth-1))
		}
		if r.IntN(4) == 0 {
			withUnknown(l, 1)
		}
		v = structpb.NewListValue(l)
	default:
		v = structpb.NewStringValue("leaf")
	}
	if r.IntN(5) == 0 {
		withUnknown(v, 1+r.IntN(2))
	}
	return v
}

func randomStruct(r *rand.Rand, depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range r.IntN(6) {
		s.Fields[strings.Repeat("k", []int{0, 1, 130}[r.IntN(3)])+strconv.Itoa(i)] = randomValue(r, depth)
	}
	if r.IntN(4) == 0 {
		withUnknown(s, 1)
	}
	return s
}

// TestResponseSize holds responseSize to proto.Size: on random resources,
// and on what RunFunction answers.
func TestResponseSize(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		resources := map[string]*fnv1.Resource{}
		for j := range r.IntN(6) {
			res := &fnv1.Resource{}
			switch r.IntN(4) {
			case 0:
				res = nil
			case 1:
			default:
				res.Resource = randomStruct(r, 4)
			}
			if res != nil {
				res.Ready = fnv1.Ready(r.IntN(4) - 1)
				if r.IntN(3) == 0 {
					res.ConnectionDetails = map[string][]byte{"": nil, "password": []byte(strings.Repeat("p", 200))}
				}
				if r.IntN(5) == 0 {
					withUnknown(res, 1)
				}
			}
			resources[strings.Repeat("r", j*70)] = res
		}
		state := &fnv1.State{Resources: resources}
		if r.IntN(2) == 0 {
			state.Composite = &fnv1.Resource{Resource: randomStruct(r, 2)}
		}
		if r.IntN(5) == 0 {
			withUnknown(state, 2)
		}
		rsp := &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{Tag: "t"}, Desired: state}
		if r.IntN(2) == 0 {
			rsp.Results = []*fnv1.Result{{Message: strings.Repeat("m", r.IntN(300))}}
		}
		sameSize(t, fmt.Sprint("random ", i), rsp)
	}
	sameSize(t, "no desired state", &fnv1.RunFunctionResponse{Meta: &fnv1.ResponseMeta{Tag: "t"}})
	sameSize(t, "no resources", &fnv1.RunFunctionResponse{Desired: &fnv1.State{}})

	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, maxResponse: 1 << 30, maxPeerSet: 1 << 30}
	for _, size := range []struct{ clusters, nodes int }{{2, 3}, {3, 20}, {5, 60}} {
		for _, delivery := range []string{"Objects", "PeerSet"} {
			req := largeMesh(t, delivery, size.clusters, size.nodes)
			rsp, err := f.RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			sameSize(t, fmt.Sprintf("%s/%dx%d", delivery, size.clusters, size.nodes), rsp)
		}
	}
}

// sameSize checks responseSize against proto.Size, and that it leaves the
// response as it was.
func sameSize(t *testing.T, name string, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	before := proto.Clone(rsp)
	resources := rsp.GetDesired().GetResources()
	if got, want := responseSize(rsp), proto.Size(rsp); got != want {
		t.Errorf("%s: responseSize %d, proto.Size %d", name, got, want)
	}
	if !proto.Equal(rsp, before) || len(resources) > 0 && fmt.Sprintf("%p", rsp.GetDesired().GetResources()) != fmt.Sprintf("%p", resources) {
		t.Errorf("%s: responseSize changed the response", name)
	}
}

// TestRunSize holds the size run checks against the limit to proto.Size of
// what it answers: the Peers it sized as it built them included, in every
// form of delivery.
func TestRunSize(t *testing.T) {
	// The TTL of a settling mesh stays as it is: the response is sized
	// before it is set.
	f := &Function{log: logging.NewNopLogger(), ttl: settleTTL, maxResponse: 1 << 30, maxPeerSet: 1 << 30}
	for _, size := range []struct{ clusters, nodes int }{{2, 3}, {3, 20}, {5, 60}} {
		for _, delivery := range []string{"Objects", "PeerSet", "PeerSet/shared"} {
			name := fmt.Sprintf("%s/%dx%d", delivery, size.clusters, size.nodes)
			req := largeMesh(t, strings.TrimSuffix(delivery, "/shared"), size.clusters, size.nodes)
			if strings.HasSuffix(delivery, "/shared") {
				meta := req.GetObserved().GetComposite().GetResource().GetFields()["metadata"].GetStructValue()
				meta.Fields["annotations"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{AnnotationShareAbove: structpb.NewStringValue("0")}})
			}
			// Once as created, once with its SegmentSets written.
			for round := range 2 {
				rsp, result, n := f.run(req)
				if result != resultPlanned {
					t.Fatalf("%s: run ended %s: %v", name, result, rsp.GetResults())
				}
				if want := proto.Size(rsp); n != want {
					t.Errorf("%s, round %d: run sized its response %d, proto.Size %d", name, round, n, want)
				}
				for res, r := range rsp.GetDesired().GetResources() {
					if isSegments(res) {
						req.Observed.Resources[res] = &fnv1.Resource{Resource: r.GetResource()}
					}
				}
			}
		}
	}
}
