package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/yamldocs"
)

// docs reads the YAML documents of a file, none when it does not exist.
func docs(t *testing.T, path string) []*structpb.Struct {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	parts, err := yamldocs.Split(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []*structpb.Struct
	for _, part := range parts {
		j, err := yaml.YAMLToJSON(part)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, resource.MustStructJSON(string(j)))
	}
	return out
}

// scenario is the request of a render scenario, as Crossplane sends it:
// the XR, the observed resources by composition resource name, and what
// the function requires, answered from required.yaml.
type scenario struct {
	xr       *structpb.Struct
	observed map[string]*fnv1.Resource
	required []*structpb.Struct
}

func loadScenario(t *testing.T, dir string) scenario {
	t.Helper()
	s := scenario{observed: map[string]*fnv1.Resource{}, required: docs(t, filepath.Join(dir, "required.yaml"))}
	s.xr = docs(t, filepath.Join(dir, "xr.yaml"))[0]
	for _, d := range docs(t, filepath.Join(dir, "observed.yaml")) {
		s.observed[get(d, "metadata", "annotations", "crossplane.io/composition-resource-name").GetStringValue()] = &fnv1.Resource{Resource: d}
	}
	return s
}

// run calls the function until Crossplane would have answered every
// requirement, matching them against the scenario's required resources.
func (s scenario) run(t *testing.T, f *Function, xr *structpb.Struct) *fnv1.RunFunctionResponse {
	t.Helper()
	required := map[string]*fnv1.Resources{}
	for range 3 {
		rsp, err := f.RunFunction(context.Background(), request(xr, s.observed, required))
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for name, sel := range rsp.GetRequirements().GetResources() {
			if _, ok := required[name]; ok {
				continue
			}
			done = false
			items := &fnv1.Resources{}
			for _, d := range s.required {
				if get(d, "kind").GetStringValue() != sel.GetKind() {
					continue
				}
				match := sel.GetMatchName() == "" || get(d, "metadata", "name").GetStringValue() == sel.GetMatchName()
				for k, v := range sel.GetMatchLabels().GetLabels() {
					match = match && get(d, "metadata", "labels", k).GetStringValue() == v
				}
				if match {
					items.Items = append(items.Items, &fnv1.Resource{Resource: d})
				}
			}
			required[name] = items
		}
		if done {
			return rsp
		}
	}
	t.Fatal("the function's requirements never settled")
	return nil
}

// withDelivery returns a copy of an XR with PeerSet delivery and the
// share-segments-above annotation, none when empty.
func withDelivery(xr *structpb.Struct, shareAbove string) *structpb.Struct {
	b, _ := xr.MarshalJSON()
	out := &structpb.Struct{}
	_ = out.UnmarshalJSON(b)
	out.GetFields()["spec"].GetStructValue().GetFields()["delivery"] = str("PeerSet")
	meta := out.GetFields()["metadata"].GetStructValue()
	ann := meta.GetFields()["annotations"].GetStructValue()
	if ann == nil {
		ann = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		meta.Fields["annotations"] = structpb.NewStructValue(ann)
	}
	delete(ann.Fields, AnnotationShareAbove)
	if shareAbove != "" {
		ann.Fields[AnnotationShareAbove] = str(shareAbove)
	}
	return out
}

