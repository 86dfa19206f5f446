package main

// Everything the function reads from the request, in the order it reads it:
// the ClusterMesh, the Peers its composed resources hold and what the
// NodeInventories of its members observed; then what later steps ask of the
// observed resources (what their composer declared, whether they are ready,
// whether a member's credentials were refused, why Peers cannot be written,
// when members were last observed). The readers of the protobuf Struct
// (get, condition, fromValue) are here, beside what calls them.

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Names of the composed resources (the crossplane.io/composition-resource-name
// annotation): inventory-<cluster>, peerset-<target>, peer-<target>-<peer>.
const (
	prefixInventory = "inventory-"
	prefixPeerSet   = "peerset-"
	prefixPeer      = "peer-"
)

// xrMesh is the observed ClusterMesh.
type xrMesh struct {
	Namespace string
	Name      string
	// Created is the mesh's creationTimestamp; zero in a dry run.
	Created time.Time
	// Annotations of the mesh.
	Annotations map[string]string
	Spec        meshv1alpha1.ClusterMeshSpec
}

// decodeMesh reads the ClusterMesh from its protobuf form. A field of the
// wrong type is reported with its path.
func decodeMesh(s *structpb.Struct) (*xrMesh, error) {
	x := &xrMesh{Namespace: get(s, "metadata", "namespace").GetStringValue(), Name: get(s, "metadata", "name").GetStringValue()}
	x.Created, _ = time.Parse(time.RFC3339, get(s, "metadata", "creationTimestamp").GetStringValue()) // zero when unset
	if x.Name == "" {
		return nil, errors.New("the ClusterMesh has no metadata.name")
	}
	for k, v := range get(s, "metadata", "annotations").GetStructValue().GetFields() {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[k] = v.GetStringValue()
	}
	spec := get(s, "spec").GetStructValue()
	if spec == nil {
		return nil, field.Required(field.NewPath("spec"), "a ClusterMesh has a spec")
	}
	if err := fromStruct(spec, &x.Spec); err != nil {
		return nil, locate(spec, err)
	}
	return x, nil
}

// locate finds the cluster entry a decoding error comes from, so that the
// message names it: spec.clusters[2]: ... instead of spec.clusters.
func locate(spec *structpb.Struct, err error) error {
	p := field.NewPath("spec")
	for i, v := range get(spec, "clusters").GetListValue().GetValues() {
		var c meshv1alpha1.Cluster
		if cerr := fromValue(v, &c); cerr != nil {
			return field.Invalid(p.Child("clusters").Index(i), "", cerr.Error())
		}
	}
	return field.Invalid(p, "", err.Error())
}

const errFmtShareAbove = "must be a whole number of bytes, at least 0"

// shareAbove is the threshold of a mesh: the function's, lowered by the
// mesh's annotation.
func shareAbove(x *xrMesh, fnDefault int) (int, error) {
	limit := fnDefault
	if limit <= 0 {
		limit = DefaultShareAbove
	}
	v, ok := x.Annotations[AnnotationShareAbove]
	if !ok {
		return limit, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, field.Invalid(field.NewPath("metadata", "annotations").Key(AnnotationShareAbove), v, errFmtShareAbove)
	}
	return min(n, limit), nil
}

// observed is what the request says of the mesh's composed resources.
type observed struct {
	inventories map[string]*mesh.Observation
	resources   map[string]*fnv1.Resource
	// composed are the Peers the composed resources hold, delivered what
	// the planner needs to know of them.
	composed  []composedPeer
	delivered map[string]map[string]mesh.DeliveredPeer
}

func readObserved(req *fnv1.RunFunctionRequest, x *xrMesh) (*observed, error) {
	o := &observed{inventories: map[string]*mesh.Observation{}, resources: req.GetObserved().GetResources()}
	o.composed = composedPeers(o)
	o.delivered = delivered(o.composed)
	for _, c := range x.Spec.Clusters {
		r, ok := o.resources[prefixInventory+c.Name]
		if !ok {
			continue
		}
		inv, err := readInventory(r.GetResource())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the NodeInventory of cluster %s", c.Name)
		}
		if inv != nil {
			o.inventories[c.Name] = inv
		}
	}
	return o, nil
}

// delivered is what the planner needs to know of the composed Peers: by
// target, their keys and routes.
func delivered(peers []composedPeer) map[string]map[string]mesh.DeliveredPeer {
	out := map[string]map[string]mesh.DeliveredPeer{}
	for _, p := range peers {
		if out[p.target] == nil {
			out[p.target] = map[string]mesh.DeliveredPeer{}
		}
		out[p.target][p.name] = mesh.DeliveredPeer{PublicKey: p.spec.PublicKey, AllowedIPs: p.spec.AllowedIPs}
	}
	return out
}

