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

// Package clients turns the provider-kubernetes ProviderConfig or
// ClusterProviderConfig named by a managed resource into a REST config for
// the member cluster it points to.
//
// provider-kilomesh reads the same config objects as provider-kubernetes, so
// a platform team keeps one credential per member cluster. The objects are
// read as unstructured: provider-kubernetes is not a dependency.
package clients

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// The provider-kubernetes API that holds the shared credentials.
const (
	Group                     = "kubernetes.m.crossplane.io"
	Version                   = "v1alpha1"
	KindProviderConfig        = "ProviderConfig"
	KindClusterProviderConfig = "ClusterProviderConfig"
	KindProviderConfigUsage   = "ProviderConfigUsage"

	// KindSecret is the kind of a Secret that holds a kubeconfig.
	KindSecret = "Secret"
)

// InjectedIdentityKey is the cluster key of the provider's own cluster,
// reached with the identity of the provider's pod.
const InjectedIdentityKey = "injected-identity"

// Member clusters get a generous client-side rate limit: a PeerSet applies
// thousands of Peers in one reconcile, and the default of 5 requests per
// second would stretch that to minutes.
const (
	memberQPS   = 300
	memberBurst = 600
	userAgent   = "provider-kilomesh"
)

// The messages name Secrets and keys, never what they hold.
//
//nolint:gosec // G101: no credentials here, only words like "Secret".
const (
	errNoRef            = "spec.providerConfigRef is not set"
	errFmtKind          = "spec.providerConfigRef.kind %q is neither ProviderConfig nor ClusterProviderConfig"
	errFmtGetConfig     = "cannot get %s"
	errFmtMalformed     = "%s is malformed: %s"
	errFmtSource        = "%s: credentials source %q is not supported by provider-kilomesh (use Secret or InjectedIdentity)"
	errFmtIdentity      = "%s: spec.identity is not supported by provider-kilomesh"
	errFmtSecretNS      = "%s: spec.credentials.secretRef.namespace %q must be the ProviderConfig's own namespace %q"
	errFmtGetSecret     = "cannot get Secret %s/%s named by %s"
	errFmtSecretKey     = "Secret %s/%s named by %s has no key %q"
	errFmtParse         = "Secret %s/%s key %q named by %s does not hold a valid kubeconfig"
	errFmtKubeconfig    = "kubeconfig in Secret %s/%s key %q named by %s: %s"
	errFmtRESTConfig    = "kubeconfig in Secret %s/%s key %q named by %s cannot be turned into a client configuration"
	errInClusterConfig  = "cannot load the in-cluster identity of provider-kilomesh"
	errFmtFileReference = "%s %q refers to the file %s; only inline data is accepted"
	errFmtPlugin        = "%s %q uses %s; only tokens and client certificates are accepted"
	errFmtRefused       = "the cluster does not accept the credentials of %s (revoked or expired?)"
	errFmtNamespacedID  = "%s: credentials source InjectedIdentity is refused: the identity of provider-kilomesh is an administrator's grant, which only a ClusterProviderConfig may carry"
	errFmtTransport     = "cluster %q %s, which provider-kilomesh refuses unless it is started with --allow-kubeconfig=%s"
	errFmtUntrusted     = "cannot verify the cluster's serving certificate with the certificate-authority-data and server of %s"
)

// Credentials of one member cluster.
type Credentials struct {
	// Key identifies the cluster and identity the credentials reach, so that
	// every managed resource using them shares one watch. It is a digest,
	// never the credentials themselves.
	Key string

	// Config reaches the cluster.
	Config *rest.Config

	// Origin names where the credentials come from, for messages, e.g.
	// `Secret team/a key "kubeconfig" named by ProviderConfig "team/a"`.
	Origin string
}

// A Source is an object of the control plane that credentials are read
// from: a provider-kubernetes config, or the Secret it names. A change to a
// source may change the credentials.
type Source struct {
	// Kind is ProviderConfig, ClusterProviderConfig or Secret.
	Kind      string
	Namespace string
	Name      string
}

