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

package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kilomesh/kilomesh/dns/clusterset"
)

// syncTimeout bounds how long CoreDNS waits at start for the watches, as
// the kubernetes plugin's startup_timeout does.
const syncTimeout = 5 * time.Second

// maxNamespaces bounds the namespaces one block watches, each with its
// own pair of watches.
const maxNamespaces = 100

var log = clog.NewWithPlugin(clusterset.Name)

func init() { plugin.Register(clusterset.Name, setup) }

// config is a clusterset block of a Corefile:
//
//	clusterset [ZONE] {
//	    kubeconfig PATH [CONTEXT]
//	    namespaces NAMESPACE...
//	    ttl SECONDS
//	}
//
// ZONE is clusterset.local unless given; without kubeconfig the plugin
// reads the API server of the cluster it runs in.
type config struct {
	zone, kubeconfig, context string
	namespaces                []string
	ttl                       uint32
}

func parse(c *caddy.Controller) (config, error) {
	cfg := config{zone: clusterset.DefaultZone, ttl: clusterset.DefaultTTL}
	c.Next() // the directive
	switch args := c.RemainingArgs(); len(args) {
	case 0:
	case 1:
		cfg.zone = strings.ToLower(dns.Fqdn(args[0]))
	default:
		return cfg, c.ArgErr()
	}
	for c.NextBlock() {
		property := c.Val()
		args := c.RemainingArgs()
		switch property {
		case "kubeconfig":
			if len(args) < 1 || len(args) > 2 {
				return cfg, c.ArgErr()
			}
			cfg.kubeconfig = args[0]
			if len(args) == 2 {
				cfg.context = args[1]
			}
		case "namespaces":
			if len(args) == 0 || len(args) > maxNamespaces {
				return cfg, c.Errf("namespaces takes 1 to %d namespaces, not %d", maxNamespaces, len(args))
			}
			for _, ns := range args {
				if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
					return cfg, c.Errf("namespaces: %q is no namespace: %s", ns, strings.Join(errs, "; "))
				}
			}
			cfg.namespaces = args
		case "ttl":
			n, err := strconv.ParseUint(strings.Join(args, " "), 10, 32)
			if err != nil || n > 3600 {
				return cfg, c.Errf("ttl must be a number of seconds from 0 to 3600, not %q", strings.Join(args, " "))
			}
			cfg.ttl = uint32(n)
		default:
			return cfg, c.Errf("unknown property %q", property)
		}
	}
	if c.Next() {
		return cfg, errors.New("clusterset may appear once per server block")
	}
	return cfg, nil
}

func (cfg config) rest() (*rest.Config, error) {
	if cfg.kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cfg.context},
	).ClientConfig()
}

func setup(c *caddy.Controller) error {
	cfg, err := parse(c)
	if err != nil {
		return plugin.Error(clusterset.Name, err)
	}
	rc, err := cfg.rest()
	if err != nil {
		return plugin.Error(clusterset.Name, err)
	}
	rc.UserAgent = "coredns/" + clusterset.Name
	idx := clusterset.NewIndex()
	ctx, cancel := context.WithCancel(context.Background())
	c.OnStartup(func() error {
		if err := clusterset.Watch(ctx, rc, cfg.namespaces, idx); err != nil {
			return plugin.Error(clusterset.Name, err)
		}
		deadline := time.Now().Add(syncTimeout)
		for !idx.Synced() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !idx.Synced() {
			log.Warningf("ServiceImports and EndpointSlices not synced after %s; answering what is known", syncTimeout)
		}
		return nil
	})
	c.OnShutdown(func() error {
		cancel()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		return &clusterset.Handler{Zone: clusterset.Zone{Index: idx, Origin: cfg.zone, TTL: cfg.ttl}, Next: next}
	})
	return nil
}
