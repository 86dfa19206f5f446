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

// Package controller sets up every controller of provider-kilomesh.
package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/controller/nodeinventory"
	"github.com/kilomesh/kilomesh/provider/internal/controller/peerset"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
)

const errScheme = "cannot build the scheme"

// Setup adds the NodeInventory and PeerSet controllers to the manager. They
// share one registry of member-cluster watches and one usage tracker.
func Setup(mgr ctrl.Manager, o controller.Options, reg *remote.Registry) error {
	usage := clients.NewUsageTracker(mgr.GetClient())
	if err := nodeinventory.Setup(mgr, o, reg, usage); err != nil {
		return err
	}
	return peerset.Setup(mgr, o, reg, usage)
}

// NewScheme returns the scheme of provider-kilomesh's control-plane client.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, errors.Wrap(err, errScheme)
		}
	}
	return s, nil
}

// ManagerOptions returns the manager options every provider-kilomesh
// process uses, tests included. Secrets are read straight from the API
// server (caching them would watch every Secret of the control plane) and
// cached objects drop their managed fields.
func ManagerOptions(s *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme: s,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	}
}
