package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

const (
	errClient      = "cannot create a client of the management cluster"
	errFmtList     = "cannot list %s in namespace %s"
	errFmtDecode   = "cannot decode the %s of namespace %s"
	errFmtNotFound = "ClusterMesh %s/%s not found"
)

// A NotFoundError says that a ClusterMesh asked for does not exist.
type NotFoundError struct {
	Namespace, Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf(errFmtNotFound, e.Namespace, e.Name)
}

// The kinds read, by their resource.
var (
	ClusterMeshes   = meshv1alpha1.GroupVersion.WithResource("clustermeshes")
	NodeInventories = kubev1alpha1.GroupVersion.WithResource("nodeinventories")
	PeerSets        = kubev1alpha1.GroupVersion.WithResource("peersets")
	SegmentSets     = kubev1alpha1.GroupVersion.WithResource("segmentsets")
	Objects         = schema.GroupVersionResource{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Resource: "objects"}
)

// codecs decode what the client needs to decode itself: the Status of an
// error. Lists are read as JSON into the API types.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// A Reader reads the meshes of a namespace from the management cluster.
type Reader struct {
	// Client talks to the management cluster.
	Client rest.Interface
	// Recorder sees every response of Client; it tells the cluster's
	// clock.
	Recorder *Recorder
	// Clock, when set, is the time of every snapshot instead of the
	// management cluster's clock.
	Clock func() time.Time
	// LocalClock is this machine's clock; time.Now when nil.
	LocalClock func() time.Time
}

// NewReader returns a Reader that talks to the management cluster of a
// client configuration. The configuration is copied.
func NewReader(cfg *rest.Config) (*Reader, error) {
	rec := &Recorder{}
	c := rest.CopyConfig(cfg)
	c.Wrap(rec.Wrap)
	c.APIPath = "/apis"
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "kubectl-kilomesh"
	}
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, errors.Wrap(err, errClient)
	}
	return &Reader{Client: client, Recorder: rec}, nil
}

// Read reads the ClusterMeshes of a namespace, all of them or the named
// ones, and the resources they composed: one list call per kind.
func (r *Reader) Read(ctx context.Context, namespace string, names ...string) (*Snapshot, error) {
	s := &Snapshot{Namespace: namespace, All: map[string]*ClusterMesh{}}
	var meshes []ClusterMesh
	if err := r.list(ctx, ClusterMeshes, namespace, &meshes); err != nil {
		return nil, err
	}
	for i := range meshes {
		s.All[meshes[i].Name] = &meshes[i]
	}
	selected, err := pick(s.All, namespace, names)
	if err != nil {
		return nil, err
	}

	var inventories []kubev1alpha1.NodeInventory
	if err := r.list(ctx, NodeInventories, namespace, &inventories); err != nil {
		return nil, err
	}
	var sets []kubev1alpha1.PeerSet
	if err := r.list(ctx, PeerSets, namespace, &sets); err != nil {
		return nil, err
	}
	var segments []kubev1alpha1.SegmentSet
	if composes(selected, kubev1alpha1.SegmentSetKind, SegmentSets.Group) {
		// Only a mesh in the shared form composes SegmentSets.
		if err := r.list(ctx, SegmentSets, namespace, &segments); err != nil {
			return nil, err
		}
	}
	var objects []Object
	if usesObjects(selected) {
		// The Objects CRD exists only where provider-kubernetes is
		// installed; a mesh that delivers through it has it.
		if err := r.list(ctx, Objects, namespace, &objects); err != nil && !kerrors.IsNotFound(err) {
			return nil, err
		}
	}
	s.Inventories = make([]*kubev1alpha1.NodeInventory, len(inventories))
	for i := range inventories {
		s.Inventories[i] = &inventories[i]
	}
	for _, m := range selected {
		s.Meshes = append(s.Meshes, group(m, inventories, sets, segments, objects))
	}
	s.LocalNow = time.Now()
	if r.LocalClock != nil {
		s.LocalNow = r.LocalClock()
	}
	s.Now = s.LocalNow
	if r.Recorder != nil {
		if t, ok := r.Recorder.Date(); ok {
			s.Now = t
		}
	}
	if r.Clock != nil {
		s.Now = r.Clock()
	}
	return s, nil
}