// Resource returns the API resource of the source's kind.
func (s Source) Resource() schema.GroupVersionResource {
	switch s.Kind {
	case KindProviderConfig:
		return schema.GroupVersionResource{Group: Group, Version: Version, Resource: "providerconfigs"}
	case KindClusterProviderConfig:
		return schema.GroupVersionResource{Group: Group, Version: Version, Resource: "clusterproviderconfigs"}
	default:
		return corev1.SchemeGroupVersion.WithResource("secrets")
	}
}

// Explain adds to an error of a member cluster which credentials the
// cluster refused, when it refused them: a token it does not accept, or a
// serving certificate the kubeconfig's CA does not verify. Other errors are
// returned as they are. Neither the token nor the CA is quoted.
func Explain(err error, origin string) error {
	if err == nil || origin == "" {
		return err
	}
	switch {
	case kerrors.IsUnauthorized(err):
		return errors.Wrapf(err, errFmtRefused, origin)
	case untrusted(err):
		return errors.Wrapf(err, errFmtUntrusted, origin)
	}
	return err
}

// Refused reports whether a member cluster refused the credentials: it
// does not accept them, does not allow what they were used for, or cannot
// be trusted with them. Trying again does not help; changing them does.
func Refused(err error) bool {
	return kerrors.IsUnauthorized(err) || kerrors.IsForbidden(err) || untrusted(err)
}

func untrusted(err error) bool {
	var (
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		verify    *tls.CertificateVerificationError
	)
	return errors.As(err, &authority) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}

// Kubeconfig settings that weaken the transport to a member cluster. Each
// is refused unless an administrator allows it.
const (
	// AllowInsecureSkipTLSVerify allows insecure-skip-tls-verify: the
	// member's serving certificate is not verified, so whoever sits on the
	// path reads the credentials.
	AllowInsecureSkipTLSVerify = "insecure-skip-tls-verify"
	// AllowProxyURL allows proxy-url: the kubeconfig's author chooses a
	// proxy that every request, credentials included, passes through.
	AllowProxyURL = "proxy-url"
	// AllowPlainHTTP allows an http:// server: credentials in the clear.
	AllowPlainHTTP = "http"
)

// Allowances are the kubeconfig settings an administrator allows, among
// AllowInsecureSkipTLSVerify, AllowProxyURL and AllowPlainHTTP.
type Allowances map[string]bool

// A Resolver resolves the provider-kubernetes config a managed resource
// names into credentials for its member cluster.
type Resolver struct {
	// Client reads configs and Secrets in the control plane.
	Client client.Client

	// InCluster loads the identity of the provider's own pod, for the
	// InjectedIdentity source.
	InCluster func() (*rest.Config, error)

	// Allow lists the transport settings of a kubeconfig that are
	// accepted; every other one is refused.
	Allow Allowances
}

// NewResolver returns a Resolver that reads through the supplied client.
func NewResolver(c client.Client) *Resolver {
	return &Resolver{Client: c, InCluster: rest.InClusterConfig}
}

// A ConfigRef is a resolved reference to a provider-kubernetes config.
type ConfigRef struct {
	Kind      string
	Namespace string
	Name      string
}

// String names the config for messages, e.g. `ProviderConfig "ns/name"`.
func (r ConfigRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %q", r.Kind, r.Name)
	}
	return fmt.Sprintf("%s %q", r.Kind, r.Namespace+"/"+r.Name)
}

// RefOf returns the config a managed resource names. A namespaced
// ProviderConfig is looked up in the managed resource's namespace.
func RefOf(mg resource.ModernManaged) (ConfigRef, error) {
	ref := mg.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return ConfigRef{}, errors.New(errNoRef)
	}
	switch ref.Kind {
	case KindProviderConfig:
		return ConfigRef{Kind: ref.Kind, Namespace: mg.GetNamespace(), Name: ref.Name}, nil
	case KindClusterProviderConfig:
		return ConfigRef{Kind: ref.Kind, Name: ref.Name}, nil
	default:
		return ConfigRef{}, errors.Errorf(errFmtKind, ref.Kind)
	}
}

