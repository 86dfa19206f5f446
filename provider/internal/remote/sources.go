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
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

const errMetadataClient = "cannot create a metadata client of the control plane"

// A SourceWatcher watches one object of the control plane that credentials
// are read from, calling changed whenever it is created, updated or
// deleted, until ctx is done.
type SourceWatcher interface {
	WatchSource(ctx context.Context, s clients.Source, changed func())
}

// A MetadataWatcher watches sources by name through the metadata API: it
// never holds what a Secret contains, and watches only the objects in use,
// not every Secret of the control plane.
type MetadataWatcher struct {
	client metadata.Interface
}

// NewMetadataWatcher returns a SourceWatcher of the control plane cfg
// reaches.
func NewMetadataWatcher(cfg *rest.Config) (*MetadataWatcher, error) {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, errMetadataClient)
	}
	return &MetadataWatcher{client: mc}, nil
}

// WatchSource starts a watch of the one object s names. Its first list
// counts as a change too: the object may have changed between the read of
// the credentials and the start of the watch.
func (w *MetadataWatcher) WatchSource(ctx context.Context, s clients.Source, changed func()) {
	byName := fields.OneTermEqualSelector("metadata.name", s.Name).String()
	inf := metadatainformer.NewFilteredMetadataInformer(w.client, s.Resource(), s.Namespace, 0, nil,
		func(o *metav1.ListOptions) { o.FieldSelector = byName }).Informer()
	// The handler is added before the informer runs, so it cannot fail.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(before, after any) {
			b, okb := before.(*metav1.PartialObjectMetadata)
			a, oka := after.(*metav1.PartialObjectMetadata)
			if !okb || !oka || b.ResourceVersion != a.ResourceVersion {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	})
	go inf.RunWithContext(ctx)
}

// sourceWatch is the running watch of one source.
type sourceWatch struct {
	cancel context.CancelFunc
}

// Depend records the objects of the control plane that u's credentials are
// read from. A change to any of them reconciles u at once, so a rotated
// kubeconfig Secret, or a config pointed at another Secret, takes effect
// within seconds. Watches of objects no user depends on any more stop.
// Without a SourceWatcher, Depend only records.
func (r *Registry) Depend(u User, sources []clients.Source) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(sources) == 0 {
		r.forgetLocked(u)
		return
	}
	// Every reconcile depends again: most find nothing changed.
	before, had := r.deps[u]
	if slices.Equal(before, sources) {
		return
	}
	r.deps[u] = slices.Clone(sources)
	if r.watcher == nil {
		return
	}
	for _, s := range sources {
		if _, ok := r.watches[s]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		r.watches[s] = sourceWatch{cancel: cancel}
		r.watcher.WatchSource(ctx, s, func() { r.sourceChanged(s) })
	}
	if had {
		r.stopUnusedSourcesLocked()
	}
}

// Watches reports whether s is watched for changes of credentials.
func (r *Registry) Watches(s clients.Source) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.watches[s]
	return ok
}

// forgetLocked drops what u depends on.
func (r *Registry) forgetLocked(u User) {
	if _, ok := r.deps[u]; !ok {
		return
	}
	delete(r.deps, u)
	r.stopUnusedSourcesLocked()
}

func (r *Registry) stopUnusedSourcesLocked() {
	used := map[clients.Source]bool{}
	for _, ss := range r.deps {
		for _, s := range ss {
			used[s] = true
		}
	}
	for s, w := range r.watches {
		if !used[s] {
			w.cancel()
			delete(r.watches, s)
		}
	}
}

// sourceChanged enqueues every user that depends on s.
func (r *Registry) sourceChanged(s clients.Source) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, ss := range r.deps {
		for _, d := range ss {
			if d == s {
				r.enqueueLocked(u)
				break
			}
		}
	}
}
