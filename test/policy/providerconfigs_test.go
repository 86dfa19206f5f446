package policy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

const tenantPolicyFile = "../../examples/policy/providerconfigs.yaml"

// What provider-kubernetes would take from a kubeconfig that a tenant must
// not be given.
const (
	tokenFile    = "tokenFile"
	execPlugin   = "exec"
	authProvider = "auth-provider"
	insecure     = "insecure-skip-tls-verify"
	proxyURL     = "proxy-url"
	plainHTTP    = "http"
)

// honoured lists what provider-kubernetes v1.3.1 would take from kc that a
// tenant must not be given. It reads kc as provider-kubernetes does: with
// client-go's loader, then the cluster and user of the current context,
// whose fields it copies into a REST config (fromAPIConfig in its
// pkg/kube/client).
func honoured(kc []byte) ([]string, error) {
	c, err := clientcmd.Load(kc)
	if err != nil {
		return nil, err
	}
	cur := c.Contexts[c.CurrentContext]
	if cur == nil || c.Clusters[cur.Cluster] == nil {
		return nil, fmt.Errorf("no cluster for the current context %q", c.CurrentContext)
	}
	cl := c.Clusters[cur.Cluster]
	u := c.AuthInfos[cur.AuthInfo]
	if u == nil {
		u = &clientcmdapi.AuthInfo{}
	}
	var got []string
	for name, set := range map[string]bool{
		tokenFile:    u.TokenFile != "",
		execPlugin:   u.Exec != nil,
		authProvider: u.AuthProvider != nil,
		insecure:     cl.InsecureSkipTLSVerify,
		proxyURL:     cl.ProxyURL != "",
	} {
		if set {
			got = append(got, name)
		}
	}
	// client-go picks the scheme of a server without one: https only with a
	// CA, a client certificate or insecure-skip-tls-verify.
	rc := &rest.Config{Host: cl.Server, TLSClientConfig: rest.TLSClientConfig{
		Insecure: cl.InsecureSkipTLSVerify, CAData: cl.CertificateAuthorityData, CertData: u.ClientCertificateData, KeyData: u.ClientKeyData,
	}}
	if s, _, err := rest.DefaultServerUrlFor(rc); err != nil || s.Scheme != "https" {
		got = append(got, plainHTTP)
	}
	return got, nil
}

// kubeconfig is a kubeconfig of one cluster and one user, whose fields are
// the given YAML lines, indented under cluster: and user:.
func kubeconfig(cluster, user string) []byte {
	indent := func(s string) string {
		return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
	}
	return []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: member\n  cluster:\n" + indent(cluster) +
		"contexts:\n- name: member\n  context: {cluster: member, user: tenant}\ncurrent-context: member\n" +
		"users:\n- name: tenant\n  user:\n" + indent(user))
}

// The fields of a kubeconfig a tenant may use.
var (
	caData = "certificate-authority-data: " + base64.StdEncoding.EncodeToString([]byte("a CA certificate"))
	server = "server: https://member.example.com:6443\n" + caData
	token  = "token: eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl"
)

// padded is kc with a comment that makes it n bytes long.
func padded(kc []byte, n int) []byte {
	return append(kc, []byte("#"+strings.Repeat("a", n-len(kc)-2)+"\n")...)
}

func utf16LE(b []byte) []byte {
	out := []byte{0xff, 0xfe}
	for _, r := range utf16.Encode([]rune(string(b))) {
		out = append(out, byte(r), byte(r>>8))
	}
	return out
}

func secret(ns, name string, data map[string][]byte) *unstructured.Unstructured {
	d := map[string]any{}
	for k, v := range data {
		d[k] = base64.StdEncoding.EncodeToString(v)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     d,
	}}
}

func providerConfig(ns, name string, credentials map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"credentials": credentials},
	}}
}

func fromSecret(ns, name, key string) map[string]any {
	return map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": name, "key": key}}
}

