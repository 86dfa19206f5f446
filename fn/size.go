package main

import (
	"reflect"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// responseSize is proto.Size(rsp). The desired resources, nearly all of a
// large response, are sized here: protobuf sizes the map of every Struct
// through reflection, allocating for each key, which took as long as
// composing the resources. The sizes follow protobuf's encoding of each
// message, unknown fields included; TestResponseSize holds them to
// proto.Size.
func responseSize(rsp *fnv1.RunFunctionResponse) int {
	return knownSizes(nil).response(rsp)
}

// knownSizes are the sizes of Values that were added up as they were built
// (see sized): the walk skips them. A large mesh's Peers are most of its
// response, and walking them again took a tenth of the call.
type knownSizes map[*structpb.Value]int

// response is responseSize.
func (known knownSizes) response(rsp *fnv1.RunFunctionResponse) int {
	d := rsp.GetDesired()
	if len(d.GetResources()) == 0 {
		return proto.Size(rsp)
	}
	// The rest of the response is sized by protobuf, without the
	// resources: they are put back before anything else sees it.
	resources := d.Resources
	d.Resources = nil
	rest, state := proto.Size(rsp), proto.Size(d)
	d.Resources = resources
	with := state + known.resourceMap(resources)
	// The State is a field of the response: its length prefix grows too.
	return rest + with - state + protowire.SizeVarint(uint64(with)) - protowire.SizeVarint(uint64(state))
}

// sizeMapEntry is the size of one entry of a map field whose number, key
// and value numbers take one byte each: a key of n bytes and a value of v
// bytes, both always written.
func sizeMapEntry(n, v int) int {
	return 1 + protowire.SizeBytes(1+protowire.SizeBytes(n)+1+protowire.SizeBytes(v))
}

// resourceMap sizes State.resources (field 2).
func (known knownSizes) resourceMap(m map[string]*fnv1.Resource) int {
	n := 0
	for k, r := range m {
		n += sizeMapEntry(len(k), known.resource(r))
	}
	return n
}

// resource sizes a Resource: resource (1), connection_details (2), ready
// (3).
func (known knownSizes) resource(r *fnv1.Resource) int {
	if r == nil {
		return 0
	}
	n := len(r.ProtoReflect().GetUnknown())
	if r.Resource != nil {
		n += 1 + protowire.SizeBytes(known.structure(r.Resource))
	}
	for k, v := range r.ConnectionDetails {
		n += sizeMapEntry(len(k), len(v))
	}
	if r.Ready != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(r.Ready)))
	}
	return n
}

// structure sizes a Struct: fields (1).
func (known knownSizes) structure(s *structpb.Struct) int {
	if s == nil {
		return 0
	}
	n := len(s.ProtoReflect().GetUnknown())
	for k, v := range s.Fields {
		n += sizeMapEntry(len(k), known.value(v))
	}
	return n
}

// value sizes a Value: one field of its oneof kind, written even when it
// holds its zero value.
func (known knownSizes) value(v *structpb.Value) int {
	if v == nil {
		return 0
	}
	if n, ok := known[v]; ok {
		return n
	}
	n := len(v.ProtoReflect().GetUnknown())
	if v.Kind == nil || reflect.ValueOf(v.Kind).IsNil() {
		return n // unset, as protobuf reads a nil wrapper too
	}
	switch k := v.Kind.(type) {
	case *structpb.Value_NullValue:
		n += 1 + protowire.SizeVarint(uint64(int64(k.NullValue)))
	case *structpb.Value_NumberValue:
		n += 1 + protowire.SizeFixed64()
	case *structpb.Value_StringValue:
		n += 1 + protowire.SizeBytes(len(k.StringValue))
	case *structpb.Value_BoolValue:
		n += 1 + protowire.SizeVarint(protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		n += 1 + protowire.SizeBytes(known.structure(k.StructValue))
	case *structpb.Value_ListValue:
		n += 1 + protowire.SizeBytes(known.list(k.ListValue))
	}
	return n
}

// list sizes a ListValue: values (1).
func (known knownSizes) list(l *structpb.ListValue) int {
	if l == nil {
		return 0
	}
	n := len(l.ProtoReflect().GetUnknown())
	for _, v := range l.Values {
		n += 1 + protowire.SizeBytes(known.value(v))
	}
	return n
}

// A sized is a Value built here with its size, added up as it was built:
// it has no unknown fields, and nothing changes it once built.
type sized struct {
	v *structpb.Value
	n int
}

func (a *valueArena) str(s string) sized {
	return sized{next(&a.strs).init(s), 1 + protowire.SizeBytes(len(s))}
}

func (a *valueArena) num(n int) sized {
	return sized{next(&a.nums).init(n), 1 + protowire.SizeFixed64()}
}

func (a *valueArena) strings(ss []string) sized {
	vs := make([]*structpb.Value, len(ss))
	n := 0
	for i, s := range ss {
		v := a.str(s)
		vs[i] = v.v
		n += 1 + protowire.SizeBytes(v.n)
	}
	return sized{next(&a.lists).init(vs), 1 + protowire.SizeBytes(n)}
}

// sizedFields are the fields of a Struct being built, each set once, and
// their size.
type sizedFields struct {
	a *valueArena
	f map[string]*structpb.Value
	n int
}

func (a *valueArena) fields(n int) *sizedFields {
	return &sizedFields{a: a, f: make(map[string]*structpb.Value, n)}
}

func (s *sizedFields) set(k string, v sized) {
	s.f[k] = v.v
	s.n += sizeMapEntry(len(k), v.n)
}

// object is the Value of the Struct of these fields.
func (s *sizedFields) object() sized {
	return sized{next(&s.a.objects).init(s.f), 1 + protowire.SizeBytes(s.n)}
}