// readInventory reads what a NodeInventory observed, and why it cannot
// observe its cluster now. It returns nil while the inventory has neither
// observed its cluster nor failed to.
func readInventory(s *structpb.Struct) (*mesh.Observation, error) {
	o := &mesh.Observation{Reachable: true}
	if at := get(s, "status", "atProvider"); at != nil {
		if err := readAtProvider(at, &o.NodeInventoryObservation); err != nil {
			return nil, err
		}
	}
	if c, ok := condition(s, "Synced"); ok && c.status == "False" {
		o.Reachable = false
		if t, err := parseTime(c.lastTransitionTime); err == nil {
			o.UnreachableSince = t
		}
		o.Problem = cut(c.message) // a member's own error text: anything it sends
	}
	if o.ObservedAt == nil && o.Reachable {
		return nil, nil //nolint:nilnil // not observed yet, nothing wrong either
	}
	return o, nil
}

// The observation of a NodeInventory is by far the largest thing a request
// carries: every node of every member. Converting it to JSON and decoding
// that took as long as planning the mesh, so it is read from its protobuf
// form directly.
//
// The inventory is written by what node owners control, so the direct reader
// accepts only what a well-formed inventory holds: exactly the known field
// names, each of its JSON type, strings of valid UTF-8, whole numbers. On
// anything else it gives up and the JSON decoder reads the value, so that an
// odd inventory reads, or fails, exactly as it always did.

// readAtProvider reads status.atProvider of a NodeInventory into into.
func readAtProvider(v *structpb.Value, into *kubev1alpha1.NodeInventoryObservation) error {
	if o, ok := decodeObservation(v); ok {
		*into = o
		return nil
	}
	return fromValue(v, into)
}

// decodeObservation is the direct reader: false when the value is not
// plainly a well-formed observation.
func decodeObservation(v *structpb.Value) (kubev1alpha1.NodeInventoryObservation, bool) {
	var o kubev1alpha1.NodeInventoryObservation
	ok := decodeFields(v, &o, observationFields)
	return o, ok
}

// A fieldReader reads one field of a JSON object into its Go struct, and
// says false when it would not read it as encoding/json does.
type fieldReader[T any] func(*T, *structpb.Value) bool

var observationFields = map[string]fieldReader[kubev1alpha1.NodeInventoryObservation]{
	"observedAt": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeTime(&o.ObservedAt, v)
	},
	"nodeCount": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeInt(&o.NodeCount, v)
	},
	"nodes": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeList(&o.Nodes, v, func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeFields(v, n, nodeFields) })
	},
	"foreignPeers": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeList(&o.ForeignPeers, v, func(p *kubev1alpha1.ForeignPeer, v *structpb.Value) bool {
			return decodeFields(v, p, foreignPeerFields)
		})
	},
	"foreignPeersIncomplete": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeString(&o.ForeignPeersIncomplete, v)
	},
	"nodesIncomplete": func(o *kubev1alpha1.NodeInventoryObservation, v *structpb.Value) bool {
		return decodeString(&o.NodesIncomplete, v)
	},
}

var nodeFields = map[string]fieldReader[kubev1alpha1.ObservedNode]{
	"name":        func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeString(&n.Name, v) },
	"podCIDRs":    func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeStrings(&n.PodCIDRs, v) },
	"internalIPs": func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeStrings(&n.InternalIPs, v) },
	"externalIPs": func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeStrings(&n.ExternalIPs, v) },
	"location":    func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeString(&n.Location, v) },
	"ready":       func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeBool(&n.Ready, v) },
	"kilo": func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool {
		k := &kubev1alpha1.KiloAnnotations{}
		n.Kilo = k
		return decodeFields(v, k, kiloFields)
	},
	"stale":      func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeBool(&n.Stale, v) },
	"staleSince": func(n *kubev1alpha1.ObservedNode, v *structpb.Value) bool { return decodeTime(&n.StaleSince, v) },
}

