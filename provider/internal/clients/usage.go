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

package clients

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// FieldOwner is the field manager of everything provider-kilomesh applies.
const FieldOwner = "kilomesh"

const (
	errApplyUsage  = "cannot record the use of the provider-kubernetes config"
	errDeleteUsage = "cannot delete the record of the use of the provider-kubernetes config"
)

// UsageGroupVersionKind is provider-kubernetes' ProviderConfigUsage.
var UsageGroupVersionKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: KindProviderConfigUsage}

// A UsageTracker records that a managed resource uses a provider-kubernetes
// config by keeping a provider-kubernetes ProviderConfigUsage for it.
// provider-kubernetes' own config controller then refuses to finish the
// deletion of a config while a usage names it, exactly as for its Objects,
// so a PeerSet can always reach its cluster to delete its Peers.
type UsageTracker struct {
	client client.Client

	mu sync.Mutex
	// recorded remembers which usage was last written for a managed
	// resource, so a steady reconcile costs no API call.
	recorded map[types.UID]ConfigRef
	// extra remembers the usages of the other configs a managed resource
	// uses (a ServiceSync's sources), by usage name.
	extra map[types.UID]map[string]ConfigRef
}

// NewUsageTracker returns a UsageTracker that writes through c.
func NewUsageTracker(c client.Client) *UsageTracker {
	return &UsageTracker{client: c, recorded: map[types.UID]ConfigRef{}, extra: map[types.UID]map[string]ConfigRef{}}
}

// Track records that mg uses the config it names. The usage is named after
// mg's UID, lives in mg's namespace, and is controlled by mg so that garbage
// collection removes it should Untrack never run.
func (t *UsageTracker) Track(ctx context.Context, mg resource.ModernManaged) error {
	ref, err := RefOf(mg)
	if err != nil {
		return err
	}
	t.mu.Lock()
	done := t.recorded[mg.GetUID()] == ref
	t.mu.Unlock()
	if done {
		return nil
	}
	gvk, err := apiutil.GVKForObject(mg, t.client.Scheme())
	if err != nil {
		return errors.Wrap(err, errApplyUsage)
	}
	u := usageFor(mg, gvk, ref)
	if err := t.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return errors.Wrap(err, errApplyUsage)
	}
	t.mu.Lock()
	t.recorded[mg.GetUID()] = ref
	t.mu.Unlock()
	return nil
}

// TrackOthers records that mg uses the configs of refs too, besides the one
// it names (a ServiceSync reads its sources with theirs), each by a usage of
// its own, and deletes the usages of the other configs it no longer uses.
// provider-kubernetes then refuses to finish the deletion of any of them
// while mg uses it.
func (t *UsageTracker) TrackOthers(ctx context.Context, mg resource.ModernManaged, refs []ConfigRef) error {
	want := make(map[string]ConfigRef, len(refs))
	for _, r := range refs {
		want[otherUsageName(mg.GetUID(), r)] = r
	}
	t.mu.Lock()
	have := t.extra[mg.GetUID()]
	t.mu.Unlock()
	var gvk schema.GroupVersionKind
	for name, r := range want {
		if h, ok := have[name]; ok && h == r {
			continue
		}
		if gvk.Kind == "" {
			var err error
			if gvk, err = apiutil.GVKForObject(mg, t.client.Scheme()); err != nil {
				return errors.Wrap(err, errApplyUsage)
			}
		}
		u := usageFor(mg, gvk, r)
		u.SetName(name)
		if err := t.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return errors.Wrap(err, errApplyUsage)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			if err := t.deleteUsage(ctx, mg.GetNamespace(), name); err != nil {
				return err
			}
		}
	}
	t.mu.Lock()
	t.extra[mg.GetUID()] = want
	t.mu.Unlock()
	return nil
}

// otherUsageName names the usage of another config of a managed resource:
// its UID and a digest of the config's kind and name, at most 53
// characters.
func otherUsageName(uid types.UID, r ConfigRef) string {
	sum := sha256.Sum256([]byte(r.Kind + "/" + r.Name))
	return string(uid) + "-" + hex.EncodeToString(sum[:])[:16]
}

// Untrack deletes the usage of mg, once mg no longer needs its config, and
// those of the other configs it used: the ones of others and those
// TrackOthers recorded.
func (t *UsageTracker) Untrack(ctx context.Context, mg resource.ModernManaged, others ...ConfigRef) error {
	names := map[string]bool{string(mg.GetUID()): true}
	for _, r := range others {
		names[otherUsageName(mg.GetUID(), r)] = true
	}
	t.mu.Lock()
	for n := range t.extra[mg.GetUID()] {
		names[n] = true
	}
	t.mu.Unlock()
	for n := range names {
		if err := t.deleteUsage(ctx, mg.GetNamespace(), n); err != nil {
			return err
		}
	}
	t.mu.Lock()
	delete(t.recorded, mg.GetUID())
	delete(t.extra, mg.GetUID())
	t.mu.Unlock()
	return nil
}

func (t *UsageTracker) deleteUsage(ctx context.Context, namespace, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(UsageGroupVersionKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	err := t.client.Delete(ctx, u)
	if resource.IgnoreNotFound(err) != nil {
		return errors.Wrap(err, errDeleteUsage)
	}
	return nil
}

func usageFor(mg resource.ModernManaged, gvk schema.GroupVersionKind, ref ConfigRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"providerConfigRef": map[string]any{"kind": ref.Kind, "name": ref.Name},
		"resourceRef": map[string]any{
			"apiVersion": gvk.GroupVersion().String(),
			"kind":       gvk.Kind,
			"name":       mg.GetName(),
			"uid":        string(mg.GetUID()),
		},
	}}
	u.SetGroupVersionKind(UsageGroupVersionKind)
	u.SetNamespace(mg.GetNamespace())
	u.SetName(string(mg.GetUID()))
	u.SetLabels(map[string]string{
		xpv2.LabelKeyProviderName: ref.Name,
		xpv2.LabelKeyProviderKind: ref.Kind,
	})
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               mg.GetName(),
		UID:                mg.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}})
	return u
}

func fromUnstructured(raw map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(raw, into)
}
