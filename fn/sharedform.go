package main

import (
	"hash/fnv"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
)

// The shared form of PeerSet delivery. Every member receives the same Peer
// of a segment but for a few exceptions (the anchor's extra routes in a
// member where another segment anchors, a route withheld for a foreign
// Peer or for the member's own node address, a discovered endpoint, a Peer
// held back by a name or key conflict). Written once per member, a mesh of
// C clusters of N nodes costs C x (C-1) x N Peers of response; written
// once per mesh, in a SegmentSet per source cluster that every PeerSet
// references, it costs C x N plus the exceptions, which each PeerSet
// carries itself: an omission, or its own form of the Peer.

// prefixSegments starts the composition resource name of the SegmentSets of
// a source cluster: segments-<cluster>-<chunk>.
const prefixSegments = "segments-"

// DefaultShareAbove is how many bytes of Peers the PeerSets of a mesh may
// take together, written inline, before the function writes them in the
// shared form instead. The shared form is what keeps node churn under
// Crossplane's watch circuit breaker, which charges an XR two tokens per
// update of what it composes or requires and refills one a second: a node
// added or removed costs a mesh of C members its NodeInventory and one
// SegmentSet (4 tokens) shared, against its NodeInventory and the spec and
// status of C-1 PeerSets inline (4C-2 tokens; 18 for five members). Its
// creation costs a few SegmentSets more. A small mesh, whose few nodes change
// seldom, stays inline, where its PeerSets read best: 64 KiB is about 200
// placements (3 x 33 nodes, 5 x 10).
const DefaultShareAbove = 64 << 10

// AnnotationShareAbove on a ClusterMesh lowers, for that mesh, the bytes of
// inline Peers above which the function writes the shared form: "0" shares
// every mesh whose segments reach two members. It never raises the
// function's own threshold.
const AnnotationShareAbove = "kilomesh.io/share-segments-above"

// maxSegmentChunk is the most bytes of Peers one SegmentSet is meant to
// take; the Peers of a source are spread over as many SegmentSets as that
// needs, by a hash of their names, so that a node added or removed changes
// one of them. It stays well under kubev1alpha1.MaxPeersBytes, and no
// SegmentSet holds more than kubev1alpha1.MaxSegmentSetPeers.
const maxSegmentChunk = 300_000

// maxChunks bounds the SegmentSets of one source cluster.
const maxChunks = 64

const errFmtSegmentTooBig = "the Peers of cluster %s need %d KiB, more than %d SegmentSets can hold: use Location granularity, select fewer nodes with spec.clusters[].nodeSelector, or split the mesh"

// peerBytes estimates the bytes a Peer takes in a PeerSet as JSON: the
// inline form's size, without building it.
func peerBytes(p *kilov1alpha1.Peer) int {
	n := 130 + len(p.Name) + len(p.Labels[meshv1alpha1.LabelSourceCluster]) + len(p.Spec.PublicKey) + len(p.Spec.PresharedKey)
	for _, a := range p.Spec.AllowedIPs {
		n += len(a) + 3
	}
	if e := p.Spec.Endpoint; e != nil {
		n += len(e.DNSOrIP.IP) + len(e.DNSOrIP.DNS) + 40
	}
	return n
}

// useShared tells whether a mesh's PeerSets take the shared form: when
// their Peers inline would take more than the threshold. A mesh that
// already shares goes back inline only below half of it, so that a mesh
// near the threshold does not switch at every node.
func useShared(o *observed, peers map[string][]*kilov1alpha1.Peer, threshold int) bool {
	limit := threshold
	if len(sortedNames(o, prefixSegments)) > 0 {
		limit = threshold / 2
	}
	total := 0
	for _, ps := range peers {
		for _, p := range ps {
			if total += peerBytes(p); total > limit {
				return true // a large mesh needs not be counted whole
			}
		}
	}
	return false
}

