/*
Copyright 2026 The kilomesh Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package remote

import (
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// weighSlim returns the memory a slim object holds, byte for byte: every
// struct, every pointer's target, every slice's array, every string's
// bytes and every map it reaches, each as a separate allocation, rounded up
// as Go's allocator rounds it, or more. A bound on what the weights add up
// to is a bound on what is held: no object can weigh less than it holds,
// whatever a member sends, as long as its slim form keeps nothing of the
// object it was made from (see slimMeta).
func weighSlim(obj runtime.Object) int {
	return sizeOf(reflect.ValueOf(obj))
}

// alloc is what an allocation of n bytes takes, rounded up to at least
// Go's size class for it (classes waste at most an eighth; a large
// allocation is rounded to 8 KiB pages).
func alloc(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 32<<10:
		return (n + n/8 + 15) &^ 15
	}
	return n + 8<<10
}

var timeType = reflect.TypeFor[time.Time]()

// sizeOf is the memory v holds outside of itself: what its pointers,
// slices, strings and maps reach, each an allocation of its own. A value
// held by pointer counts its own size too.
func sizeOf(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		return alloc(int(e.Type().Size())) + sizeOf(e)
	case reflect.Interface:
		if v.IsNil() {
			return 0
		}
		e := v.Elem()
		return alloc(int(e.Type().Size())) + sizeOf(e)
	case reflect.String:
		return alloc(v.Len())
	case reflect.Slice:
		if v.IsNil() {
			return 0
		}
		n := alloc(v.Cap() * int(v.Type().Elem().Size()))
		for i := range v.Len() {
			n += sizeOf(v.Index(i))
		}
		return n
	case reflect.Array:
		n := 0
		for i := range v.Len() {
			n += sizeOf(v.Index(i))
		}
		return n
	case reflect.Map:
		if v.IsNil() {
			return 0
		}
		// A map's header, and its groups of eight slots of key, value and
		// a control byte, filled to at most seven eighths.
		slot := int(v.Type().Key().Size() + v.Type().Elem().Size())
		n := alloc(48) + alloc((v.Len()/7+1)*(8+8*slot))
		it := v.MapRange()
		for it.Next() {
			n += sizeOf(it.Key()) + sizeOf(it.Value())
		}
		return n
	case reflect.Struct:
		if v.Type() == timeType {
			return 0 // its location is shared by every time of a zone
		}
		n := 0
		for i := range v.NumField() {
			n += sizeOf(v.Field(i))
		}
		return n
	default:
		return 0 // held in place: counted by what holds it
	}
}
