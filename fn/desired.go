package main

import (
	"encoding/json"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// The resources are built directly in protobuf form: a large mesh composes
// thousands, and a detour through JSON would cost more than the planning.

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

// get walks nested objects of a resource: get(s, "spec", "forProvider",
// "manifest"). A missing field is nil, whose getters return zero values.
func get(s *structpb.Struct, path ...string) *structpb.Value {
	var v *structpb.Value
	for _, k := range path {
		v = s.GetFields()[k]
		s = v.GetStructValue()
	}
	return v
}

func providerConfigRef(r meshv1alpha1.ProviderConfigReference) *structpb.Value {
	kind := r.Kind
	if kind == "" {
		kind = "ProviderConfig"
	}
	return object(map[string]*structpb.Value{"kind": str(kind), "name": str(r.Name)})
}

// A composition is the desired state being written for one mesh.
type composition struct {
	x       *xrMesh
	o       *observed
	desired map[string]*fnv1.Resource
	conv    *converter
	// owned are the labels that mark the mesh's Peers in every member.
	owned *structpb.Value
	// maxPeerSet is the most bytes a PeerSet may hold.
	maxPeerSet int
	// shared is the shared form of the PeerSets, nil when they hold their
	// Peers inline.
	shared *sharedForm
}

// put adds a composed resource, ready when its observed self is.
func (cp *composition) put(name string, s *structpb.Struct) {
	cp.desired[name] = &fnv1.Resource{Resource: s, Ready: ready(cp.o.resources[name])}
}

// compose writes the desired composed resources of a planned mesh: one
// NodeInventory per member, and its Peers as its delivery writes them. It
// returns the sizes of the Values it added up as it built them.
func compose(rsp *fnv1.RunFunctionResponse, x *xrMesh, o *observed, plan *mesh.Plan, maxPeerSet, threshold int) (knownSizes, error) {
	if maxPeerSet == 0 {
		maxPeerSet = maxPeerSetBytes
	}
	cp := &composition{
		x:          x,
		o:          o,
		desired:    map[string]*fnv1.Resource{},
		conv:       newConverter(),
		owned:      stringMap(mesh.OwnedLabels(x.Namespace, x.Name)),
		maxPeerSet: maxPeerSet,
	}
	keepUnobserved(x, o, plan)
	d := delivererOf(x)
	handOver(cp, x, d)
	if _, ok := d.(peerSetDelivery); ok && useShared(o, plan.PeerRefs, threshold) {
		sf, err := share(x, plan.PeerRefs)
		if err != nil {
			return nil, err
		}
		cp.shared = sf
		composeSegments(cp, sf)
	}
	for _, c := range x.Spec.Clusters {
		params := map[string]*structpb.Value{"ownedPeerLabels": cp.owned}
		if c.NodeSelector != nil {
			sel, err := toValue(c.NodeSelector)
			if err != nil {
				return nil, errors.Wrapf(err, "cannot convert the nodeSelector of cluster %s", c.Name)
			}
			params["nodeSelector"] = sel
		}
		cp.put(prefixInventory+c.Name, &structpb.Struct{Fields: map[string]*structpb.Value{
			"apiVersion": str(kubev1alpha1.GroupVersion.String()),
			"kind":       str(kubev1alpha1.NodeInventoryKind),
			"metadata": object(map[string]*structpb.Value{
				"labels":      stringMap(memberLabels(x.Namespace, c)),
				"annotations": stringMap(map[string]string{meshv1alpha1.AnnotationMeshName: x.Name}),
			}),
			"spec": object(map[string]*structpb.Value{
				"providerConfigRef": providerConfigRef(c.ProviderConfigRef),
				"forProvider":       object(params),
			}),
		}})
		if err := d.compose(cp, c, plan.PeerRefs[c.Name]); err != nil {
			return nil, err
		}
	}
	composeServices(cp, x)
	orphanConflicting(cp, plan)
	holdRefused(cp, x)
	keepReferenced(cp)
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	rsp.Desired.Resources = cp.desired
	return cp.conv.sizes, nil
}

// holdRefused keeps the delivery resources of every member whose
// credentials provider-kilomesh refused exactly as observed: nothing new,
// changed or deleted is handed to a provider for that member. The same
// credentials deliver its Peers (a PeerSet, or provider-kubernetes for
// Objects, which does not check them), so a member that provider-kilomesh
// would not even observe receives nothing until its credentials pass.
func holdRefused(cp *composition, x *xrMesh) {
	refused := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		if _, ok := credentialsRefused(cp.o.resources[prefixInventory+c.Name]); ok {
			refused[c.Name] = true
		}
	}
	if len(refused) == 0 {
		return
	}
	targetOf := func(name string, s *structpb.Struct) (string, bool) {
		for _, d := range deliverers {
			if t, ok := d.target(name, s); ok {
				return t, true
			}
		}
		return "", false
	}
	for name, r := range cp.desired {
		if t, ok := targetOf(name, r.GetResource()); ok && refused[t] {
			delete(cp.desired, name)
		}
	}
	for name, r := range cp.o.resources {
		if t, ok := targetOf(name, r.GetResource()); ok && refused[t] {
			cp.desired[name] = &fnv1.Resource{Resource: intent(r.GetResource()), Ready: ready(r)}
		}
	}
}

// credentialsRefused tells whether provider-kilomesh refused the
// credentials of a member's NodeInventory, and why.
func credentialsRefused(r *fnv1.Resource) (string, bool) {
	if r == nil {
		return "", false
	}
	c, ok := condition(r.GetResource(), kubev1alpha1.TypeCredentialsAccepted)
	if !ok || c.status != "False" {
		return "", false
	}
	return c.message, true
}

// freeze keeps every composed resource exactly as observed: nothing is
// created, changed or deleted while the mesh is invalid.
func freeze(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, o *observed, overlap *mesh.OverlapError) error {
	desired := make(map[string]*fnv1.Resource, len(o.resources))
	names := make([]string, 0, len(o.resources))
	for name := range o.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		desired[name] = &fnv1.Resource{Resource: intent(o.resources[name].GetResource()), Ready: ready(o.resources[name])}
	}
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	rsp.Desired.Resources = desired
	return writeFrozenStatus(rsp, req, overlap)
}

// intent is the part of an observed resource that its composer declares:
// identity, labels, annotations and spec; never status or server fields.
func intent(s *structpb.Struct) *structpb.Struct {
	f := s.GetFields()
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, k := range []string{"apiVersion", "kind", "spec"} {
		if v, ok := f[k]; ok {
			out.Fields[k] = proto.Clone(v).(*structpb.Value) //nolint:forcetypeassert // Clone returns the type it is given.
		}
	}
	meta := map[string]*structpb.Value{}
	for _, k := range []string{"name", "namespace", "generateName", "labels", "annotations"} {
		if v := get(s, "metadata", k); v != nil {
			meta[k] = proto.Clone(v).(*structpb.Value) //nolint:forcetypeassert // Clone returns the type it is given.
		}
	}
	out.Fields["metadata"] = object(meta)
	return out
}
