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

// Package ownership says which Peers of a member a set of the provider may
// own: the labels its selector must carry, and the field manager it writes
// with. PeerSets and ServiceSyncs share it.
package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

const (
	errFmtSelectorNamespace = "spec.forProvider.selector: %s=%q claims the Peers of another namespace's mesh; a PeerSet in namespace %q owns only Peers labelled %s=%q"
	errFmtSelectorManagedBy = "spec.forProvider.selector: %s=%q; a PeerSet owns only Peers labelled %s=%s"
	errFmtSelectorMesh      = "spec.forProvider.selector: %s is required; a PeerSet owns only the Peers of one mesh"
)

// Selector returns the labels that mark the Peers a PeerSet in namespace
// ns owns: its selector, which must name a mesh, plus the managed-by marker
// and the PeerSet's own namespace. Whoever may create a PeerSet in a
// namespace may thus reach only the Peers of that namespace's meshes, and
// never a Peer made by hand. A selector that claims another namespace or
// another manager, or names no mesh, is refused.
func Selector(ns string, selector map[string]string) (map[string]string, error) {
	if v, ok := selector[meshv1alpha1.LabelManagedBy]; ok && v != meshv1alpha1.ManagedByValue {
		return nil, errors.Errorf(errFmtSelectorManagedBy, meshv1alpha1.LabelManagedBy, v, meshv1alpha1.LabelManagedBy, meshv1alpha1.ManagedByValue)
	}
	own := meshv1alpha1.LabelValue(ns)
	if v, ok := selector[meshv1alpha1.LabelMeshNamespace]; ok && v != own {
		return nil, errors.Errorf(errFmtSelectorNamespace, meshv1alpha1.LabelMeshNamespace, v, ns, meshv1alpha1.LabelMeshNamespace, own)
	}
	if selector[meshv1alpha1.LabelMesh] == "" {
		return nil, errors.Errorf(errFmtSelectorMesh, meshv1alpha1.LabelMesh)
	}
	out := maps.Clone(selector)
	out[meshv1alpha1.LabelManagedBy] = meshv1alpha1.ManagedByValue
	out[meshv1alpha1.LabelMeshNamespace] = own
	return out, nil
}

// maxFieldManager is the longest field manager the API server accepts.
const maxFieldManager = 128

// fieldManagerPrefix starts the field manager of every PeerSet.
const fieldManagerPrefix = "kilomesh/"

// FieldManager returns the field manager of the PeerSet ns/name: its own,
// so that the managed fields of a Peer say which set wrote it, and no two
// sets share one. A name too long for the API is cut and given a hash of
// the whole.
func FieldManager(ns, name string) string {
	m := fieldManagerPrefix + ns + "/" + name
	if len(m) <= maxFieldManager {
		return m
	}
	sum := sha256.Sum256([]byte(ns + "/" + name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(m[:maxFieldManager-len(suffix)], "-./") + suffix
}