var kiloFields = map[string]fieldReader[kubev1alpha1.KiloAnnotations]{
	"key":         func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.Key, v) },
	"wireguardIP": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.WireguardIP, v) },
	"endpoint":    func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.Endpoint, v) },
	"internalIP":  func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.InternalIP, v) },
	"forceEndpoint": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.ForceEndpoint, v)
	},
	"clustermeshEndpoint": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.ClustermeshEndpoint, v)
	},
	"granularity": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.Granularity, v) },
	"persistentKeepalive": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.PersistentKeepalive, v)
	},
	"discoveredEndpoints": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.DiscoveredEndpoints, v)
	},
	"forceInternalIP": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.ForceInternalIP, v)
	},
	"allowedLocationIPs": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool {
		return decodeString(&k.AllowedLocationIPs, v)
	},
	"leader": func(k *kubev1alpha1.KiloAnnotations, v *structpb.Value) bool { return decodeString(&k.Leader, v) },
}

var foreignPeerFields = map[string]fieldReader[kubev1alpha1.ForeignPeer]{
	"name":       func(p *kubev1alpha1.ForeignPeer, v *structpb.Value) bool { return decodeString(&p.Name, v) },
	"publicKey":  func(p *kubev1alpha1.ForeignPeer, v *structpb.Value) bool { return decodeString(&p.PublicKey, v) },
	"allowedIPs": func(p *kubev1alpha1.ForeignPeer, v *structpb.Value) bool { return decodeStrings(&p.AllowedIPs, v) },
}

// decodeFields reads an object whose every key is the exact JSON name of a
// field: encoding/json would also match other spellings of a name, and one
// name spelt twice, but no inventory writes them.
func decodeFields[T any](v *structpb.Value, into *T, fields map[string]fieldReader[T]) bool {
	s, ok := v.GetKind().(*structpb.Value_StructValue)
	if !ok || s.StructValue == nil {
		return false
	}
	for k, fv := range s.StructValue.GetFields() {
		read, known := fields[k]
		if !known || !read(into, fv) {
			return false
		}
	}
	return true
}

// decodeList reads a list of objects. Like encoding/json it reads an empty
// list as an empty slice, not a nil one.
func decodeList[T any](into *[]T, v *structpb.Value, read fieldReader[T]) bool {
	l, ok := v.GetKind().(*structpb.Value_ListValue)
	if !ok || l.ListValue == nil {
		return false
	}
	out := make([]T, len(l.ListValue.GetValues()))
	for i, item := range l.ListValue.GetValues() {
		if !read(&out[i], item) {
			return false
		}
	}
	*into = out
	return true
}

func decodeStrings(into *[]string, v *structpb.Value) bool {
	return decodeList(into, v, decodeString)
}

// decodeString reads a string, which protojson refuses to write when it is
// not valid UTF-8.
func decodeString(into *string, v *structpb.Value) bool {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok || !utf8.ValidString(s.StringValue) {
		return false
	}
	*into = s.StringValue
	return true
}

func decodeBool(into *bool, v *structpb.Value) bool {
	b, ok := v.GetKind().(*structpb.Value_BoolValue)
	if ok {
		*into = b.BoolValue
	}
	return ok
}

// maxExactInt is the largest whole number a float64 holds exactly; protojson
// writes it in plain digits, which encoding/json reads into an int.
const maxExactInt = 1 << 53

func decodeInt(into *int, v *structpb.Value) bool {
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok || n.NumberValue != math.Trunc(n.NumberValue) || math.Abs(n.NumberValue) > maxExactInt {
		return false // NaN and the infinities fail too
	}
	*into = int(n.NumberValue)
	return true
}

// decodeTime reads a time as metav1.Time.UnmarshalJSON does.
func decodeTime(into **metav1.Time, v *structpb.Value) bool {
	var s string
	if !decodeString(&s, v) {
		return false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return false // the decoder says why
	}
	*into = &metav1.Time{Time: t.Local()}
	return true
}

// The readers of the protobuf Struct, for every step that reads the
// request.

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

