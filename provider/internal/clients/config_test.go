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
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
		allow  Allowances
		want   error
	}{
		"Inline": {
			reason: "Inline CA data and a token are accepted.",
			kc:     config(nil),
		},
		"InsecureSkipTLSVerify": {
			reason: "A kubeconfig that does not verify the member's certificate would hand its credentials to whoever sits on the path: refused, naming the flag that allows it and no URL.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].InsecureSkipTLSVerify = true }),
			want:   errors.Errorf(errFmtTransport, "c", "sets insecure-skip-tls-verify", AllowInsecureSkipTLSVerify),
		},
		"InsecureSkipTLSVerifyAllowed": {
			reason: "An administrator may allow unverified TLS.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].InsecureSkipTLSVerify = true }),
			allow:  Allowances{AllowInsecureSkipTLSVerify: true},
		},
		"ProxyURL": {
			reason: "A proxy chosen by the kubeconfig's author would see every request: refused.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].ProxyURL = "http://proxy.example.com:3128" }),
			want:   errors.Errorf(errFmtTransport, "c", "sets a proxy-url", AllowProxyURL),
		},
		"ProxyURLAllowed": {
			reason: "An administrator may allow proxies; allowing one setting allows no other.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].ProxyURL = "http://proxy.example.com:3128" }),
			allow:  Allowances{AllowProxyURL: true},
		},
		"PlainHTTP": {
			reason: "A plain-HTTP server would carry the credentials in the clear: refused.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].Server = "http://127.0.0.1:8080" }),
			allow:  Allowances{AllowProxyURL: true, AllowInsecureSkipTLSVerify: true},
			want:   errors.Errorf(errFmtTransport, "c", "has a server that is not https://", AllowPlainHTTP),
		},
		"NoScheme": {
			reason: "A server without a scheme may be reached over plain HTTP: refused too.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].Server = "127.0.0.1:6443" }),
			want:   errors.Errorf(errFmtTransport, "c", "has a server that is not https://", AllowPlainHTTP),
		},
		"PlainHTTPAllowed": {
			reason: "An administrator may allow plain HTTP.",
			kc:     config(func(c *clientcmdapi.Config) { c.Clusters["c"].Server = "http://127.0.0.1:8080" }),
			allow:  Allowances{AllowPlainHTTP: true},
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
			got := checkKubeconfig(tc.kc, tc.allow)
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

func TestResolveSources(t *testing.T) {
	kubeconfig := []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: t0ken}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`)
	config := func(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion(Group + "/" + Version)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	fromSecret := func(ns, name string) map[string]any {
		return map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": name, "key": "kubeconfig"}}}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "kc"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	pc := Source{Kind: KindProviderConfig, Namespace: "team", Name: "pc"}
	inventory := func(kind string) *v1alpha1.NodeInventory {
		ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"}}
		ni.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: kind, Name: "pc"}
		return ni
	}
	refused := errors.New("the control plane is busy")

	type want struct {
		sources []Source
		origin  string
		err     bool
	}
	cases := map[string]struct {
		reason  string
		kind    string
		objects []client.Object
		get     func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
		want    want
	}{
		"Secret": {
			reason:  "Credentials from a Secret are read from the config and the Secret, and say so.",
			kind:    KindProviderConfig,
			objects: []client.Object{config(KindProviderConfig, "team", "pc", fromSecret("team", "kc")), secret},
			want: want{
				sources: []Source{pc, {Kind: KindSecret, Namespace: "team", Name: "kc"}},
				origin:  `Secret team/kc key "kubeconfig" named by ProviderConfig "team/pc"`,
			},
		},
		"ClusterConfig": {
			reason:  "A ClusterProviderConfig is a source without a namespace.",
			kind:    KindClusterProviderConfig,
			objects: []client.Object{config(KindClusterProviderConfig, "", "pc", fromSecret("team", "kc")), secret},
			want: want{
				sources: []Source{{Kind: KindClusterProviderConfig, Name: "pc"}, {Kind: KindSecret, Namespace: "team", Name: "kc"}},
				origin:  `Secret team/kc key "kubeconfig" named by ClusterProviderConfig "pc"`,
			},
		},
		"MissingSecret": {
			reason:  "A Secret that does not exist yet is a source, so that its creation is noticed.",
			kind:    KindProviderConfig,
			objects: []client.Object{config(KindProviderConfig, "team", "pc", fromSecret("team", "kc"))},
			want:    want{sources: []Source{pc, {Kind: KindSecret, Namespace: "team", Name: "kc"}}, err: true},
		},
		"MissingConfig": {
			reason: "A config that does not exist yet is a source.",
			kind:   KindProviderConfig,
			want:   want{sources: []Source{pc}, err: true},
		},
		"SecretOfAnotherNamespace": {
			reason:  "A Secret a namespaced config may not use is not a source: it is never read.",
			kind:    KindProviderConfig,
			objects: []client.Object{config(KindProviderConfig, "team", "pc", fromSecret("other", "kc"))},
			want:    want{sources: []Source{pc}, err: true},
		},
		"InjectedIdentity": {
			reason:  "The provider's own identity is read from a ClusterProviderConfig alone.",
			kind:    KindClusterProviderConfig,
			objects: []client.Object{config(KindClusterProviderConfig, "", "pc", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})},
			want:    want{sources: []Source{{Kind: KindClusterProviderConfig, Name: "pc"}}, origin: `the identity of provider-kilomesh named by ClusterProviderConfig "pc"`},
		},
		"NamespacedInjectedIdentity": {
			reason:  "A namespaced ProviderConfig may not grant the provider's own identity: whoever may create one in a namespace would act as the provider.",
			kind:    KindProviderConfig,
			objects: []client.Object{config(KindProviderConfig, "team", "pc", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})},
			want:    want{sources: []Source{pc}, err: true},
		},
		"ControlPlaneRefuses": {
			reason: "A control plane that fails to answer fails the resolution, and the config is still a source.",
			kind:   KindProviderConfig,
			get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
				return kerrors.NewServiceUnavailable(refused.Error())
			},
			want: want{sources: []Source{pc}, err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithObjects(tc.objects...)
			if tc.get != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: tc.get})
			}
			r := &Resolver{Client: b.Build(), InCluster: func() (*rest.Config, error) { return &rest.Config{Host: "https://10.0.0.1"}, nil }}
			creds, sources, err := r.Resolve(t.Context(), inventory(tc.kind))
			if diff := cmp.Diff(tc.want.sources, sources); diff != "" {
				t.Errorf("\n%s\nResolve(...): -want sources, +got sources:\n%s", tc.reason, diff)
			}
			if got := err != nil; got != tc.want.err {
				t.Errorf("\n%s\nResolve(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			if err == nil && creds.Origin != tc.want.origin {
				t.Errorf("\n%s\nResolve(...).Origin: want %q, got %q", tc.reason, tc.want.origin, creds.Origin)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	origin := `Secret team/kc key "kubeconfig" named by ProviderConfig "team/pc"`
	unauthorized := kerrors.NewUnauthorized("Unauthorized")
	unknownCA := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: errors.New("connection refused")}
	cases := map[string]struct {
		reason string
		err    error
		want   error
	}{
		"Unauthorized": {
			reason: "A refused token or certificate names the credentials.",
			err:    unauthorized,
			want:   errors.Wrapf(unauthorized, errFmtRefused, origin),
		},
		"UnknownAuthority": {
			reason: "A serving certificate the CA does not verify names the credentials.",
			err:    unknownCA,
			want:   errors.Wrapf(unknownCA, errFmtUntrusted, origin),
		},
		"Unreachable": {
			reason: "An unreachable cluster is not a matter of credentials.",
			err:    refused,
			want:   refused,
		},
		"Forbidden": {
			reason: "A forbidden request is explained by the API server itself, naming the identity.",
			err:    kerrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")),
			want:   kerrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")),
		},
		"Nil": {
			reason: "No error is no error.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Explain(tc.err, origin)
			if diff := cmp.Diff(tc.want, got, test.EquateErrors()); diff != "" {
				t.Errorf("\n%s\nExplain(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   bool
	}{
		"Unauthorized": {reason: "A token the cluster does not accept is refused.", err: kerrors.NewUnauthorized("Unauthorized"), want: true},
		"Forbidden": {
			reason: "An identity that may not do what is asked is refused.",
			err:    errors.Wrap(kerrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no")), "cannot list"),
			want:   true,
		},
		"UnknownAuthority": {
			reason: "A serving certificate the CA does not verify is refused.",
			err:    &url.Error{Op: "Get", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}},
			want:   true,
		},
		"ConnectionRefused": {reason: "An unreachable cluster may answer later.", err: &url.Error{Op: "Get", URL: "https://x", Err: errors.New("connection refused")}},
		"TooManyRequests":   {reason: "A busy cluster may answer later.", err: kerrors.NewTooManyRequests("busy", 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Refused(tc.err); got != tc.want {
				t.Errorf("\n%s\nRefused(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}