// resolved is, by target member, every Peer its PeerSet keeps once its
// SegmentSets are resolved; and how many SegmentSets, omissions and
// inline Peers next to references the response holds.
func resolved(t *testing.T, rsp *fnv1.RunFunctionResponse) (map[string][]kubev1alpha1.DesiredPeer, int, int) {
	t.Helper()
	segs := map[string]*kubev1alpha1.SegmentSet{}
	sets := map[string]*kubev1alpha1.PeerSet{}
	for name, r := range rsp.GetDesired().GetResources() {
		b, err := r.GetResource().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case isSegments(name):
			s := &kubev1alpha1.SegmentSet{}
			if err := json.Unmarshal(b, s); err != nil {
				t.Fatal(err)
			}
			segs[s.Name] = s
		case strings.HasPrefix(name, prefixPeerSet):
			s := &kubev1alpha1.PeerSet{}
			if err := json.Unmarshal(b, s); err != nil {
				t.Fatal(err)
			}
			sets[strings.TrimPrefix(name, prefixPeerSet)] = s
		}
	}
	out := map[string][]kubev1alpha1.DesiredPeer{}
	exceptions := 0
	for target, s := range sets {
		ps, err := kubev1alpha1.ResolvePeers(&s.Spec.ForProvider, func(n string) (*kubev1alpha1.SegmentSet, error) { return segs[n], nil })
		if err != nil {
			t.Fatalf("PeerSet of %s: %v", target, err)
		}
		out[target] = ps
		if len(s.Spec.ForProvider.SegmentSetRefs) > 0 {
			exceptions += len(s.Spec.ForProvider.Peers)
			for _, r := range s.Spec.ForProvider.SegmentSetRefs {
				exceptions += len(r.Omit)
			}
		}
	}
	return out, len(segs), exceptions
}

func TestSharedFormKeepsEveryPeer(t *testing.T) {
	dirs, err := filepath.Glob("../examples/render/*")
	if err != nil {
		t.Fatal(err)
	}
	shared, exceptions := 0, 0
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			reason := "Every member keeps exactly the same Peers whether its PeerSet holds them inline or references SegmentSets, exceptions included: switching forms deletes or rewrites no Peer."
			s := loadScenario(t, dir)
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
			inline, segs, _ := resolved(t, s.run(t, f, withDelivery(s.xr, "")))
			if segs != 0 {
				t.Fatalf("%s\nthe inline form of a small mesh composed %d SegmentSets", reason, segs)
			}
			// A PeerSet references its SegmentSets once they exist: the
			// first response writes them, the next one the PeerSets.
			first := s.run(t, f, withDelivery(s.xr, "0"))
			written := scenario{xr: s.xr, observed: map[string]*fnv1.Resource{}, required: s.required}
			for name, r := range s.observed {
				written.observed[name] = r
			}
			for name, r := range first.GetDesired().GetResources() {
				if isSegments(name) {
					written.observed[name] = &fnv1.Resource{Resource: r.GetResource()}
				}
				if !strings.HasPrefix(name, prefixPeerSet) {
					continue
				}
				for _, ref := range get(r.GetResource(), "spec", "forProvider", "segmentSetRefs").GetListValue().GetValues() {
					if ref := get(ref.GetStructValue(), "name").GetStringValue(); !observedSegment(s.observed, ref) {
						t.Errorf("A PeerSet references a SegmentSet only once it exists: %s references %s, which does not", name, ref)
					}
				}
			}
			rsp := written.run(t, f, withDelivery(s.xr, "0"))
			writtenBackAsIs(t, s.run(t, f, withDelivery(s.xr, "")))
			writtenBackAsIs(t, rsp)
			got, segs, n := resolved(t, rsp)
			if diff := cmp.Diff(inline, got); diff != "" {
				t.Errorf("%s\n-inline, +shared:\n%s", reason, diff)
			}
			if segs > 0 {
				shared++
			}
			exceptions += n
			t.Logf("%d SegmentSets, %d exceptions", segs, n)

			// The shared form read back as observed is what was
			// delivered: planning again changes nothing.
			again := scenario{xr: s.xr, observed: map[string]*fnv1.Resource{}, required: s.required}
			for name, r := range written.observed {
				if !delivers(name) {
					again.observed[name] = r
				}
			}
			for name, r := range rsp.GetDesired().GetResources() {
				if delivers(name) {
					again.observed[name] = &fnv1.Resource{Resource: r.GetResource()}
				}
			}
			next := again.run(t, f, withDelivery(s.xr, "0"))
			if diff := cmp.Diff(desiredJSON(t, rsp), desiredJSON(t, next)); diff != "" {
				t.Errorf("The function reads back the Peers its SegmentSets deliver: a second run over its own output must change nothing.\n-first, +second:\n%s", diff)
			}
		})
	}
	if shared == 0 || exceptions == 0 {
		t.Errorf("The scenarios must exercise the shared form (%d did) and its per-member exceptions (%d)", shared, exceptions)
	}
}