// Resolve returns the credentials of the member cluster the managed
// resource's config points to, and the objects it read them from (the
// config, and the Secret it names). The sources are returned with an error
// too, as far as they are known, so that their repair can be watched.
// Errors name the config and Secret but never contain what the Secret holds.
func (r *Resolver) Resolve(ctx context.Context, mg resource.ModernManaged) (*Credentials, []Source, error) {
	ref, err := RefOf(mg)
	if err != nil {
		return nil, nil, err
	}
	sources := []Source{{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}}
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: Version, Kind: ref.Kind})
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pc); err != nil {
		return nil, sources, errors.Wrapf(err, errFmtGetConfig, ref)
	}
	spec, err := specOf(pc)
	if err != nil {
		return nil, sources, errors.Errorf(errFmtMalformed, ref, err.Error())
	}
	if spec.Identity != nil {
		return nil, sources, errors.Errorf(errFmtIdentity, ref)
	}
	switch spec.Credentials.Source {
	case xpv2.CredentialsSourceInjectedIdentity:
		if ref.Kind != KindClusterProviderConfig {
			// Whoever may create a ProviderConfig in a namespace would
			// otherwise act as the provider itself.
			return nil, sources, errors.Errorf(errFmtNamespacedID, ref)
		}
		rc, err := r.InCluster()
		if err != nil {
			return nil, sources, errors.Wrap(err, errInClusterConfig)
		}
		return &Credentials{Key: InjectedIdentityKey, Config: tune(rc), Origin: "the identity of provider-kilomesh named by " + ref.String()}, sources, nil
	case xpv2.CredentialsSourceSecret:
		sk, err := secretOf(ref, spec.Credentials.SecretRef)
		if err != nil {
			return nil, sources, err
		}
		sources = append(sources, Source{Kind: KindSecret, Namespace: sk.Namespace, Name: sk.Name})
		creds, err := r.fromSecret(ctx, ref, sk)
		return creds, sources, err
	default:
		return nil, sources, errors.Errorf(errFmtSource, ref, spec.Credentials.Source)
	}
}

// secretOf returns the Secret key a config names. A namespaced config may
// only use Secrets of its own namespace: otherwise anyone who may create a
// ProviderConfig in a namespace could borrow every kubeconfig the provider
// can read.
func secretOf(ref ConfigRef, sr *xpv2.SecretKeySelector) (xpv2.SecretKeySelector, error) {
	if sr == nil || sr.Name == "" || sr.Key == "" {
		return xpv2.SecretKeySelector{}, errors.Errorf(errFmtMalformed, ref, "spec.credentials.secretRef needs name, namespace and key for source Secret")
	}
	sk := *sr
	switch {
	case ref.Namespace != "" && sk.Namespace == "":
		sk.Namespace = ref.Namespace
	case ref.Namespace != "" && sk.Namespace != ref.Namespace:
		return xpv2.SecretKeySelector{}, errors.Errorf(errFmtSecretNS, ref, sk.Namespace, ref.Namespace)
	case sk.Namespace == "":
		return xpv2.SecretKeySelector{}, errors.Errorf(errFmtMalformed, ref, "spec.credentials.secretRef.namespace is required")
	}
	return sk, nil
}

func (r *Resolver) fromSecret(ctx context.Context, ref ConfigRef, sk xpv2.SecretKeySelector) (*Credentials, error) {
	ns, name, key := sk.Namespace, sk.Name, sk.Key
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return nil, errors.Wrapf(err, errFmtGetSecret, ns, name, ref)
	}
	data, ok := s.Data[key]
	if !ok || len(data) == 0 {
		return nil, errors.Errorf(errFmtSecretKey, ns, name, ref, key)
	}
	// The parser's own errors may quote the document, so they are dropped.
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.Errorf(errFmtParse, ns, name, key, ref)
	}
	if err := checkKubeconfig(kc, r.Allow); err != nil {
		return nil, errors.Errorf(errFmtKubeconfig, ns, name, key, ref, err.Error())
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.Errorf(errFmtRESTConfig, ns, name, key, ref)
	}
	sum := sha256.Sum256(data)
	return &Credentials{
		Key:    "kubeconfig-" + hex.EncodeToString(sum[:]),
		Config: tune(rc),
		Origin: fmt.Sprintf("Secret %s/%s key %q named by %s", ns, name, key, ref),
	}, nil
}

