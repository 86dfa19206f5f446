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
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

func TestCheckKubeconfig(t *testing.T) {
	config := func(mod func(c *clientcmdapi.Config)) *clientcmdapi.Config {
		c := clientcmdapi.NewConfig()
		c.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
		c.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
		c.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		c.CurrentContext = "x"
		if mod != nil {
			mod(c)
		}
		return c
	}
	cases := map[string]struct {
		reason string
		kc     *clientcmdapi.Config
		want   error
	}{
		"Inline": {
			reason: "Inline CA data and a token are accepted.",
			kc:     config(nil),
		},
		"NoCurrentContext": {
			reason: "A kubeconfig must say which context to use.",
			kc:     config(func(c *clientcmdapi.Config) { c.CurrentContext = "" }),
			want:   errors.New("current-context is not set"),
		},
		"UnknownContext": {
			reason: "The current context must exist.",
			kc:     config(func(c *clientcmdapi.Config) { c.CurrentContext = "y" }),
			want:   errors.New(`current-context "y" is not among its contexts`),
		},
		"NoServer": {
			reason: "The context's cluster must have a server.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].Server = "" }),
			want:   errors.New(`context "x" names no cluster with a server`),
		},
		"CAFile": {
			reason: "Files of the provider's pod are not readable through a kubeconfig.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].CertificateAuthority = "/etc/ca.crt" }),
			want:   errors.New(`cluster "c" refers to the file certificate-authority; only inline data is accepted`),
		},
		"TokenFile": {
			reason: "A token file could be the provider's own token.",
			kc:     config(func(c *clientcmdapi.Config) { c.AuthInfos["u"].TokenFile = "/var/run/secrets/token" }),
			want:   errors.New(`user "u" refers to the file tokenFile; only inline data is accepted`),
		},
		"ClientKeyFile": {
			reason: "Client certificate files are refused.",
			kc:     config(func(c *clientcmdapi.Config) { c.AuthInfos["u"].ClientKey = "/k" }),
			want:   errors.New(`user "u" refers to the file client-key; only inline data is accepted`),
		},
		"Exec": {
			reason: "A kubeconfig may not run a program in the provider's pod.",
			kc:     config(func(c *clientcmdapi.Config) { c.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "sh"} }),
			want:   errors.New(`user "u" uses an exec plugin; only tokens and client certificates are accepted`),
		},
		"NoUser": {
			reason: "A context without a user is allowed (anonymous).",
			kc:     config(func(c *clientcmdapi.Config) { c.Contexts["x"].AuthInfo = "nobody" }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := checkKubeconfig(tc.kc)
			if diff := cmp.Diff(tc.want, got, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\ncheckKubeconfig(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRefOf(t *testing.T) {
	inventory := func(r *xpv2.ProviderConfigReference) *v1alpha1.NodeInventory {
		ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}}
		ni.Spec.ProviderConfigReference = r
		return ni
	}
	type want struct {
		ref ConfigRef
		err error
	}
	cases := map[string]struct {
		reason string
		ni     *v1alpha1.NodeInventory
		want   want
	}{
		"Namespaced": {
			reason: "A ProviderConfig is looked up in the managed resource's namespace.",
			ni:     inventory(&xpv2.ProviderConfigReference{Kind: KindProviderConfig, Name: "a"}),
			want:   want{ref: ConfigRef{Kind: KindProviderConfig, Namespace: "team", Name: "a"}},
		},
		"Cluster": {
			reason: "A ClusterProviderConfig has no namespace.",
			ni:     inventory(&xpv2.ProviderConfigReference{Kind: KindClusterProviderConfig, Name: "a"}),
			want:   want{ref: ConfigRef{Kind: KindClusterProviderConfig, Name: "a"}},
		},
		"Missing": {
			reason: "A missing reference is an error.",
			ni:     inventory(nil),
			want:   want{err: errors.New(errNoRef)},
		},
		"OtherKind": {
			reason: "Other kinds are refused.",
			ni:     inventory(&xpv2.ProviderConfigReference{Kind: "Other", Name: "a"}),
			want:   want{err: errors.Errorf(errFmtKind, "Other")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := RefOf(tc.ni)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nRefOf(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ref, got); diff != "" {
				t.Errorf("\n%s\nRefOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
