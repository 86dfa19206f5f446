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

package controller_test

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"

	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// ownControlPlane starts a control plane of the test's own, stopped when
// the test ends, and returns its config and an admin client.
func ownControlPlane(t *testing.T) (*rest.Config, client.WithWatch) {
	t.Helper()
	s, err := pcontroller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	env, c := testenv.StartControlPlane(t, s)
	return env.Config, c
}

// startOwnProvider runs a provider of the test's own with cfg's identity,
// configured as testConfig and then by adjust, until the test ends; what
// the test starts before it stops after it. It returns the provider's
// registry of member watches.
func startOwnProvider(t *testing.T, cfg *rest.Config, adjust func(c *pcontroller.Config)) *remote.Registry {
	t.Helper()
	mctx, stop := context.WithCancel(context.Background())
	mgr, reg, err := pcontroller.NewManager(mctx, cfg, testConfig(logging.NewNopLogger(), 2, func(c *pcontroller.Config) {
		adjust(c)
		// The provider of TestMain runs in this process too.
		manager := c.Manager
		c.Manager = func(o *ctrl.Options) {
			manager(o)
			o.Controller.SkipNameValidation = ptr.To(true)
		}
	}))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the provider stopped with an error: %v", err)
		}
	})
	return reg
}
