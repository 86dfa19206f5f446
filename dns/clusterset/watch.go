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

package clusterset

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
)

const (
	errKube = "cannot create a Kubernetes client"
	errMCS  = "cannot create a Multi-Cluster Services client"
)

// Watch fills the Index from an API server until ctx is done: the
// ServiceImports, and the EndpointSlices labelled
// multicluster.kubernetes.io/service-name, of the namespaces given (every
// namespace when none is). It returns once the watches have started; the
// Index says when they have synced.
func Watch(ctx context.Context, cfg *rest.Config, namespaces []string, x *Index) error {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", errKube, err)
	}
	mc, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", errMCS, err)
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		kf := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = mcsv1beta1.LabelServiceName }))
		mf := mcsinformers.NewSharedInformerFactoryWithOptions(mc, 0, mcsinformers.WithNamespace(ns))
		si := mf.Multicluster().V1beta1().ServiceImports().Informer()
		es := kf.Discovery().V1().EndpointSlices().Informer()
		for _, inf := range []cache.SharedIndexInformer{si, es} {
			// The Index keeps what it needs; the caches need no more than
			// names.
			if err := inf.SetTransform(slim); err != nil {
				return err
			}
		}
		if _, err := si.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { setImport(x, o) },
			UpdateFunc: func(_, o any) { setImport(x, o) },
			DeleteFunc: func(o any) { deleted(o, x.DeleteImport) },
		}); err != nil {
			return err
		}
		if _, err := es.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { setSlice(x, o) },
			UpdateFunc: func(_, o any) { setSlice(x, o) },
			DeleteFunc: func(o any) { deleted(o, x.DeleteSlice) },
		}); err != nil {
			return err
		}
		kf.Start(ctx.Done())
		mf.Start(ctx.Done())
		synced = append(synced, si.HasSynced, es.HasSynced)
	}
	x.SetSynced(func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
	})
	return nil
}

// slim drops the managed fields of an object before the cache keeps it.
func slim(o any) (any, error) {
	if m, ok := o.(metav1.Object); ok {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return o, nil
}

func setImport(x *Index, o any) {
	if si, ok := o.(*mcsv1beta1.ServiceImport); ok {
		x.SetImport(si)
	}
}

func setSlice(x *Index, o any) {
	if es, ok := o.(*discoveryv1.EndpointSlice); ok {
		x.SetSlice(es)
	}
}

func deleted(o any, del func(ns, name string)) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if m, ok := o.(metav1.Object); ok {
		del(m.GetNamespace(), m.GetName())
	}
}
