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
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/internal/testing/wait"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	"github.com/kilomesh/kilomesh/provider/internal/remote"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// The control plane and the provider run once for every test of this
// package. The poll interval is an hour: everything the tests see happen is
// driven by watches.
var cp struct {
	cfg  *rest.Config
	kube client.WithWatch
	reg  *remote.Registry

	mu        sync.Mutex
	inCluster *rest.Config
}

// waitTimeout bounds every wait for an eventual state; it is a deadline for
// a hung test, not a performance assertion.
const waitTimeout = 90 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the provider's API server tests with -short (make check): make unit runs them")
		os.Exit(m.Run())
	}
	if !testenv.Enabled() {
		fmt.Println("skipping the provider's API server tests: " + testenv.SkipMessage)
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, cfg, err := testenv.ControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop() //nolint:errcheck // Best effort at the end of the tests.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	log := logging.NewNopLogger()
	if os.Getenv("PROVIDER_TEST_DEBUG") != "" {
		zl := zap.New(zap.UseDevMode(true))
		ctrl.SetLogger(zl)
		log = logging.NewLogrLogger(zl)
	}
	inCluster := func() (*rest.Config, error) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		if cp.inCluster == nil {
			return nil, rest.ErrNotInCluster
		}
		return rest.CopyConfig(cp.inCluster), nil
	}
	mgr, reg, err := pcontroller.NewManager(ctx, cfg, testConfig(log, 4, func(c *pcontroller.Config) {
		c.InCluster = inCluster
		c.Scheme = testenv.AddProviderKubernetesToScheme
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp.reg = reg
	if err := testenv.SetupProviderConfigProtection(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	cp.cfg = cfg
	cp.kube, err = client.NewWithWatch(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// memberTimeout bounds the requests of the tests' providers to member
// clusters: long enough for any request of a healthy API server on a busy
// machine, short enough that a member that never answers is reported
// within a test.
const memberTimeout = 10 * time.Second

// testConfig is the provider every test runs: changes of member clusters
// reach status after 100 ms; the poll interval is an hour, so everything
// the tests see happen is driven by watches; so is the evidence interval. adjust changes it further.
func testConfig(log logging.Logger, workers int, adjust func(c *pcontroller.Config)) pcontroller.Config {
	c := pcontroller.Config{
		Options: controller.Options{
			Logger:                  log,
			PollInterval:            time.Hour,
			MaxConcurrentReconciles: workers,
			GlobalRateLimiter:       ratelimiter.NewGlobal(1000),
			Features:                &feature.Flags{},
		},
		Coalesce:     100 * time.Millisecond,
		Timeout:      memberTimeout,
		ReapInterval: time.Second,
		// Evidence waits for a change that decides a Peer: a test sees
		// whether a change is held back or not.
		EvidenceInterval: time.Hour,
		Manager: func(o *ctrl.Options) {
			o.Metrics.BindAddress = "0"
			o.HealthProbeBindAddress = "0"
		},
	}
	if adjust != nil {
		adjust(&c)
	}
	return c
}

func needAPIServers(t *testing.T) {
	t.Helper()
	if cp.cfg == nil {
		t.Skip(testenv.SkipMessage)
	}
}

// eventually calls fn until it returns nil, failing the test with fn's last
// error after waitTimeout.
func eventually(ctx context.Context, t *testing.T, what string, fn func() error) {
	t.Helper()
	eventuallyWithin(ctx, t, waitTimeout, what, fn)
}

// eventuallyWithin is eventually with another deadline, for states that a
// slower mechanism would also reach in the end.
func eventuallyWithin(ctx context.Context, t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	wait.Eventually(ctx, t, what, d, 50*time.Millisecond, func() (bool, error) {
		err := fn()
		return err == nil, err
	})
}

var nsSeq struct {
	sync.Mutex
	n int
}

// namespace creates a fresh namespace in the control plane.
func namespace(ctx context.Context, t *testing.T) string {
	t.Helper()
	nsSeq.Lock()
	nsSeq.n++
	name := fmt.Sprintf("t%d-%s", nsSeq.n, strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	nsSeq.Unlock()
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	if err := cp.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// providerConfig stores a kubeconfig in a Secret of ns and creates a
// namespaced provider-kubernetes ProviderConfig that uses it.
func providerConfig(ctx context.Context, t *testing.T, ns, name string, kubeconfig []byte) {
	t.Helper()
	if err := testenv.ProviderConfig(ctx, cp.kube, ns, name, kubeconfig); err != nil {
		t.Fatal(err)
	}
}

func pkConfig(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(clients.Group + "/" + clients.Version)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func ref(kind, name string) *xpv2.ProviderConfigReference {
	return &xpv2.ProviderConfigReference{Kind: kind, Name: name}
}

func getInventory(ctx context.Context, ns, name string) (*v1alpha1.NodeInventory, error) {
	ni := &v1alpha1.NodeInventory{}
	return ni, cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ni)
}

func getPeerSet(ctx context.Context, ns, name string) (*v1alpha1.PeerSet, error) {
	ps := &v1alpha1.PeerSet{}
	return ps, cp.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ps)
}

// gone returns nil once the object no longer exists.
func gone(ctx context.Context, obj client.Object) func() error {
	return func() error {
		err := cp.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if kerrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s still exists (finalizers %v)", obj.GetName(), obj.GetFinalizers())
	}
}

// conditioned is a managed resource, as far as its conditions go.
type conditioned interface {
	GetCondition(xpv2.ConditionType) xpv2.Condition
}

// inventoryOf reads an inventory for synced.
func inventoryOf(ctx context.Context, ns, name string) func() (conditioned, error) {
	return func() (conditioned, error) { return getInventory(ctx, ns, name) }
}

// peerSetOf reads a PeerSet for synced.
func peerSetOf(ctx context.Context, ns, name string) func() (conditioned, error) {
	return func() (conditioned, error) { return getPeerSet(ctx, ns, name) }
}

// synced returns nil when the condition Synced has the wanted status and
// its message contains msg.
func synced(get func() (conditioned, error), status corev1.ConditionStatus, msg string) func() error {
	return func() error {
		mg, err := get()
		if err != nil {
			return err
		}
		c := mg.GetCondition(xpv2.TypeSynced)
		if c.Status != status || !strings.Contains(c.Message, msg) {
			return fmt.Errorf("Synced is %s %q, want %s containing %q", c.Status, c.Message, status, msg)
		}
		return nil
	}
}

func isConflict(err error) bool { return kerrors.IsConflict(err) }