// sortedNames lists the names of the observed resources with a prefix, in
// order.
func sortedNames(o *observed, prefix string) []string {
	var names []string
	for name := range o.resources {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// A segmentChunk is one SegmentSet: some Peers of one source, in their
// most common form.
type segmentChunk struct {
	// resource is the composition resource name, name the object's.
	resource, name string
	peers          []*kilov1alpha1.Peer
	// first is the index of its first Peer among those of every
	// SegmentSet: its Peers have the next ones, in order.
	first int
}

// A sharedForm is the mesh's Peers split into what the SegmentSets hold,
// by source cluster, and what each member differs in.
type sharedForm struct {
	// chunks are the SegmentSets of each source cluster.
	chunks map[string][]*segmentChunk
	// size is how many Peers the SegmentSets hold.
	size int
	// peers are the Peers of each member the form was made of, and formsOf
	// the form of each of them, in the same order.
	peers   map[string][]*kilov1alpha1.Peer
	formsOf map[string][]*peerForm
}

// A peerForm is one form of the Peers of one name.
type peerForm struct {
	// peer is the first Peer of this form; count is how many members
	// receive it, first the index of the first of them in the spec.
	peer  *kilov1alpha1.Peer
	count int
	first int
	named *namedForms
}

// namedForms are the forms of the Peers of one name.
type namedForms struct {
	forms []*peerForm
	// common is the form the SegmentSets hold, nil when they hold none;
	// index is its place among their Peers.
	common *peerForm
	index  int
	// firstForm is the first form, and firstArr the array forms starts
	// in: most names have one form, which takes no allocation of its own.
	firstForm peerForm
	firstArr  [1]*peerForm
}

// add counts a Peer that member t receives in its form, and returns the
// form. A Peer has one form in most meshes, and a few where some members
// differ.
func (n *namedForms) add(p *kilov1alpha1.Peer, t int) *peerForm {
	for _, f := range n.forms {
		if sameForm(f.peer, p) {
			f.count++
			return f
		}
	}
	f := &n.firstForm
	if len(n.forms) == 0 {
		n.forms = n.firstArr[:0]
	} else {
		f = &peerForm{}
	}
	*f = peerForm{peer: p, count: 1, first: t, named: n}
	n.forms = append(n.forms, f)
	return f
}

// formOf is a Peer's identity as a PeerSet writes it: its source and its
// spec. Two Peers of the same name and form are written the same.
func formOf(p *kilov1alpha1.Peer) string {
	b := &strings.Builder{}
	s := &p.Spec
	b.WriteString(p.Labels[meshv1alpha1.LabelSourceCluster])
	b.WriteByte(0)
	b.WriteString(s.PublicKey)
	b.WriteByte(0)
	b.WriteString(s.PresharedKey)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(s.PersistentKeepalive))
	if e := s.Endpoint; e != nil {
		b.WriteByte(0)
		b.WriteString(e.DNSOrIP.IP)
		b.WriteByte('/')
		b.WriteString(e.DNSOrIP.DNS)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(int(e.Port)))
	}
	for _, a := range s.AllowedIPs {
		b.WriteByte(0)
		b.WriteString(a)
	}
	return b.String()
}

// sameForm tells whether two Peers have the same form, formOf(a) ==
// formOf(b), building neither when the fields formOf writes are equal, as
// they are for the Peer of a segment in most members.
func sameForm(a, b *kilov1alpha1.Peer) bool {
	if a == b {
		return true // the planner shares the Peer most members receive
	}
	sa, sb := &a.Spec, &b.Spec
	ea, eb := sa.Endpoint, sb.Endpoint
	if sa.PublicKey == sb.PublicKey && sa.PresharedKey == sb.PresharedKey &&
		sa.PersistentKeepalive == sb.PersistentKeepalive &&
		(ea == eb || ea != nil && eb != nil && ea.DNSOrIP == eb.DNSOrIP && ea.Port == eb.Port) &&
		sameStrings(sa.AllowedIPs, sb.AllowedIPs) && sameSource(a, b) {
		return true
	}
	return formOf(a) == formOf(b)
}