// writtenBackAsIs checks that every PeerSet and SegmentSet of a response
// keeps its spec when provider-kilomesh writes it back as its Go type (it
// does, to add its finalizer): a spec that changed there would be written
// again by Crossplane, each time two watch events of the mesh.
func writtenBackAsIs(t *testing.T, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	for name, r := range rsp.GetDesired().GetResources() {
		var typed any
		switch {
		case strings.HasPrefix(name, prefixPeerSet):
			typed = &kubev1alpha1.PeerSet{}
		case isSegments(name):
			typed = &kubev1alpha1.SegmentSet{}
		default:
			continue
		}
		b, err := r.GetResource().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, typed); err != nil {
			t.Fatal(err)
		}
		back, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		var before, after map[string]any
		if err := json.Unmarshal(b, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(back, &after); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before["spec"], after["spec"]); diff != "" {
			t.Errorf("%s changes when written back as its Go type; Crossplane would write it again:\n-composed, +written back:\n%s", name, diff)
		}
	}
}

// observedSegment tells whether a SegmentSet of that name is observed.
func observedSegment(observed map[string]*fnv1.Resource, name string) bool {
	for n, r := range observed {
		if isSegments(n) && get(r.GetResource(), "metadata", "name").GetStringValue() == name {
			return true
		}
	}
	return false
}