// checkKubeconfig accepts a kubeconfig whose current context reaches a
// server with inline credentials only, over a transport that keeps them
// secret. File references and plugins are refused: a kubeconfig is user
// input, and a file path would let its author send the provider's own files
// (its service account token) to a server of their choosing, while a plugin
// would run a program of their choosing. Unverified TLS, a proxy and plain
// HTTP are refused unless allowed. Messages never quote a URL.
func checkKubeconfig(kc *clientcmdapi.Config, allow Allowances) error {
	if kc.CurrentContext == "" {
		return errors.New("current-context is not set")
	}
	c, ok := kc.Contexts[kc.CurrentContext]
	if !ok || c == nil {
		return errors.Errorf("current-context %q is not among its contexts", kc.CurrentContext)
	}
	cl, ok := kc.Clusters[c.Cluster]
	if !ok || cl == nil || cl.Server == "" {
		return errors.Errorf("context %q names no cluster with a server", kc.CurrentContext)
	}
	if cl.CertificateAuthority != "" {
		return errors.Errorf(errFmtFileReference, "cluster", c.Cluster, "certificate-authority")
	}
	if err := checkTransport(c.Cluster, cl, allow); err != nil {
		return err
	}
	u, ok := kc.AuthInfos[c.AuthInfo]
	if !ok || u == nil {
		return nil
	}
	switch {
	case u.TokenFile != "":
		return errors.Errorf(errFmtFileReference, "user", c.AuthInfo, "tokenFile")
	case u.ClientCertificate != "":
		return errors.Errorf(errFmtFileReference, "user", c.AuthInfo, "client-certificate")
	case u.ClientKey != "":
		return errors.Errorf(errFmtFileReference, "user", c.AuthInfo, "client-key")
	case u.Exec != nil:
		return errors.Errorf(errFmtPlugin, "user", c.AuthInfo, "an exec plugin")
	case u.AuthProvider != nil:
		return errors.Errorf(errFmtPlugin, "user", c.AuthInfo, "an auth provider")
	}
	return nil
}

// checkTransport refuses the settings of a kubeconfig's cluster that
// expose the credentials, unless allowed.
func checkTransport(name string, cl *clientcmdapi.Cluster, allow Allowances) error {
	switch {
	case cl.InsecureSkipTLSVerify && !allow[AllowInsecureSkipTLSVerify]:
		return errors.Errorf(errFmtTransport, name, "sets insecure-skip-tls-verify", AllowInsecureSkipTLSVerify)
	case cl.ProxyURL != "" && !allow[AllowProxyURL]:
		return errors.Errorf(errFmtTransport, name, "sets a proxy-url", AllowProxyURL)
	case !strings.HasPrefix(strings.ToLower(cl.Server), "https://") && !allow[AllowPlainHTTP]:
		return errors.Errorf(errFmtTransport, name, "has a server that is not https://", AllowPlainHTTP)
	}
	return nil
}

func tune(rc *rest.Config) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.QPS = memberQPS
	rc.Burst = memberBurst
	rc.UserAgent = userAgent
	return rc
}

// configSpec holds the fields of provider-kubernetes' ProviderConfigSpec
// that provider-kilomesh reads.
type configSpec struct {
	Credentials struct {
		Source    xpv2.CredentialsSource  `json:"source"`
		SecretRef *xpv2.SecretKeySelector `json:"secretRef,omitempty"`
	} `json:"credentials"`
	Identity *struct{} `json:"identity,omitempty"`
}

func specOf(pc *unstructured.Unstructured) (*configSpec, error) {
	raw, ok := pc.Object["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec is missing")
	}
	spec := &configSpec{}
	if err := fromUnstructured(raw, spec); err != nil {
		return nil, err
	}
	if spec.Credentials.Source == "" {
		return nil, errors.New("spec.credentials.source is not set")
	}
	return spec, nil
}