// sameStrings is slices.Equal, at once for two slices of one array.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}

// sameSource tells whether two Peers have the same source label. The Peers
// of a source share one map of labels, which needs no lookup.
func sameSource(a, b *kilov1alpha1.Peer) bool {
	return reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(b.Labels).UnsafePointer() ||
		a.Labels[meshv1alpha1.LabelSourceCluster] == b.Labels[meshv1alpha1.LabelSourceCluster]
}

// share finds, for every Peer that at least two members receive in the
// same form, its most common form (of equally common ones, the form of the
// member listed first), and spreads those Peers of each source cluster
// over its SegmentSets.
func share(x *xrMesh, peers map[string][]*kilov1alpha1.Peer) (*sharedForm, error) {
	sf := &sharedForm{chunks: map[string][]*segmentChunk{}, peers: peers, formsOf: make(map[string][]*peerForm, len(x.Spec.Clusters))}
	byName := map[string]*namedForms{}
	for t, c := range x.Spec.Clusters {
		ps := peers[c.Name]
		formsOf := make([]*peerForm, len(ps))
		for i, p := range ps {
			named := byName[p.Name]
			if named == nil {
				named = &namedForms{}
				byName[p.Name] = named
			}
			formsOf[i] = named.add(p, t)
		}
		sf.formsOf[c.Name] = formsOf
	}
	bySource := map[string][]*kilov1alpha1.Peer{}
	for _, named := range byName {
		var best *peerForm
		for _, f := range named.forms {
			if best == nil || f.count > best.count || f.count == best.count && f.first < best.first {
				best = f
			}
		}
		if best.count < 2 {
			continue
		}
		named.common = best
		src := best.peer.Labels[meshv1alpha1.LabelSourceCluster]
		bySource[src] = append(bySource[src], best.peer)
	}
	for src, ps := range bySource {
		chunks, err := chunk(x, src, ps)
		if err != nil {
			return nil, err
		}
		sf.chunks[src] = chunks
		for _, ch := range chunks {
			ch.first = sf.size
			for _, p := range ch.peers {
				byName[p.Name].index = sf.size
				sf.size++
			}
		}
	}
	return sf, nil
}

// chunk spreads the Peers of one source over as few SegmentSets as hold
// them, each Peer by a hash of its name.
func chunk(x *xrMesh, src string, ps []*kilov1alpha1.Peer) ([]*segmentChunk, error) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	total := 0
	for _, p := range ps {
		total += peerBytes(p)
	}
	n := max(1, (total+maxSegmentChunk-1)/maxSegmentChunk, (len(ps)+kubev1alpha1.MaxSegmentSetPeers-1)/kubev1alpha1.MaxSegmentSetPeers)
	for ; n <= maxChunks; n++ {
		chunks := make([]*segmentChunk, n)
		sizes := make([]int, n)
		for k := range chunks {
			id := "segments-" + strconv.Itoa(k)
			chunks[k] = &segmentChunk{
				resource: prefixSegments + src + "-" + strconv.Itoa(k),
				name:     mesh.PeerName(x.Namespace, x.Name, src, id),
			}
		}
		fits := true
		for _, p := range ps {
			k := 0
			if n > 1 {
				h := fnv.New32a()
				_, _ = h.Write([]byte(p.Name))
				k = int(h.Sum32() % uint32(n))
			}
			chunks[k].peers = append(chunks[k].peers, p)
			sizes[k] += peerBytes(p)
			if sizes[k] > kubev1alpha1.MaxPeersBytes*9/10 || len(chunks[k].peers) > kubev1alpha1.MaxSegmentSetPeers {
				fits = false
			}
		}
		if fits {
			return chunks, nil
		}
	}
	return nil, errors.Errorf(errFmtSegmentTooBig, src, total>>10, maxChunks)
}

