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
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
)

// Credentials of one member cluster.
type Credentials struct {
	// Key identifies the cluster and identity the credentials reach, so that
	// every managed resource using them shares one watch. It is a digest,
	// never the credentials themselves.
	Key string

	// Config reaches the cluster.
	Config *rest.Config
}

// A Resolver resolves the provider-kubernetes config a managed resource
// names into credentials for its member cluster.
type Resolver struct {
	// Client reads configs and Secrets in the control plane.
	Client client.Client

	// InCluster loads the identity of the provider's own pod, for the
	// InjectedIdentity source.
	InCluster func() (*rest.Config, error)
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
// resource's config points to. Errors name the config and Secret but never
// contain what the Secret holds.
func (r *Resolver) Resolve(ctx context.Context, mg resource.ModernManaged) (*Credentials, error) {
	ref, err := RefOf(mg)
	if err != nil {
		return nil, err
	}
	pc := &unstructured.Unstructured{}
	pc.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: Version, Kind: ref.Kind})
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pc); err != nil {
		return nil, errors.Wrapf(err, errFmtGetConfig, ref)
	}
	spec, err := specOf(pc)
	if err != nil {
		return nil, errors.Errorf(errFmtMalformed, ref, err.Error())
	}
	if spec.Identity != nil {
		return nil, errors.Errorf(errFmtIdentity, ref)
	}
	switch spec.Credentials.Source {
	case xpv2.CredentialsSourceInjectedIdentity:
		rc, err := r.InCluster()
		if err != nil {
			return nil, errors.Wrap(err, errInClusterConfig)
		}
		return &Credentials{Key: InjectedIdentityKey, Config: tune(rc)}, nil
	case xpv2.CredentialsSourceSecret:
		return r.fromSecret(ctx, ref, spec.Credentials.SecretRef)
	default:
		return nil, errors.Errorf(errFmtSource, ref, spec.Credentials.Source)
	}
}

func (r *Resolver) fromSecret(ctx context.Context, ref ConfigRef, sr *xpv2.SecretKeySelector) (*Credentials, error) {
	if sr == nil || sr.Name == "" || sr.Key == "" {
		return nil, errors.Errorf(errFmtMalformed, ref, "spec.credentials.secretRef needs name, namespace and key for source Secret")
	}
	ns := sr.Namespace
	switch {
	case ref.Namespace != "" && ns == "":
		ns = ref.Namespace
	case ref.Namespace != "" && ns != ref.Namespace:
		// A namespaced config may only use Secrets of its own namespace:
		// otherwise anyone who may create a ProviderConfig in a namespace
		// could borrow every kubeconfig the provider can read.
		return nil, errors.Errorf(errFmtSecretNS, ref, ns, ref.Namespace)
	case ns == "":
		return nil, errors.Errorf(errFmtMalformed, ref, "spec.credentials.secretRef.namespace is required")
	}
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: sr.Name}, s); err != nil {
		return nil, errors.Wrapf(err, errFmtGetSecret, ns, sr.Name, ref)
	}
	data, ok := s.Data[sr.Key]
	if !ok || len(data) == 0 {
		return nil, errors.Errorf(errFmtSecretKey, ns, sr.Name, ref, sr.Key)
	}
	// The parser's own errors may quote the document, so they are dropped.
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.Errorf(errFmtParse, ns, sr.Name, sr.Key, ref)
	}
	if err := checkKubeconfig(kc); err != nil {
		return nil, errors.Errorf(errFmtKubeconfig, ns, sr.Name, sr.Key, ref, err.Error())
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.Errorf(errFmtRESTConfig, ns, sr.Name, sr.Key, ref)
	}
	sum := sha256.Sum256(data)
	return &Credentials{Key: "kubeconfig-" + hex.EncodeToString(sum[:]), Config: tune(rc)}, nil
}

// checkKubeconfig accepts a kubeconfig whose current context reaches a
// server with inline credentials only. File references and plugins are
// refused: a kubeconfig is user input, and a file path would let its author
// send the provider's own files (its service account token) to a server of
// their choosing, while a plugin would run a program of their choosing.
func checkKubeconfig(kc *clientcmdapi.Config) error {
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
