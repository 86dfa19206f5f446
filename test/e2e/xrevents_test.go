//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/test/stack"
)

// Crossplane counts, against an XR's watch circuit breaker, every watch
// event of the XR itself, of the resources it composes (by name) and of the
// resources its function requires (by name or label). Its metrics count the
// events but not where they come from; an xrTracer watches the same kinds in
// the management cluster and maps every event to the XRs it reaches the way
// Crossplane's dependency tracker does, so that a report can say which kind
// of resource, and which kind of change, costs a mesh its events.
type xrTracer struct {
	mu     sync.Mutex
	counts map[string]map[string]int // XR (namespace/name) -> "<kind> <reason>" -> events
	meshes map[string]*meshv1alpha1.ClusterMeshSpec
	// diffs, with E2E_TRACE_SPEC=1, gets a line for every change of
	// spec or status: which of their fields changed.
	diffs io.Writer
}

// The kinds an XR of kilomesh depends on, and the ClusterMeshes themselves.
var tracedKinds = []schema.GroupVersionKind{
	stack.MeshGVK,
	kubev1alpha1.GroupVersion.WithKind(kubev1alpha1.NodeInventoryKind),
	kubev1alpha1.GroupVersion.WithKind(kubev1alpha1.PeerSetKind),
	kubev1alpha1.GroupVersion.WithKind(kubev1alpha1.SegmentSetKind),
	{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "Object"},
}

func traceXREvents(ctx context.Context) (*xrTracer, error) {
	x := &xrTracer{counts: map[string]map[string]int{}, meshes: map[string]*meshv1alpha1.ClusterMeshSpec{}}
	cfg, err := env.RESTConfig(env.Management())
	if err != nil {
		return nil, err
	}
	ca, err := cache.New(cfg, cache.Options{})
	if err != nil {
		return nil, err
	}
	for _, gvk := range tracedKinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		inf, err := ca.GetInformer(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("cannot watch %s: %w", gvk.Kind, err)
		}
		kind := gvk.Kind
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { x.record(kind, "created", nil, o) },
			UpdateFunc: func(old, o any) { x.record(kind, "", old, o) },
			DeleteFunc: func(o any) { x.record(kind, "deleted", nil, o) },
		}); err != nil {
			return nil, err
		}
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, errors.New("the watches of the management cluster did not sync")
	}
	if os.Getenv("E2E_TRACE_SPEC") == "1" {
		f, err := os.Create(filepath.Join(env.Dir, "spec-changes.txt"))
		if err != nil {
			return nil, err
		}
		x.diffs = f
	}
	// What happened before the tracer started is not counted.
	x.mu.Lock()
	x.counts = map[string]map[string]int{}
	x.mu.Unlock()
	return x, nil
}

func unstructuredOf(o any) *unstructured.Unstructured {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, _ := o.(*unstructured.Unstructured)
	return u
}

// why classifies an update the way it matters to an XR: a change of spec
// (the generation moves), of status, or of metadata only.
func why(old, u *unstructured.Unstructured) string {
	switch {
	case old == nil:
		return "updated"
	case old.GetGeneration() != u.GetGeneration():
		return "spec"
	case !reflect.DeepEqual(old.Object["status"], u.Object["status"]):
		return "status"
	case !reflect.DeepEqual(old.GetLabels(), u.GetLabels()) || !reflect.DeepEqual(old.GetAnnotations(), u.GetAnnotations()) ||
		!reflect.DeepEqual(old.GetFinalizers(), u.GetFinalizers()) || !reflect.DeepEqual(old.GetOwnerReferences(), u.GetOwnerReferences()) ||
		old.GetDeletionTimestamp() != u.GetDeletionTimestamp():
		return "metadata"
	}
	return "no change"
}