func fromStruct(s *structpb.Struct, into any) error {
	b, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

func fromValue(v *structpb.Value, into any) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

type cond struct {
	status             string
	reason             string
	message            string
	lastTransitionTime string
}

// condition reads one condition of a resource without decoding the rest.
func condition(s *structpb.Struct, typ string) (cond, bool) {
	for _, v := range get(s, "status", "conditions").GetListValue().GetValues() {
		f := v.GetStructValue().GetFields()
		if f["type"].GetStringValue() != typ {
			continue
		}
		return cond{
			status:             f["status"].GetStringValue(),
			reason:             f["reason"].GetStringValue(),
			message:            f["message"].GetStringValue(),
			lastTransitionTime: f["lastTransitionTime"].GetStringValue(),
		}, true
	}
	return cond{}, false
}

func parseTime(s string) (*metav1.Time, error) {
	t := &metav1.Time{}
	if err := t.UnmarshalQueryParameter(s); err != nil {
		return nil, err
	}
	if t.IsZero() {
		return nil, errors.New("no time")
	}
	return t, nil
}

// maxDeliveryMessage is how much of a provider's error a member's status
// quotes.
const maxDeliveryMessage = 300

func cut(s string) string {
	return safetext.Message(s, maxDeliveryMessage)
}

// What the later steps ask of the observed resources, in the order they
// ask: freezing, composing, then the status.

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

// ready tells whether a composed resource is ready: Ready=True, and not
// failing to sync (an unreachable cluster makes the mesh not ready).
func ready(r *fnv1.Resource) fnv1.Ready {
	if r == nil {
		return fnv1.Ready_READY_FALSE
	}
	if get(r.GetResource(), "kind").GetStringValue() == kubev1alpha1.SegmentSetKind {
		return fnv1.Ready_READY_TRUE // data only: no controller reports on it
	}
	c, ok := condition(r.GetResource(), "Ready")
	if !ok || c.status != "True" {
		return fnv1.Ready_READY_FALSE
	}
	if c, ok := condition(r.GetResource(), "Synced"); ok && c.status == "False" {
		return fnv1.Ready_READY_FALSE
	}
	return fnv1.Ready_READY_TRUE
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

// lastObservedStep is how far a member's last observation may move before
// the mesh's status says so. Every observation of a member (a node added,
// a key rotated) would otherwise rewrite the mesh's status, and every
// write is a watch event of Crossplane's circuit breaker: under churn, the
// status follows within a minute, not at every change.
const lastObservedStep = time.Minute

// steadyLastObserved keeps every member's lastObserved as the observed mesh
// reports it while no member's new observation is lastObservedStep newer
// than the one reported (or new to the status): a member that changes
// rarely shows each observation exactly, and a mesh whose members change
// every few seconds moves them all together, at most once a minute.
func steadyLastObserved(xr *structpb.Struct, plan *mesh.Plan) {
	prev := map[string]time.Time{}
	for _, v := range get(xr, "status", "clusters").GetListValue().GetValues() {
		c := v.GetStructValue()
		if t, err := time.Parse(time.RFC3339, get(c, "lastObserved").GetStringValue()); err == nil {
			prev[get(c, "name").GetStringValue()] = t
		}
	}
	for _, c := range plan.Status.Clusters {
		p, ok := prev[c.Name]
		if c.LastObserved != nil && (!ok || c.LastObserved.Before(&metav1.Time{Time: p}) || c.LastObserved.Sub(p) >= lastObservedStep) {
			return // reported as observed, every member with it
		}
	}
	for i := range plan.Status.Clusters {
		c := &plan.Status.Clusters[i]
		if p, ok := prev[c.Name]; ok && c.LastObserved != nil {
			c.LastObserved = &metav1.Time{Time: p}
		}
	}
}

// deliveryProblems reads, from the observed Objects and PeerSets, which
// members the mesh's Peers cannot be written into, and why: a member without
// Kilo's Peer CRD, credentials without the right to write Peers, a Peer in
// the way. The answer is by member.
func deliveryProblems(x *xrMesh, o *observed) map[string]string {
	members := map[string]bool{}
	for _, c := range x.Spec.Clusters {
		members[c.Name] = true
	}
	out := map[string]string{}
	for _, d := range deliverers {
		d.problems(o, members, out)
	}
	for _, c := range x.Spec.Clusters {
		if msg, ok := credentialsRefused(o.resources[prefixInventory+c.Name]); ok {
			addProblem(out, c.Name, "nothing is written into it while provider-kilomesh refuses its credentials: "+cut(msg))
		}
	}
	return out
}

// addProblem adds a problem of a member to those already found.
func addProblem(problems map[string]string, member, msg string) {
	if prev, ok := problems[member]; ok {
		msg = prev + "; " + msg
	}
	problems[member] = cut(msg)
}

// settling tells whether composed resources are still becoming ready, none of
// them failing: Crossplane should then call again soon. Its watch circuit
// breaker may drop the events of a mesh that composes many resources at once,
// and the response TTL is what brings the mesh to Ready then.
func settling(rsp *fnv1.RunFunctionResponse, o *observed) bool {
	waiting := false
	for _, r := range rsp.GetDesired().GetResources() {
		if r.GetReady() != fnv1.Ready_READY_TRUE {
			waiting = true
			break
		}
	}
	if !waiting {
		return false
	}
	for _, r := range o.resources {
		if c, ok := condition(r.GetResource(), "Synced"); ok && c.status == "False" {
			return false
		}
	}
	return true
}