func TestTenantProviderConfigPolicy(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: build the API servers with `test/tools/build.sh etcd kube` (make unit does)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{providerKubernetesCRD(t, "kubernetes.m.crossplane.io_providerconfigs.yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"crossplane-system", "tenant"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	apply(ctx, t, c, tenantPolicyFile)

	// The API server loads each policy in the background: wait until both
	// refuse what they must, before the cases. Each probe breaks every rule
	// of its policy, so that the wait ends whichever rule is left.
	probes := []func(i int) client.Object{
		func(i int) client.Object {
			pc := providerConfig("tenant", fmt.Sprintf("probe-%d", i), fromSecret("crossplane-system", "admin", "config"))
			pc.Object["spec"].(map[string]any)["identity"] = map[string]any{"type": "UpboundTokens", "source": "Filesystem", "fs": map[string]any{"path": "/x"}}
			return pc
		},
		func(i int) client.Object {
			kc := padded(kubeconfig("server: http://x\ninsecure-skip-tls-verify: true\nproxy-url: http://p", "tokenFile: /x\nexec: {command: sh}\nauth-provider: {name: oidc}\n\"a\\x41\": !!str a"), 20<<10)
			return secret("tenant", fmt.Sprintf("probe-%d", i), map[string][]byte{"kubeconfig": kc})
		},
		func(i int) client.Object {
			return secret("tenant", fmt.Sprintf("probe-utf16-%d", i), map[string][]byte{"kubeconfig": utf16LE(kubeconfig(server, token))})
		},
	}
	const want = "in a tenant namespace"
	for _, probe := range probes {
		i := 0
		wait.Eventually(ctx, t, "the policy enforced", time.Minute, 200*time.Millisecond, func() (bool, error) {
			err := c.Create(ctx, probe(i))
			i++
			if err == nil {
				return false, errors.New("a probe was allowed")
			}
			return strings.Contains(err.Error(), want), err
		})
	}

	t.Run("ProviderConfigs", func(t *testing.T) {
		cases := map[string]struct {
			reason string
			obj    *unstructured.Unstructured
			want   string // part of the refusal; empty when allowed
		}{
			"SecretOfItsOwnNamespace": {
				reason: "The credentials a tenant may use: the kubeconfig key of a Secret of its own namespace.",
				obj:    providerConfig("tenant", "own", fromSecret("tenant", "member-kubeconfig", "kubeconfig")),
			},
			"InjectedIdentity": {
				reason: "InjectedIdentity is provider-kubernetes' own pod identity.",
				obj:    providerConfig("tenant", "injected", map[string]any{"source": "InjectedIdentity"}),
				want:   `credentials source "InjectedIdentity" is refused in a tenant namespace`,
			},
			"Environment": {
				reason: "Environment loads a variable of provider-kubernetes' pod as the kubeconfig.",
				obj:    providerConfig("tenant", "env", map[string]any{"source": "Environment", "env": map[string]any{"name": "KUBECONFIG"}}),
				want:   `credentials source "Environment" is refused`,
			},
			"Filesystem": {
				reason: "Filesystem loads a file of provider-kubernetes' pod as the kubeconfig.",
				obj:    providerConfig("tenant", "fs", map[string]any{"source": "Filesystem", "fs": map[string]any{"path": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}),
				want:   `credentials source "Filesystem" is refused`,
			},
			"None": {
				reason: "Only Secret is accepted, not merely the sources known to be dangerous.",
				obj:    providerConfig("tenant", "none", map[string]any{"source": "None"}),
				want:   `credentials source "None" is refused`,
			},
			"Identity": {
				reason: "An identity block supplements the kubeconfig with the provider's own cloud identity, environment or files.",
				obj: func() *unstructured.Unstructured {
					pc := providerConfig("tenant", "identity", fromSecret("tenant", "member-kubeconfig", "kubeconfig"))
					pc.Object["spec"].(map[string]any)["identity"] = map[string]any{"type": "AWSWebIdentityCredentials", "source": "InjectedIdentity"}
					return pc
				}(),
				want: "spec.identity is refused in a tenant namespace",
			},
			"SecretOfAnotherNamespace": {
				reason: "provider-kubernetes reads a Secret of any namespace for a namespaced ProviderConfig: an administrator's kubeconfig, for one.",
				obj:    providerConfig("tenant", "borrowed", fromSecret("crossplane-system", "admin-kubeconfig", "kubeconfig")),
				want:   `spec.credentials.secretRef.namespace must be the ProviderConfig's own, "tenant"`,
			},
			"AnotherKey": {
				reason: "Only the kubeconfig key is checked by the Secret policy, so no other key may be named.",
				obj:    providerConfig("tenant", "other-key", fromSecret("tenant", "member-kubeconfig", "config")),
				want:   `spec.credentials.secretRef.key must be "kubeconfig"`,
			},
			"AdministratorsNamespace": {
				reason: "The namespaces the bindings exempt may use every source.",
				obj:    providerConfig("crossplane-system", "injected", map[string]any{"source": "InjectedIdentity"}),
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				check(t, tc.reason, c.Create(ctx, tc.obj), tc.want)
			})
		}
		t.Run("UpdateToInjectedIdentity", func(t *testing.T) {
			reason := "An admitted ProviderConfig cannot be changed into a refused one."
			pc := providerConfig("tenant", "own", nil)
			if err := c.Get(ctx, client.ObjectKeyFromObject(pc), pc); err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedMap(pc.Object, map[string]any{"source": "InjectedIdentity"}, "spec", "credentials")
			check(t, reason, c.Update(ctx, pc), `credentials source "InjectedIdentity" is refused`)
		})
	})

	t.Run("Secrets", func(t *testing.T) {
		binaryKey := "? !!binary " + base64.StdEncoding.EncodeToString([]byte("tokenFile")) + "\n: /var/run/secrets/kubernetes.io/serviceaccount/token"
		cases := map[string]struct {
			reason  string
			ns      string
			key     string
			value   []byte
			honours []string // what provider-kubernetes takes from the value, which the policy must refuse
			want    string   // part of the refusal; empty when allowed
			// unloadable is set when client-go cannot load the value.
			unloadable bool
		}{
			"TokenWithCA": {
				reason: "The kubeconfig a tenant needs: an https server, its CA and a token.",
				value:  kubeconfig(server, token),
			},
			"ClientCertificate": {
				reason: "Inline client certificates are accepted.",
				value: kubeconfig(server, "client-certificate-data: "+base64.StdEncoding.EncodeToString([]byte("cert"))+
					"\nclient-key-data: "+base64.StdEncoding.EncodeToString([]byte("key"))),
			},
			"JSON": {
				reason: "A kubeconfig written as JSON is read the same way.",
				value: []byte(`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"m","cluster":{"server":"https://member.example.com",` +
					`"certificate-authority-data":"Q0E="}}],"users":[{"name":"u","user":{"token":"abc"}}],` +
					`"contexts":[{"name":"m","context":{"cluster":"m","user":"u"}}],"current-context":"m"}`),
			},
			"TokenFile": {
				reason:  "A tokenFile makes provider-kubernetes send a file of its own, e.g. its service-account token, to the tenant's server.",
				value:   kubeconfig(server, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"),
				honours: []string{tokenFile},
				want:    "mentions tokenFile, refused in a tenant namespace",
			},
			"Exec": {
				reason:  "An exec plugin is a program provider-kubernetes runs.",
				value:   kubeconfig(server, "exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: /bin/sh\n  args: [-c, cat /var/run/secrets/kubernetes.io/serviceaccount/token]"),
				honours: []string{execPlugin},
				want:    "mentions exec,",
			},
			"AuthProvider": {
				reason:  "An auth provider (oidc) refreshes tokens from wherever the tenant says.",
				value:   kubeconfig(server, "auth-provider:\n  name: oidc\n  config: {idp-issuer-url: https://issuer.example.com, client-id: x}"),
				honours: []string{authProvider},
				want:    "mentions auth-provider,",
			},
			"InsecureSkipTLSVerify": {
				reason:  "Without verification whoever is on the path reads the token.",
				value:   kubeconfig(server+"\ninsecure-skip-tls-verify: true", token),
				honours: []string{insecure},
				want:    "mentions insecure-skip-tls-verify,",
			},
			"ProxyURL": {
				reason:  "A proxy of the tenant's choosing sees every request.",
				value:   kubeconfig(server+"\nproxy-url: http://proxy.example.com:3128", token),
				honours: []string{proxyURL},
				want:    "mentions proxy-url,",
			},
			"PlainHTTP": {
				reason:  "A plain http server gets the token in the clear.",
				value:   kubeconfig("server: http://member.example.com:8080", token),
				honours: []string{plainHTTP},
				want:    "names a server that is not https://",
			},
			"ServerWithoutScheme": {
				reason:  "client-go reaches a server without a scheme and without a CA over plain http.",
				value:   kubeconfig(`"server": member.example.com:8080`, token),
				honours: []string{plainHTTP},
				want:    "names a server that is not https://",
			},
			"QuotedKeyCaseAndFlow": {
				reason:  "Quoted keys, flow mappings and upper case are all read.",
				value:   kubeconfig(server, `{"TokenFile": /a, 'tokenFile': /var/run/x}`),
				honours: []string{tokenFile},
				want:    "mentions tokenFile,",
			},
			"ExplicitKeyWithComment": {
				reason:  "An explicit key (? ...) with a comment before its value.",
				value:   kubeconfig(server, "? tokenFile # the key\n: /var/run/x"),
				honours: []string{tokenFile},
				want:    "mentions tokenFile,",
			},
			"UnicodeEscape": {
				reason:  "JSON and YAML double-quoted escapes spell tokenFile without writing it.",
				value:   kubeconfig(server, `"token\u0046ile": /var/run/secrets/kubernetes.io/serviceaccount/token`),
				honours: []string{tokenFile},
				want:    "holds a backslash, refused in a tenant namespace",
			},
			"HexEscape": {
				reason:  "YAML's \\x escape does the same.",
				value:   kubeconfig(server+"\n\"insecure-skip-tls\\x2dverify\": true", token),
				honours: []string{insecure},
				want:    "holds a backslash",
			},
			"BinaryTag": {
				reason:  "A !!binary key is decoded from base64 before it is matched to a field.",
				value:   kubeconfig(server, binaryKey),
				honours: []string{tokenFile},
				want:    "holds a YAML tag (!), refused in a tenant namespace",
			},
			"VerbatimTag": {
				reason:  "The verbatim spelling of the binary tag.",
				value:   kubeconfig(server, "!<tag:yaml.org,2002:binary> "+base64.StdEncoding.EncodeToString([]byte("tokenFile"))+": /var/run/x"),
				honours: []string{tokenFile},
				want:    "holds a YAML tag (!)",
			},
			"Alias": {
				reason:  "An alias repeats a node written elsewhere in the text, where the word rule sees it.",
				value:   append([]byte("x: &k tokenFile\n"), kubeconfig(server, "*k : /var/run/x")...),
				honours: []string{tokenFile},
				want:    "mentions tokenFile,",
			},
			"MergeKey": {
				reason:  "A merge key brings in a mapping written elsewhere in the text.",
				value:   append([]byte("x: &m {exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}}\n"), kubeconfig(server, "<<: *m")...),
				honours: []string{execPlugin},
				want:    "mentions exec,",
			},
			"UTF16": {
				reason:  "client-go reads UTF-16 with a byte order mark, where no word can be matched.",
				value:   utf16LE(kubeconfig(server, "tokenFile: /var/run/x")),
				honours: []string{tokenFile},
				want:    "is UTF-16, refused in a tenant namespace",
			},
			"NotUTF8": {
				reason:     "Bytes that are neither UTF-8 nor UTF-16 do not load at all: nothing to refuse.",
				value:      append([]byte("x: \"\xc1\x9cu0046\"\n"), kubeconfig(server, token)...),
				unloadable: true,
			},
			"AnotherKey": {
				reason:  "Only the kubeconfig key can be named by a tenant's ProviderConfig: other keys are not checked.",
				key:     "notes",
				value:   kubeconfig(server, "tokenFile: /var/run/x"),
				honours: []string{tokenFile},
			},
			"AdministratorsNamespace": {
				reason:  "The namespaces the bindings exempt may hold any kubeconfig.",
				ns:      "crossplane-system",
				value:   kubeconfig(server, "tokenFile: /var/run/x"),
				honours: []string{tokenFile},
			},
			"Largest": {
				reason: "A kubeconfig of 16 KiB is read within the policy's cost budget.",
				value:  padded(kubeconfig(server, token), 16<<10),
			},
			"TooLarge": {
				reason: "A larger kubeconfig is refused unread: the time to read it grows with the square of its size.",
				value:  padded(kubeconfig(server, token), 16<<10+1),
				want:   "is larger than 16 KiB, refused in a tenant namespace",
			},
		}
		i := 0
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				// The case must show what provider-kubernetes would really
				// do with the value: client-go reads it as claimed.
				got, err := honoured(tc.value)
				if (err != nil) != tc.unloadable {
					t.Fatalf("%s\nhonoured(...): want unloadable %v, got error %v", tc.reason, tc.unloadable, err)
				}
				if diff := cmp.Diff(tc.honours, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("%s\nhonoured(...): -want, +got:\n%s", tc.reason, diff)
				}
				ns, key := tc.ns, tc.key
				if ns == "" {
					ns = "tenant"
				}
				if key == "" {
					key = "kubeconfig"
				}
				i++
				check(t, tc.reason, c.Create(ctx, secret(ns, fmt.Sprintf("s-%d", i), map[string][]byte{key: tc.value})), tc.want)
			})
		}

		t.Run("StringData", func(t *testing.T) {
			reason := "stringData is merged into data before admission, so it is checked too."
			s := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": "string-data", "namespace": "tenant"},
				"stringData": map[string]any{"kubeconfig": string(kubeconfig(server, "tokenFile: /var/run/x"))},
			}}
			check(t, reason, c.Create(ctx, s), "mentions tokenFile,")
		})
		t.Run("UpdateToTokenFile", func(t *testing.T) {
			reason := "An admitted kubeconfig cannot be changed into a refused one."
			s := secret("tenant", "updated", map[string][]byte{"kubeconfig": kubeconfig(server, token)})
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedField(s.Object, base64.StdEncoding.EncodeToString(kubeconfig(server, "tokenFile: /var/run/x")), "data", "kubeconfig")
			check(t, reason, c.Update(ctx, s), "mentions tokenFile,")
		})
	})
}

// check reports err unless it is a refusal containing want, or nil when want
// is empty.
func check(t *testing.T, reason string, err error, want string) {
	t.Helper()
	switch {
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s\nwant refused with %q, got %v", reason, want, err)
	case want == "" && err != nil:
		t.Errorf("%s\nwant allowed, got %v", reason, err)
	}
}