func (x *xrTracer) record(kind, reason string, oldObj, obj any) {
	u := unstructuredOf(obj)
	if u == nil {
		return
	}
	if reason == "" {
		reason = why(unstructuredOf(oldObj), u)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	ns := u.GetNamespace()
	if kind == stack.MeshGVK.Kind {
		key := ns + "/" + u.GetName()
		if reason == "deleted" {
			delete(x.meshes, key)
		} else if spec, err := specOf(u); err == nil {
			x.meshes[key] = spec
		}
	}
	if x.diffs != nil && (reason == "spec" || reason == "status") {
		fmt.Fprintf(x.diffs, "%s %s %s/%s: %s\n", time.Now().UTC().Format("15:04:05.000"), kind, ns, u.GetName(), fieldDiff(reason, unstructuredOf(oldObj), u))
	}
	for _, xr := range x.dependants(kind, u) {
		if x.counts[xr] == nil {
			x.counts[xr] = map[string]int{}
		}
		x.counts[xr][kind+" "+reason]++
	}
}

func specOf(u *unstructured.Unstructured) (*meshv1alpha1.ClusterMeshSpec, error) {
	b, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return nil, err
	}
	spec := &meshv1alpha1.ClusterMeshSpec{}
	return spec, json.Unmarshal(b, spec)
}

// dependants are the XRs an event of u reaches, as Crossplane maps it: the
// XR itself, the XR that composed u, and the XRs whose function requires u
// (the inventories of their members, and the meshes that share a member
// with them). Callers hold x.mu.
func (x *xrTracer) dependants(kind string, u *unstructured.Unstructured) []string {
	ns := u.GetNamespace()
	out := map[string]bool{}
	members := func(key string) map[string]bool {
		m := map[string]bool{}
		if spec := x.meshes[key]; spec != nil {
			for _, c := range spec.Clusters {
				m[mesh.MemberID(strings.SplitN(key, "/", 2)[0], c)] = true
			}
		}
		return m
	}
	switch kind {
	case stack.MeshGVK.Kind:
		self := ns + "/" + u.GetName()
		out[self] = true
		mine := members(self)
		for other := range x.meshes {
			if other == self || !strings.HasPrefix(other, ns+"/") {
				continue
			}
			for id := range members(other) {
				if mine[id] {
					out[other] = true
				}
			}
		}
	default:
		if owner := u.GetLabels()["crossplane.io/composite"]; owner != "" {
			out[ns+"/"+owner] = true
		}
		if id := u.GetLabels()[meshv1alpha1.LabelMember]; id != "" && kind == kubev1alpha1.NodeInventoryKind {
			for key := range x.meshes {
				if strings.HasPrefix(key, ns+"/") && members(key)[id] {
					out[key] = true
				}
			}
		}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	return keys
}

// take returns the events counted for an XR since the last take, and
// starts counting anew.
func (x *xrTracer) take(xr string) map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.counts[xr]
	delete(x.counts, xr)
	return c
}

// tally formats counts by source kind and reason, most first.
func tally(c map[string]int) (string, int) {
	type kv struct {
		k string
		n int
	}
	var kvs []kv
	total := 0
	for k, n := range c {
		kvs = append(kvs, kv{k, n})
		total += n
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].n != kvs[j].n {
			return kvs[i].n > kvs[j].n
		}
		return kvs[i].k < kvs[j].k
	})
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.n)
	}
	return strings.Join(parts, ", "), total
}

// fieldDiff names the fields of spec or status (three levels down) that
// differ between two versions of an object, with the lengths of the lists
// among them.
func fieldDiff(field string, old, u *unstructured.Unstructured) string {
	if old == nil {
		return "new"
	}
	var out []string
	var walk func(path string, a, b any, depth int)
	walk = func(path string, a, b any, depth int) {
		if reflect.DeepEqual(a, b) {
			return
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok && depth < 3 {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			for k := range keys {
				walk(path+"."+k, am[k], bm[k], depth+1)
			}
			return
		}
		al, aList := a.([]any)
		bl, bList := b.([]any)
		if aList || bList {
			path = fmt.Sprintf("%s (%d -> %d items)", path, len(al), len(bl))
		}
		out = append(out, path)
	}
	walk(field, old.Object[field], u.Object[field], 0)
	sort.Strings(out)
	return strings.Join(out, ", ")
}
