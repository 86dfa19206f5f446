package main

import (
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

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
