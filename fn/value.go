package main

// The protobuf Struct plumbing that writes the response, in one place:
// building Values (the resources are built directly in protobuf form: a
// large mesh composes thousands, and a detour through JSON would cost more
// than the planning), the arena that hands out the Values of Peers, and
// sizing a response without reflection. Reading a Struct (get, condition,
// fromValue) belongs to observed.go, which holds everything the function
// reads from the request.

import (
	"encoding/json"
	"reflect"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// Each helper allocates a Value together with the wrapper of its kind (and
// the Struct or ListValue it holds), once instead of two or three times:
// they live and die together, and a large mesh makes hundreds of thousands.

type strValue struct {
	v structpb.Value
	k structpb.Value_StringValue
}

func (b *strValue) init(s string) *structpb.Value {
	b.k.StringValue = s
	b.v.Kind = &b.k
	return &b.v
}

type numValue struct {
	v structpb.Value
	k structpb.Value_NumberValue
}

func (b *numValue) init(n int) *structpb.Value {
	b.k.NumberValue = float64(n)
	b.v.Kind = &b.k
	return &b.v
}

type objectValue struct {
	v structpb.Value
	k structpb.Value_StructValue
	s structpb.Struct
}

func (b *objectValue) init(f map[string]*structpb.Value) *structpb.Value {
	b.s.Fields = f
	b.k.StructValue = &b.s
	b.v.Kind = &b.k
	return &b.v
}

type listValue struct {
	v structpb.Value
	k structpb.Value_ListValue
	l structpb.ListValue
}

func (b *listValue) init(vs []*structpb.Value) *structpb.Value {
	b.l.Values = vs
	b.k.ListValue = &b.l
	b.v.Kind = &b.k
	return &b.v
}

func str(s string) *structpb.Value { return new(strValue).init(s) }

func object(f map[string]*structpb.Value) *structpb.Value { return new(objectValue).init(f) }

func list(vs []*structpb.Value) *structpb.Value { return new(listValue).init(vs) }

// A valueArena hands out the Values of the Peers from blocks of them, not
// one allocation each: every Peer takes a dozen, and they all live as long
// as the response.
type valueArena struct {
	strs    []strValue
	nums    []numValue
	objects []objectValue
	lists   []listValue
}

// arenaBlock is how many Values of a kind a valueArena allocates at once.
const arenaBlock = 256

// next takes the next Value of a block, and allocates the next block when
// it is used up.
func next[T any](block *[]T) *T {
	if len(*block) == 0 {
		*block = make([]T, arenaBlock)
	}
	b := &(*block)[0]
	*block = (*block)[1:]
	return b
}

func stringList(ss []string) *structpb.Value {
	vs := make([]*structpb.Value, len(ss))
	for i, s := range ss {
		vs[i] = str(s)
	}
	return list(vs)
}

func stringMap(m map[string]string) *structpb.Value {
	f := make(map[string]*structpb.Value, len(m))
	for k, v := range m {
		f[k] = str(v)
	}
	return object(f)
}

// toValue converts a small Go value through JSON.
func toValue(v any) (*structpb.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := &structpb.Value{}
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return out, nil
}

// converter builds the protobuf form of Peers, sharing the parts that repeat:
// the labels of a source cluster and the allowedIPs a segment has in most
// targets.
type converter struct {
	labels  map[string]*structpb.Value // by source cluster
	sources map[string]sized           // by source cluster
	allowed map[*string]sized          // by the address of a slice's first element
	// sizes are those of the Peers desiredPeer built.
	sizes knownSizes
	arena valueArena
}

func newConverter() *converter {
	return &converter{labels: map[string]*structpb.Value{}, sources: map[string]sized{}, allowed: map[*string]sized{}, sizes: knownSizes{}}
}

// labelsOf converts the labels of a Peer; every Peer of a source cluster
// carries the same ones.
func (c *converter) labelsOf(p *kilov1alpha1.Peer) *structpb.Value {
	src := p.Labels[meshv1alpha1.LabelSourceCluster]
	if v, ok := c.labels[src]; ok {
		return v
	}
	v := stringMap(p.Labels)
	c.labels[src] = v
	return v
}

// sourceLabel is the one label of a Peer that is not its PeerSet's selector.
func (c *converter) sourceLabel(p *kilov1alpha1.Peer) sized {
	src := p.Labels[meshv1alpha1.LabelSourceCluster]
	if v, ok := c.sources[src]; ok {
		return v
	}
	f := c.arena.fields(1)
	f.set(meshv1alpha1.LabelSourceCluster, c.arena.str(src))
	v := f.object()
	c.sources[src] = v
	return v
}

func (c *converter) allowedOf(ips []string) sized {
	if len(ips) == 0 {
		return c.arena.strings(ips)
	}
	key := &ips[0]
	if v, ok := c.allowed[key]; ok && len(v.v.GetListValue().GetValues()) == len(ips) {
		return v
	}
	v := c.arena.strings(ips)
	c.allowed[key] = v
	return v
}

func (c *converter) peerSpec(s *kilov1alpha1.PeerSpec) sized {
	f := c.arena.fields(4)
	f.set("allowedIPs", c.allowedOf(s.AllowedIPs))
	f.set("publicKey", c.arena.str(s.PublicKey))
	if s.PersistentKeepalive > 0 {
		f.set("persistentKeepalive", c.arena.num(s.PersistentKeepalive))
	}
	if e := s.Endpoint; e != nil {
		host := c.arena.fields(2)
		if e.DNSOrIP.IP != "" {
			host.set("ip", c.arena.str(e.DNSOrIP.IP))
		}
		if e.DNSOrIP.DNS != "" {
			host.set("dns", c.arena.str(e.DNSOrIP.DNS))
		}
		endpoint := c.arena.fields(2)
		endpoint.set("dnsOrIP", host.object())
		endpoint.set("port", c.arena.num(int(e.Port)))
		f.set("endpoint", endpoint.object())
	}
	return f.object()
}

// desiredPeer is a Peer as a PeerSet or SegmentSet holds it. Its size is
// kept: the response is sized without walking it again.
func (c *converter) desiredPeer(p *kilov1alpha1.Peer) *structpb.Value {
	f := c.arena.fields(3)
	f.set("name", c.arena.str(p.Name))
	f.set("labels", c.sourceLabel(p))
	f.set("spec", c.peerSpec(&p.Spec))
	v := f.object()
	c.sizes[v.v] = v.n
	return v.v
}

func (c *converter) peer(p *kilov1alpha1.Peer) *structpb.Value {
	return object(map[string]*structpb.Value{
		"apiVersion": str(kilov1alpha1.APIVersion),
		"kind":       str(kilov1alpha1.Kind),
		"metadata":   object(map[string]*structpb.Value{"name": str(p.Name), "labels": c.labelsOf(p)}),
		"spec":       c.peerSpec(&p.Spec).v,
	})
}

func providerConfigRef(r meshv1alpha1.ProviderConfigReference) *structpb.Value {
	kind := r.Kind
	if kind == "" {
		kind = "ProviderConfig"
	}
	return object(map[string]*structpb.Value{"kind": str(kind), "name": str(r.Name)})
}

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