// composeSegments adds the SegmentSets of the shared form. They are data
// only, and ready as soon as they are written: no controller reports on
// them.
func composeSegments(cp *composition, sf *sharedForm) {
	for _, c := range cp.x.Spec.Clusters {
		for _, ch := range sf.chunks[c.Name] {
			items := make([]*structpb.Value, len(ch.peers))
			for i, p := range ch.peers {
				items[i] = cp.conv.desiredPeer(p)
			}
			cp.desired[ch.resource] = &fnv1.Resource{
				Resource: &structpb.Struct{Fields: map[string]*structpb.Value{
					"apiVersion": str(kubev1alpha1.GroupVersion.String()),
					"kind":       str(kubev1alpha1.SegmentSetKind),
					"metadata":   object(map[string]*structpb.Value{"name": str(ch.name)}),
					"spec":       object(map[string]*structpb.Value{"peers": list(items)}),
				}},
				Ready: fnv1.Ready_READY_TRUE,
			}
		}
	}
}

// sharedPeerSet writes the parameters of a target's PeerSet in the shared
// form: a reference to every SegmentSet of every other member, each with
// the Peers the target does not hold, and inline the Peers that only the
// target holds or that it holds in a form of its own. The target's Peers
// are those the shared form was made of.
func sharedPeerSet(cp *composition, target string) (refs, inline *structpb.Value) {
	sf := cp.shared
	peers := sf.peers[target]
	held := make([]bool, sf.size) // by index of the SegmentSets' Peers
	var own []*structpb.Value
	for i, f := range sf.formsOf[target] {
		named := f.named
		if named.common != nil {
			held[named.index] = true
		}
		if f != named.common {
			own = append(own, cp.conv.desiredPeer(peers[i]))
		}
	}
	var rs []*structpb.Value
	for _, c := range cp.x.Spec.Clusters {
		if c.Name == target {
			continue
		}
		for _, ch := range sf.chunks[c.Name] {
			var omit []string
			for i, p := range ch.peers {
				if !held[ch.first+i] {
					omit = append(omit, p.Name)
				}
			}
			ref := map[string]*structpb.Value{"name": str(ch.name)}
			if len(omit) > 0 {
				ref["omit"] = stringList(omit)
			}
			rs = append(rs, object(ref))
		}
	}
	return list(rs), list(own)
}

// isSegments tells whether a composed resource is a SegmentSet of the
// shared form.
func isSegments(name string) bool {
	return strings.HasPrefix(name, prefixSegments)
}

// segmentsWritten tells whether every SegmentSet the PeerSet of target
// would reference exists already, as it is desired now (its Peers may still
// change): a PeerSet references a SegmentSet only once it exists, so that
// it never stops in error for one Crossplane has not created yet.
func (cp *composition) segmentsWritten(target string) bool {
	observed := map[string]bool{}
	for _, name := range sortedNames(cp.o, prefixSegments) {
		observed[get(cp.o.resources[name].GetResource(), "metadata", "name").GetStringValue()] = true
	}
	for _, c := range cp.x.Spec.Clusters {
		if c.Name == target {
			continue
		}
		for _, ch := range cp.shared.chunks[c.Name] {
			if !observed[ch.name] {
				return false
			}
		}
	}
	return true
}

