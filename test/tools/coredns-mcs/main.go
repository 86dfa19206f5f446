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

// Command coredns-mcs is CoreDNS with every plugin of its own and the
// clusterset plugin, which answers clusterset.local by the Multi-Cluster
// Services API from ServiceImports and EndpointSlices.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // CoreDNS's own plugins, as its zplugin.go lists them.
	"github.com/coredns/coredns/coremain"

	"github.com/kilomesh/kilomesh/dns/clusterset"
)

// The directive goes where plugin.cfg would put it: before kubernetes, so
// that it answers the PTR records of headless endpoints and passes every
// other reverse name on to kubernetes.
func init() {
	at := slices.Index(dnsserver.Directives, "kubernetes")
	if at < 0 {
		at = len(dnsserver.Directives)
	}
	dnsserver.Directives = slices.Insert(dnsserver.Directives, at, clusterset.Name)
}

func main() {
	coremain.Run()
}
