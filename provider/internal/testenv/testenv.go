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

// Package testenv starts real kube-apiservers for the provider's tests: a
// control plane with the provider's and provider-kubernetes' CRDs, and member
// clusters reached through a least-privilege kubeconfig built from a
// ServiceAccount token, over a TCP proxy that a test can cut.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/provider/internal/clients"
)

// AssetsVar names the folder of the etcd and kube-apiserver binaries.
const AssetsVar = "KUBEBUILDER_ASSETS"

// SkipMessage explains how to run the tests that need real API servers.
const SkipMessage = AssetsVar + " is not set: build the API servers with `test/tools/build.sh etcd kube` and run with " + AssetsVar + "=$PWD/.cache/bin (make unit does both)"

// The provider-kubernetes module whose CRDs the control plane serves.
const providerKubernetes = "github.com/crossplane-contrib/provider-kubernetes@v1.3.1"

// MemberRBAC is the manifest applied to every member cluster, relative to
// the top of the repository. It is the one the documentation ships.
const MemberRBAC = "examples/member-rbac.yaml"

// Enabled reports whether API servers can be started.
func Enabled() bool { return os.Getenv(AssetsVar) != "" }

// Top returns the top folder of the repository.
func Top() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); //nolint:gosec // G304: the go.mod files above the working folder.
		err == nil && bytes.Contains(b, []byte("module github.com/kilomesh/kilomesh\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the top of the kilomesh repository")
		}
		dir = parent
	}
}

// ProviderKubernetesCRDs returns the files of the provider-kubernetes CRDs
// that provider-kilomesh reads: namespaced and cluster configs, and usages.
func ProviderKubernetesCRDs() ([]string, error) {
	out, err := exec.CommandContext(context.Background(), "go", "mod", "download", "-json", providerKubernetes).Output()
	if err != nil {
		return nil, errors.Wrap(err, "cannot download "+providerKubernetes)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, errors.Wrap(err, "cannot read go mod download output")
	}
	var files []string
	for _, n := range []string{"providerconfigs", "clusterproviderconfigs", "providerconfigusages"} {
		files = append(files, filepath.Join(m.Dir, "package", "crds", "kubernetes.m.crossplane.io_"+n+".yaml"))
	}
	return files, nil
}

// ControlPlane starts the control plane: an API server serving the
// provider's CRDs and provider-kubernetes' configs and usages.
func ControlPlane() (*envtest.Environment, *rest.Config, error) {
	top, err := Top()
	if err != nil {
		return nil, nil, err
	}
	pk, err := ProviderKubernetesCRDs()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(top, "package", "provider", "crds")}, pk...),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, errors.Wrap(err, "cannot start the control plane")
	}
	return env, cfg, nil
}

// StartControlPlane starts ControlPlane for one test, stopped when the
// test ends, and returns it with an admin client of scheme s.
func StartControlPlane(t testing.TB, s *runtime.Scheme) (*envtest.Environment, client.WithWatch) {
	t.Helper()
	env, cfg, err := ControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}

// A Member is a member cluster.
type Member struct {
	// Admin reaches the cluster as a cluster administrator.
	Admin client.Client
	// AdminConfig is Admin's configuration.
	AdminConfig *rest.Config
	// Kubeconfig reaches the cluster through Proxy as the least-privilege
	// ServiceAccount of MemberRBAC.
	Kubeconfig []byte
	// Token is the ServiceAccount token inside Kubeconfig.
	Token string
	// Proxy stands between Kubeconfig and the API server.
	Proxy *Proxy
}

// MemberOptions shape a member cluster.
type MemberOptions struct {
	// NoPeerCRD starts the cluster without Kilo's Peer CRD.
	NoPeerCRD bool
	// Services adds the CRDs of the Multi-Cluster Services API.
	Services bool
	// ServiceCIDR is the range of ClusterIPs; envtest's default,
	// 10.0.0.0/24, holds 254 Services.
	ServiceCIDR string
}

// StartMember starts a member cluster that lives until the test ends.
func StartMember(t testing.TB, o MemberOptions) *Member {
	t.Helper()
	top, err := Top()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := &envtest.Environment{ErrorIfCRDPathMissing: true}
	if !o.NoPeerCRD {
		env.CRDDirectoryPaths = []string{filepath.Join(top, "test", "crds", "kilo.squat.ai_peers.yaml")}
	}
	if o.Services {
		files, err := MCSCRDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, files...)
	}
	if o.ServiceCIDR != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", o.ServiceCIDR)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("cannot start a member cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("cannot stop a member cluster: %v", err)
		}
	})
	s, err := schemeWithKilo()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyFile(ctx, admin, filepath.Join(top, MemberRBAC)); err != nil {
		t.Fatal(err)
	}
	token, err := ServiceAccountToken(ctx, cfg, "kube-system", "kilomesh")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(context.Background(), u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	kc, err := Kubeconfig("https://"+p.Addr(), cfg.CAData, token)
	if err != nil {
		t.Fatal(err)
	}
	return &Member{Admin: admin, AdminConfig: cfg, Kubeconfig: kc, Token: token, Proxy: p}
}

// Kubeconfig returns a kubeconfig that reaches server with a bearer token.
func Kubeconfig(server string, ca []byte, token string) ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["member"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	c.AuthInfos["kilomesh"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "kilomesh"}
	c.CurrentContext = "member"
	return clientcmd.Write(*c)
}

// ServiceAccountToken returns a token of an hour for a ServiceAccount.
func ServiceAccountToken(ctx context.Context, cfg *rest.Config, ns, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1CreateOptions)
	if err != nil {
		return "", errors.Wrap(err, "cannot create a ServiceAccount token")
	}
	return tr.Status.Token, nil
}

// ProviderConfig stores a kubeconfig in the Secret ns/name (key
// "kubeconfig") and creates the namespaced provider-kubernetes
// ProviderConfig ns/name that uses it.
func ProviderConfig(ctx context.Context, c client.Client, ns, name string, kubeconfig []byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	if err := c.Create(ctx, s); err != nil {
		return errors.Wrapf(err, "cannot create Secret %s/%s", ns, name)
	}
	pc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
		"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": name, "key": "kubeconfig"},
	}}}}
	pc.SetAPIVersion(clients.Group + "/" + clients.Version)
	pc.SetKind(clients.KindProviderConfig)
	pc.SetNamespace(ns)
	pc.SetName(name)
	return errors.Wrapf(c.Create(ctx, pc), "cannot create ProviderConfig %s/%s", ns, name)
}

// ApplyFile creates every object of a multi-document YAML file.
func ApplyFile(ctx context.Context, c client.Client, path string) error {
	objs, err := ReadObjects(path)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.Create(ctx, u); err != nil {
			return errors.Wrapf(err, "cannot create %s %s", u.GetKind(), u.GetName())
		}
	}
	return nil
}

// ReadObjects reads every object of a multi-document YAML file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path) //nolint:gosec // A file of the repository.
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