// pick returns the named meshes, or every mesh, sorted by name.
func pick(all map[string]*ClusterMesh, namespace string, names []string) ([]*ClusterMesh, error) {
	var out []*ClusterMesh
	if len(names) == 0 {
		for _, m := range all {
			out = append(out, m)
		}
	}
	for _, n := range names {
		m, ok := all[n]
		if !ok {
			return nil, &NotFoundError{Namespace: namespace, Name: n}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// usesObjects tells whether a mesh delivers, or delivered, Peers through
// provider-kubernetes Objects.
// composes tells whether a mesh composed a resource of a kind.
func composes(meshes []*ClusterMesh, kind, group string) bool {
	for _, m := range meshes {
		for _, ref := range m.Spec.Crossplane.ResourceRefs {
			if ref.Kind == kind && strings.HasPrefix(ref.APIVersion, group+"/") {
				return true
			}
		}
	}
	return false
}

func usesObjects(meshes []*ClusterMesh) bool {
	for _, m := range meshes {
		if m.Delivery() == meshv1alpha1.DeliveryObjects {
			return true
		}
		for _, ref := range m.Spec.Crossplane.ResourceRefs {
			if ref.Kind == "Object" && strings.HasPrefix(ref.APIVersion, Objects.Group+"/") {
				return true
			}
		}
	}
	return false
}

// composedBy tells whether a resource was composed by a mesh: Crossplane's
// label names it and, when the resource has a controller, it is the mesh.
func composedBy(m *ClusterMesh, meta *metav1.ObjectMeta) bool {
	if meta.Labels[LabelComposite] != m.Name {
		return false
	}
	if ref := metav1.GetControllerOfNoCopy(meta); ref != nil && m.UID != "" {
		return ref.UID == m.UID
	}
	return true
}

// group gathers the resources a mesh composed.
func group(m *ClusterMesh, inventories []kubev1alpha1.NodeInventory, sets []kubev1alpha1.PeerSet, segments []kubev1alpha1.SegmentSet, objects []Object) *Mesh {
	out := &Mesh{
		ClusterMesh: *m,
		Inventories: map[string]*kubev1alpha1.NodeInventory{},
		PeerSets:    map[string]*kubev1alpha1.PeerSet{},
		SegmentSets: map[string]*kubev1alpha1.SegmentSet{},
		Objects:     map[string][]*Object{},
	}
	for i := range inventories {
		inv := &inventories[i]
		name, ok := strings.CutPrefix(inv.Annotations[AnnotationCompositionResourceName], PrefixInventory)
		if ok && composedBy(m, &inv.ObjectMeta) && out.Inventories[name] == nil {
			out.Inventories[name] = inv
		}
	}
	for i := range sets {
		ps := &sets[i]
		target, ok := strings.CutPrefix(ps.Annotations[AnnotationCompositionResourceName], PrefixPeerSet)
		if ok && composedBy(m, &ps.ObjectMeta) && out.PeerSets[target] == nil {
			out.PeerSets[target] = ps
		}
	}
	for i := range segments {
		if composedBy(m, &segments[i].ObjectMeta) {
			out.SegmentSets[segments[i].Name] = &segments[i]
		}
	}
	for i := range objects {
		o := &objects[i]
		if !strings.HasPrefix(o.Annotations[AnnotationCompositionResourceName], PrefixPeer) || !composedBy(m, &o.ObjectMeta) {
			continue
		}
		out.Objects[objectTarget(o)] = append(out.Objects[objectTarget(o)], o)
	}
	for _, os := range out.Objects {
		sort.Slice(os, func(i, j int) bool { return os[i].Name < os[j].Name })
	}
	return out
}

// objectTarget is the member an Object writes its Peer into: its label, or
// else what its composition resource name, peer-<target>-<peer>, says.
func objectTarget(o *Object) string {
	if t := o.Labels[LabelTargetCluster]; t != "" {
		return t
	}
	name := strings.TrimPrefix(o.Annotations[AnnotationCompositionResourceName], PrefixPeer)
	return strings.TrimSuffix(name, "-"+o.Spec.ForProvider.Manifest.Name)
}

// list reads every object of a kind in a namespace, in one call, into
// items.
func (r *Reader) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string, items any) error {
	b, err := r.Client.Get().AbsPath("/apis", gvr.Group, gvr.Version, "namespaces", namespace, gvr.Resource).Do(ctx).Raw()
	if err != nil {
		return errors.Wrapf(err, errFmtList, gvr.GroupResource(), namespace)
	}
	list := struct {
		Items json.RawMessage `json:"items"`
	}{}
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.Wrapf(err, errFmtDecode, gvr.GroupResource(), namespace)
	}
	if len(list.Items) == 0 || string(list.Items) == "null" {
		return nil
	}
	return errors.Wrapf(json.Unmarshal(list.Items, items), errFmtDecode, gvr.GroupResource(), namespace)
}

// A Recorder sees the responses of the management cluster: it keeps the
// last Date header (the cluster's clock) and counts the requests by
// method and path.
type Recorder struct {
	mu    sync.Mutex
	date  time.Time
	calls map[string]int
}

// Wrap wraps a transport; it is a rest.Config's WrapTransport.
func (r *Recorder) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{rt: rt, r: r}
}

// Date is the clock of the management cluster at its last answer.
func (r *Recorder) Date() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.date, !r.date.IsZero()
}

// Calls returns the requests made so far, counted by "METHOD path".
func (r *Recorder) Calls() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// Reset forgets the requests counted so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

type roundTripper struct {
	rt http.RoundTripper
	r  *Recorder
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rsp, err := t.rt.RoundTrip(req)
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if t.r.calls == nil {
		t.r.calls = map[string]int{}
	}
	t.r.calls[req.Method+" "+req.URL.Path]++
	if err == nil {
		if d, perr := http.ParseTime(rsp.Header.Get("Date")); perr == nil {
			t.r.date = d
		}
	}
	return rsp, err
}
