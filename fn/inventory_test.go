package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// jsonObservation is how an inventory's observation was read before the
// direct reader: protojson, then encoding/json. The reader must give exactly
// what it gives, errors included.
func jsonObservation(v *structpb.Value) (kubev1alpha1.NodeInventoryObservation, error) {
	var o kubev1alpha1.NodeInventoryObservation
	b, err := protojson.Marshal(v)
	if err != nil {
		return o, err
	}
	err = json.Unmarshal(b, &o)
	return o, err
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// sameAsJSON checks readAtProvider, and the direct reader alone, against
// jsonObservation, and tells whether the direct reader read the value
// itself.
func sameAsJSON(t *testing.T, name string, v *structpb.Value) bool {
	t.Helper()
	want, wantErr := jsonObservation(v)
	var got kubev1alpha1.NodeInventoryObservation
	err := readAtProvider(v, &got)
	if errText(err) != errText(wantErr) || reflect.TypeOf(err) != reflect.TypeOf(wantErr) {
		t.Errorf("%s: readAtProvider error %q (%T), JSON %q (%T)", name, errText(err), err, errText(wantErr), wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%s: readAtProvider differs from JSON, -JSON +got:\n%s", name, cmp.Diff(want, got))
	}
	direct, ok := decodeObservation(v)
	switch {
	case !ok:
	case wantErr != nil:
		t.Errorf("%s: the direct reader read what JSON refuses (%v)", name, wantErr)
	case !reflect.DeepEqual(direct, want):
		t.Errorf("%s: the direct reader differs from JSON, -JSON +direct:\n%s", name, cmp.Diff(want, direct))
	}
	return ok
}

// fullObservation sets every field of an observation, twice where a list
// holds them; TestFullObservationIsFull pins that none is left out.
func fullObservation() kubev1alpha1.NodeInventoryObservation {
	at := metav1.NewTime(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	since := metav1.NewTime(time.Date(2026, 11, 22, 0, 58, 0, 0, time.FixedZone("x", 3600)))
	node := func(name string) kubev1alpha1.ObservedNode {
		return kubev1alpha1.ObservedNode{
			Name:        name,
			PodCIDRs:    []string{"10.1.1.0/24", "fd00:1::/64"},
			InternalIPs: []string{"192.168.1.11"},
			ExternalIPs: []string{"203.0.113.11", "2001:db8::11"},
			Location:    "eu-west",
			Ready:       true,
			Kilo: &kubev1alpha1.KiloAnnotations{
				Key:                 "tpvf7xLm7qctOgAc3v4taYj0i41t2f9GiY43enBeaDc=",
				WireguardIP:         "10.201.0.1/16",
				Endpoint:            "203.0.113.11:51820",
				InternalIP:          "192.168.1.11/24",
				ForceEndpoint:       "[2001:db8::11]:51820",
				ClustermeshEndpoint: "node.example.com:51820",
				Granularity:         "full",
				PersistentKeepalive: "25",
				DiscoveredEndpoints: `{"KCqaqZHm0OOErIXI9jJrvMTVAQBmbWzv7rb6JiWmmPs=":{"IP":"198.51.100.1","Port":51820,"Zone":""}}`,
				ForceInternalIP:     "-",
				AllowedLocationIPs:  "10.9.0.0/24,10.9.1.0/24",
				Leader:              "true",
			},
			Stale:      true,
			StaleSince: &since,
		}
	}
	return kubev1alpha1.NodeInventoryObservation{
		ObservedAt: &at,
		NodeCount:  2,
		Nodes:      []kubev1alpha1.ObservedNode{node("node-a1"), node("ñode-a2 \u2028\"quoted\"")},
		ForeignPeers: []kubev1alpha1.ForeignPeer{
			{Name: "hand-made", PublicKey: "KCqaqZHm0OOErIXI9jJrvMTVAQBmbWzv7rb6JiWmmPs=", AllowedIPs: []string{"10.0.0.0/8", "not a cidr"}},
			{Name: "other", PublicKey: "x", AllowedIPs: []string{"10.1.0.0/16"}},
		},
		ForeignPeersIncomplete: "more than 16384 routes",
		NodesIncomplete:        "more than 5000 nodes",
	}
}

// TestFullObservationIsFull fails when a field of the observation is added
// and fullObservation does not set it: the direct reader must then learn it.
func TestFullObservationIsFull(t *testing.T) {
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("fullObservation leaves %s unset", path)
			return
		}
		switch v.Kind() { //nolint:exhaustive // only containers are walked
		case reflect.Pointer:
			if _, isTime := v.Interface().(*metav1.Time); !isTime {
				walk(path, v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(path+"[]", v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		}
	}
	walk("atProvider", reflect.ValueOf(fullObservation()))
}

// toStructValue is the protobuf form of a Go value, as a request carries it.
func toStructValue(t testing.TB, v any) *structpb.Value {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := &structpb.Value{}
	if err := protojson.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// renderObservations are the observations of every NodeInventory of the
// render scenarios, by scenario and inventory.
func renderObservations(t *testing.T) map[string]*structpb.Value {
	t.Helper()
	files, err := filepath.Glob("../examples/render/*/observed.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no render scenarios found: %v", err)
	}
	out := map[string]*structpb.Value{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			s := &structpb.Struct{}
			if err := protojson.Unmarshal(j, s); err != nil {
				continue // not an object
			}
			if get(s, "kind").GetStringValue() != kubev1alpha1.NodeInventoryKind {
				continue
			}
			if at := get(s, "status", "atProvider"); at != nil {
				out[filepath.Base(filepath.Dir(f))+"/"+get(s, "metadata", "name").GetStringValue()] = at
			}
		}
	}
	return out
}

// TestReadAtProviderWellFormed pins that the direct reader reads every
// inventory the function meets, and reads it as encoding/json does.
func TestReadAtProviderWellFormed(t *testing.T) {
	inputs := renderObservations(t)
	inputs["full"] = toStructValue(t, fullObservation())
	inputs["empty"] = toStructValue(t, kubev1alpha1.NodeInventoryObservation{})
	inputs["empty lists"] = toStructValue(t, map[string]any{"nodes": []any{}, "foreignPeers": []any{map[string]any{"name": "p", "allowedIPs": []any{}}}})
	req := largeMesh(t, "PeerSet", 2, 30)
	for name, r := range req.GetObserved().GetResources() {
		inputs["large/"+name] = get(r.GetResource(), "status", "atProvider")
	}
	for name, v := range inputs {
		if !sameAsJSON(t, name, v) {
			t.Errorf("%s: the direct reader left a well-formed inventory to JSON", name)
		}
	}
}

// hostileValues replace, one at a time, each value of an observation.
func hostileValues() map[string]*structpb.Value {
	list := func(vs ...*structpb.Value) *structpb.Value {
		return structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	obj := func(f map[string]*structpb.Value) *structpb.Value {
		return structpb.NewStructValue(&structpb.Struct{Fields: f})
	}
	s := structpb.NewStringValue
	n := structpb.NewNumberValue
	return map[string]*structpb.Value{
		"nil":            nil,
		"no kind":        {},
		"null":           structpb.NewNullValue(),
		"true":           structpb.NewBoolValue(true),
		"false":          structpb.NewBoolValue(false),
		"0":              n(0),
		"-0":             n(math.Copysign(0, -1)),
		"7":              n(7),
		"-3":             n(-3),
		"1.5":            n(1.5),
		"2^53":           n(1 << 53),
		"2^53+2":         n(1<<53 + 2),
		"-2^53":          n(-(1 << 53)),
		"1e21":           n(1e21),
		"1e300":          n(1e300),
		"NaN":            n(math.NaN()),
		"+Inf":           n(math.Inf(1)),
		"-Inf":           n(math.Inf(-1)),
		"empty string":   s(""),
		"string":         s("x"),
		"string null":    s("null"),
		"time":           s("2026-11-22T01:00:00Z"),
		"time +02:00":    s("2026-11-22T01:00:00+02:00"),
		"time no zone":   s("2026-11-22T01:00:00"),
		"time fraction":  s("2026-11-22T01:00:00.123456789Z"),
		"not a time":     s("yesterday"),
		"invalid UTF-8":  s("node-\xff"),
		"huge string":    s(strings.Repeat("é", 1<<18)),
		"nil list":       {Kind: &structpb.Value_ListValue{}},
		"empty list":     list(),
		"string list":    list(s("a"), s("b")),
		"number list":    list(n(1)),
		"null in list":   list(s("a"), structpb.NewNullValue()),
		"nil in list":    list(nil),
		"object in list": list(obj(map[string]*structpb.Value{"name": s("x")})),
		"nil struct":     {Kind: &structpb.Value_StructValue{}},
		"empty object":   obj(nil),
		"object":         obj(map[string]*structpb.Value{"name": s("x"), "key": s("k")}),
		"odd object":     obj(map[string]*structpb.Value{"NAME": s("x"), "\xff": s("k")}),
	}
}

// extraKeys are added, one at a time, to each object of an observation:
// names encoding/json ignores, and other spellings it matches to a field.
var extraKeys = []string{"unknown", "", "\xff", "Name", "NAME", "ſtale", "\u212Aey", "Key", "Nodes", "podcidrs", "observedat"}

// mutations are the observation v with one change each: a value replaced,
// a field dropped or added, a list cut or grown.
func mutations(v *structpb.Value) map[string]*structpb.Value {
	out := map[string]*structpb.Value{}
	for name, h := range hostileValues() {
		out["= "+name] = h
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		with := func(key string, val *structpb.Value, drop bool) *structpb.Value {
			f := make(map[string]*structpb.Value, len(fields)+1)
			for k, v := range fields {
				f[k] = v
			}
			if drop {
				delete(f, key)
			} else {
				f[key] = val
			}
			return structpb.NewStructValue(&structpb.Struct{Fields: f})
		}
		for key, fv := range fields {
			for name, m := range mutations(fv) {
				out["."+key+" "+name] = with(key, m, false)
			}
			out["-"+key] = with(key, nil, true)
			out["+"+strings.ToUpper(key)] = with(strings.ToUpper(key), fv, false)
		}
		for _, key := range extraKeys {
			for _, val := range []*structpb.Value{structpb.NewStringValue("extra"), structpb.NewNumberValue(1), structpb.NewStructValue(&structpb.Struct{})} {
				out["+"+key+"="+val.String()] = with(key, val, false)
			}
		}
	case *structpb.Value_ListValue:
		items := k.ListValue.GetValues()
		for i, item := range items {
			for name, m := range mutations(item) {
				c := append([]*structpb.Value(nil), items...)
				c[i] = m
				out["["+string(rune('0'+i))+"] "+name] = structpb.NewListValue(&structpb.ListValue{Values: c})
			}
		}
		if len(items) > 0 {
			out["[:1]"] = structpb.NewListValue(&structpb.ListValue{Values: items[:1]})
			out["+null"] = structpb.NewListValue(&structpb.ListValue{Values: append(append([]*structpb.Value(nil), items...), structpb.NewNullValue())})
		}
	}
	return out
}

// TestReadAtProviderHostile pins that the direct reader gives exactly what
// encoding/json gives, value or error, for observations that a node owner or
// a broken provider could write: every field of a full observation
// replaced by a value of every kind, dropped, spelt otherwise or doubled.
func TestReadAtProviderHostile(t *testing.T) {
	full := toStructValue(t, fullObservation())
	direct, total := 0, 0
	for name, v := range mutations(full) {
		total++
		if sameAsJSON(t, name, v) {
			direct++
		}
	}
	// Both branches of the comparison must be exercised.
	if direct == 0 || direct == total {
		t.Errorf("the direct reader read %d of %d mutations", direct, total)
	}
	t.Logf("the direct reader read %d of %d mutations, JSON the rest", direct, total)
}

// FuzzReadAtProvider compares the direct reader with encoding/json on
// observations written as JSON.
func FuzzReadAtProvider(f *testing.F) {
	b, err := json.Marshal(fullObservation())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add(`{"nodes":[{"name":"a","ready":"true","kilo":null}],"nodeCount":1.5}`)
	f.Add(`{"observedAt":"2026-11-22T01:00:00+02:00","NODES":[],"nodes":[{"Name":"x","ſtale":true}]}`)
	f.Add(`{"foreignPeers":[{"name":"p","allowedIPs":[1,"10.0.0.0/8"]}],"nodeCount":9007199254740993}`)
	f.Fuzz(func(t *testing.T, s string) {
		v := &structpb.Value{}
		if protojson.Unmarshal([]byte(s), v) != nil {
			return
		}
		sameAsJSON(t, "fuzz", v)
	})
}
