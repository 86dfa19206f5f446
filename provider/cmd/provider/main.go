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

// Command provider is provider-kilomesh: it publishes the Nodes of Kilo
// member clusters (NodeInventory) and keeps sets of Kilo Peers in them
// (PeerSet).
package main

import (
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/alecthomas/kong"
	// The images have no CA bundle: the binary carries the roots it verifies
	// public certificates with, when the system offers none.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
	pcontroller "github.com/kilomesh/kilomesh/provider/internal/controller"
	kmetrics "github.com/kilomesh/kilomesh/provider/internal/metrics"
)

// CLI of provider-kilomesh.
type CLI struct {
	Debug bool `help:"Emit debug logs, including controller-runtime's." short:"d"`

	Poll             time.Duration `default:"10m" help:"How often every resource is checked even without a change. Changes in member clusters are watched; this is a safety net."`
	Sync             time.Duration `default:"1h"  help:"How often the control-plane cache is resynced."`
	MaxReconcileRate int           `default:"10"  help:"The most reconciles per second, and the most running at once."`
	Coalesce         time.Duration `default:"200ms" help:"How long the changes of a member cluster are gathered before the resources that use it are reconciled."`
	MaxGather        time.Duration `default:"2s" help:"How long changes of a member cluster that keep coming, each within --coalesce of the last, are gathered into one reconcile at most."`
	MemberTimeout    time.Duration `default:"30s"   help:"How long a request to a member cluster may take: a list, the start of a watch, a write."`
	WriteDeadline    time.Duration `default:"10s"   help:"How long the writes of one reconcile of a PeerSet may take together; the rest follows at the next reconcile, after a backoff." name:"member-write-deadline"`
	EvidenceInterval time.Duration `default:"30s" help:"How often a NodeInventory publishes at most a change that is only evidence: handshakes Kilo recorded in kilo.squat.ai/discovered-endpoints that change no Peer. A change that may change a Peer is published at once, with the evidence gathered so far. 0 publishes evidence at once too."`
	AllowKubeconfig  []string      `enum:"insecure-skip-tls-verify,proxy-url,http" help:"Kubeconfig settings to accept although they expose the credentials: insecure-skip-tls-verify, proxy-url, http (a plain-HTTP server). Refused by default; repeat the flag or separate with commas." placeholder:"SETTING"`

	LeaderElection           bool   `env:"LEADER_ELECTION"           help:"Use leader election, for more than one replica."`
	MetricsBindAddress       string `default:":8080" env:"METRICS_BIND_ADDRESS"      help:"Address of the Prometheus metrics endpoint; 0 disables it."`
	HealthProbeBindAddress   string `default:":8081" env:"HEALTH_PROBE_BIND_ADDRESS" help:"Address of the /healthz and /readyz endpoints; 0 disables them."`
	PprofBindAddress         string `default:"0"     env:"PPROF_BIND_ADDRESS"        help:"Address of Go's /debug/pprof endpoints, for profiling; 0 disables them (the default). Bind it to loopback: profiles show the process's memory."`
	EnableManagementPolicies bool   `default:"true"  env:"ENABLE_MANAGEMENT_POLICIES" help:"Honour spec.managementPolicies."`
}

const (
	errConfig = "cannot load the control plane's client configuration"
	errSetup  = "cannot set up the controllers"
	errProbe  = "cannot add the health probes"
	errStart  = "cannot run the controller manager"
)

// Run provider-kilomesh until it receives SIGTERM or SIGINT.
func (c *CLI) Run() error {
	zl := zap.New(zap.UseDevMode(c.Debug))
	log := logging.NewLogrLogger(zl.WithName("provider-kilomesh"))
	// controller-runtime is very chatty; it only talks in debug mode.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if c.Debug {
		ctrl.SetLogger(zl)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return errors.Wrap(err, errConfig)
	}

	mm := managed.NewMRMetricRecorder()
	metrics.Registry.MustRegister(mm)
	o := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: c.MaxReconcileRate,
		PollInterval:            c.Poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(c.MaxReconcileRate),
		Features:                &feature.Flags{},
		MetricOptions:           &controller.MetricOptions{MRMetrics: mm},
	}
	if c.EnableManagementPolicies {
		o.Features.Enable(feature.EnableBetaManagementPolicies)
	}
	allow := clients.Allowances{}
	for _, a := range c.AllowKubeconfig {
		allow[a] = true
	}

	ctx := ctrl.SetupSignalHandler()
	mgr, _, err := pcontroller.NewManager(ctx, ratelimiter.LimitRESTConfig(cfg, c.MaxReconcileRate), pcontroller.Config{
		Options:          o,
		Coalesce:         c.Coalesce,
		MaxGather:        c.MaxGather,
		Timeout:          c.MemberTimeout,
		WriteDeadline:    c.WriteDeadline,
		Allow:            allow,
		EvidenceInterval: evidenceInterval(c.EvidenceInterval),
		Manager: func(mo *ctrl.Options) {
			mo.Cache.SyncPeriod = &c.Sync
			mo.Metrics = metricsserver.Options{BindAddress: c.MetricsBindAddress}
			mo.HealthProbeBindAddress = c.HealthProbeBindAddress
			mo.PprofBindAddress = c.PprofBindAddress
			mo.LeaderElection = c.LeaderElection
			mo.LeaderElectionID = "crossplane-leader-election-provider-kilomesh"
			mo.LeaderElectionResourceLock = resourcelock.LeasesResourceLock
		},
	})
	if err != nil {
		return errors.Wrap(err, errSetup)
	}
	metrics.Registry.MustRegister(kmetrics.Collectors(mgr.GetCache())...)
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return errors.Wrap(err, errProbe)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return errors.Wrap(err, errProbe)
	}
	log.Info("Starting", "poll", c.Poll.String(), "max-reconcile-rate", c.MaxReconcileRate, "member-timeout", c.MemberTimeout.String(), "member-write-deadline", c.WriteDeadline.String(), "evidence-interval", c.EvidenceInterval.String(), "allow-kubeconfig", c.AllowKubeconfig)
	return errors.Wrap(mgr.Start(ctx), errStart)
}

// evidenceInterval is the --evidence-interval as the controllers take it:
// 0 there means the default, so publishing evidence at once is negative.
func evidenceInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// defaultGCPercent is the garbage collector's target when GOGC is not set:
// a collection starts once the heap has grown 75% past what the last one
// left, not Go's 100%. Most of the provider's heap is its members' Node
// and Peer caches, which live long, so the headroom above them is most of
// its RSS: at 20 members of 4,750 Peers each, one provider peaked at
// 300 MiB with 100 and at 257-276 MiB with 75, applying as fast
// (docs/performance.md). GOGC, when set, is obeyed.
const defaultGCPercent = 75

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx := kong.Parse(&CLI{}, kong.Name("provider"), kong.Description("provider-kilomesh: Kilo member clusters for Crossplane."))
	ctx.FatalIfErrorf(ctx.Run())
}