// keepReferenced keeps, as observed, every SegmentSet that a PeerSet, desired
// or observed, still references but that is no longer desired itself: a
// PeerSet kept as it was (its member's credentials refused, its delivery
// being handed over, its SegmentSets not all written yet), or one whose new
// spec Crossplane has not applied yet, must still resolve, or it would stop
// in error. Once no PeerSet references it, it goes.
func keepReferenced(cp *composition) {
	byName := map[string]string{}
	for _, name := range sortedNames(cp.o, prefixSegments) {
		byName[get(cp.o.resources[name].GetResource(), "metadata", "name").GetStringValue()] = name
	}
	if len(byName) == 0 {
		return
	}
	sets := map[string]*structpb.Struct{}
	for name, r := range cp.o.resources {
		if strings.HasPrefix(name, prefixPeerSet) {
			sets["observed/"+name] = r.GetResource()
		}
	}
	for name, r := range cp.desired {
		if strings.HasPrefix(name, prefixPeerSet) {
			sets["desired/"+name] = r.GetResource()
		}
	}
	for _, set := range sets {
		for _, ref := range get(set, "spec", "forProvider", "segmentSetRefs").GetListValue().GetValues() {
			res, ok := byName[get(ref.GetStructValue(), "name").GetStringValue()]
			if _, desired := cp.desired[res]; !ok || desired {
				continue
			}
			cp.desired[res] = &fnv1.Resource{Resource: intent(cp.o.resources[res].GetResource()), Ready: fnv1.Ready_READY_TRUE}
		}
	}
}

// segmentIndex reads the observed SegmentSets by object name: each Peer
// once, for every PeerSet that references it.
func segmentIndex(o map[string]*fnv1.Resource) map[string]*kubev1alpha1.SegmentSet {
	out := map[string]*kubev1alpha1.SegmentSet{}
	labels := sourceLabels{}
	for name, r := range o {
		if !isSegments(name) {
			continue
		}
		s := r.GetResource()
		set := &kubev1alpha1.SegmentSet{}
		set.Name = get(s, "metadata", "name").GetStringValue()
		if items := get(s, "spec", "peers").GetListValue().GetValues(); len(items) > 0 {
			set.Spec.Peers = make([]kubev1alpha1.DesiredPeer, len(items))
			for i, item := range items {
				set.Spec.Peers[i] = desiredPeerOf(item.GetStructValue(), labels)
			}
		}
		out[set.Name] = set
	}
	return out
}

// sourceLabels are the labels of the Peers read from one source cluster,
// by source: the Peers of a source share them, as nothing writes them.
type sourceLabels map[string]map[string]string

func (s sourceLabels) of(src string) map[string]string {
	m, ok := s[src]
	if !ok {
		m = map[string]string{meshv1alpha1.LabelSourceCluster: src}
		s[src] = m
	}
	return m
}

// desiredPeerOf reads an entry of a PeerSet or SegmentSet, field by field:
// a large mesh reads thousands, and a detour through JSON would cost more
// than the planning. A field of the wrong type reads as empty: these are
// the function's own writes, and a broken one routes nothing.
func desiredPeerOf(i *structpb.Struct, labels sourceLabels) kubev1alpha1.DesiredPeer {
	d := kubev1alpha1.DesiredPeer{
		Name:   get(i, "name").GetStringValue(),
		Labels: labels.of(get(i, "labels", meshv1alpha1.LabelSourceCluster).GetStringValue()),
	}
	spec := get(i, "spec").GetStructValue()
	ips := get(spec, "allowedIPs").GetListValue().GetValues()
	d.Spec.AllowedIPs = make([]string, len(ips))
	for k, v := range ips {
		d.Spec.AllowedIPs[k] = v.GetStringValue()
	}
	d.Spec.PublicKey = get(spec, "publicKey").GetStringValue()
	d.Spec.PresharedKey = get(spec, "presharedKey").GetStringValue()
	d.Spec.PersistentKeepalive = int(get(spec, "persistentKeepalive").GetNumberValue())
	if e := get(spec, "endpoint").GetStructValue(); e != nil {
		d.Spec.Endpoint = &kubev1alpha1.PeerEndpoint{
			DNSOrIP: kubev1alpha1.DNSOrIP{IP: get(e, "dnsOrIP", "ip").GetStringValue(), DNS: get(e, "dnsOrIP", "dns").GetStringValue()},
			Port:    uint32(get(e, "port").GetNumberValue()),
		}
	}
	return d
}