// desiredJSON is the desired composed resources of a response, by name.
func desiredJSON(t *testing.T, rsp *fnv1.RunFunctionResponse) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, r := range rsp.GetDesired().GetResources() {
		b, err := r.GetResource().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func TestSharedFormThreshold(t *testing.T) {
	cases := map[string]struct {
		reason     string
		annotation string
		fnDefault  int
		observed   bool
		want       bool
		wantErr    string
	}{
		"SmallStaysInline": {
			reason: "A 3 x 20 mesh (120 Peers) stays inline under the default threshold.",
		},
		"AnnotationLowers": {
			reason:     "The annotation lowers the threshold of one mesh.",
			annotation: "1000",
			want:       true,
		},
		"AnnotationNeverRaises": {
			reason:     "The annotation cannot raise the function's threshold.",
			annotation: "100000000",
			fnDefault:  1000,
			want:       true,
		},
		"Hysteresis": {
			reason:    "A mesh that shares already goes back inline only below half the threshold.",
			fnDefault: 60_000,
			observed:  true,
			want:      true,
		},
		"NoHysteresisWhenInline": {
			reason:    "A mesh that is inline stays so up to the threshold.",
			fnDefault: 60_000,
		},
		"BadAnnotation": {
			reason:     "An annotation that is not a number of bytes is an error naming it.",
			annotation: "lots",
			wantErr:    `metadata.annotations[kilomesh.io/share-segments-above]: Invalid value: "lots"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := largeMesh(t, "PeerSet", 3, 20)
			if tc.annotation != "" {
				meta := req.GetObserved().GetComposite().GetResource().GetFields()["metadata"].GetStructValue()
				meta.Fields["annotations"] = object(map[string]*structpb.Value{AnnotationShareAbove: str(tc.annotation)})
			}
			if tc.observed {
				req.Observed.Resources["segments-cluster-00-0"] = &fnv1.Resource{Resource: mustYAML(t, "apiVersion: kube.kilomesh.io/v1alpha1\nkind: SegmentSet\nmetadata: {name: x}\nspec: {peers: []}")}
			}
			f := &Function{log: logging.NewNopLogger(), ttl: time.Minute, shareAbove: tc.fnDefault}
			rsp, err := f.RunFunction(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				if len(rsp.GetResults()) != 1 || !strings.Contains(rsp.GetResults()[0].GetMessage(), tc.wantErr) {
					t.Fatalf("%s\nwant a fatal result saying %q, got %v", tc.reason, tc.wantErr, rsp.GetResults())
				}
				return
			}
			var segs []string
			for name := range rsp.GetDesired().GetResources() {
				if isSegments(name) {
					segs = append(segs, name)
				}
			}
			sort.Strings(segs)
			if got := len(segs) > 0; got != tc.want {
				t.Errorf("%s\nshared form: want %t, got %t (%v)", tc.reason, tc.want, got, segs)
			}
		})
	}
}

func TestSegmentSetsKeptWhileReferenced(t *testing.T) {
	reason := "A member removed takes its SegmentSet with it only once no PeerSet references it any more: until Crossplane applied the PeerSets' new spec, the old one must still resolve."
	s := loadScenario(t, "../examples/render/shared-segments")
	f := &Function{log: logging.NewNopLogger(), ttl: time.Minute}
	deliver := func(observed map[string]*fnv1.Resource, rsp *fnv1.RunFunctionResponse) {
		for name, r := range rsp.GetDesired().GetResources() {
			if delivers(name) {
				observed[name] = &fnv1.Resource{Resource: r.GetResource()}
			}
		}
	}
	// The mesh as delivered: its SegmentSets, then its PeerSets.
	deliver(s.observed, s.run(t, f, s.xr))
	deliver(s.observed, s.run(t, f, s.xr))

	// cluster-d leaves.
	xr := withDelivery(s.xr, "0")
	clusters := get(xr, "spec", "clusters").GetListValue()
	clusters.Values = clusters.GetValues()[:3]
	rsp := s.run(t, f, xr)
	if _, ok := rsp.GetDesired().GetResources()["segments-cluster-d-0"]; !ok {
		t.Fatalf("%s\nthe SegmentSet of cluster-d is dropped while the observed PeerSets reference it", reason)
	}
	for _, m := range []string{"cluster-a", "cluster-b", "cluster-c"} {
		for _, ref := range get(rsp.GetDesired().GetResources()["peerset-"+m].GetResource(), "spec", "forProvider", "segmentSetRefs").GetListValue().GetValues() {
			if strings.Contains(get(ref.GetStructValue(), "name").GetStringValue(), "cluster-d") {
				t.Errorf("%s\nthe new PeerSet of %s still references cluster-d's SegmentSet", reason, m)
			}
		}
	}
	// Once the PeerSets no longer reference it, it goes.
	delete(s.observed, "peerset-cluster-d")
	delete(s.observed, "inventory-cluster-d")
	deliver(s.observed, rsp)
	if _, ok := s.run(t, f, xr).GetDesired().GetResources()["segments-cluster-d-0"]; ok {
		t.Errorf("%s\nthe SegmentSet of cluster-d is kept although no PeerSet references it", reason)
	}
}

// TestChunkCount pins the count bound of a SegmentSet: small Peers that
// would fit one SegmentSet by bytes are spread over as many as keep each
// within the schema's maxItems (kubev1alpha1.MaxSegmentSetPeers), since the
// API server would refuse a larger one.
func TestChunkCount(t *testing.T) {
	x := &xrMesh{Namespace: "ns", Name: "mesh"}
	ps := make([]*kilov1alpha1.Peer, 0, kubev1alpha1.MaxSegmentSetPeers+1)
	for i := range kubev1alpha1.MaxSegmentSetPeers + 1 {
		ps = append(ps, &kilov1alpha1.Peer{ObjectMeta: metav1.ObjectMeta{Name: "p" + strconv.Itoa(i)}})
	}
	chunks, err := chunk(x, "a", ps)
	if err != nil {
		t.Fatalf("chunk(...): %v", err)
	}
	total := 0
	for _, c := range chunks {
		total += len(c.peers)
		if len(c.peers) > kubev1alpha1.MaxSegmentSetPeers {
			t.Errorf("chunk(...): SegmentSet %s holds %d Peers, more than the %d its schema allows", c.name, len(c.peers), kubev1alpha1.MaxSegmentSetPeers)
		}
	}
	if total != len(ps) {
		t.Errorf("chunk(...): the SegmentSets hold %d Peers, want %d", total, len(ps))
	}
}
