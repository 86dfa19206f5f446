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
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	"github.com/kilomesh/kilomesh/provider/internal/clients"
	"github.com/kilomesh/kilomesh/provider/internal/testenv"
)

// secretToken must never appear in a condition or an event.
const secretToken = "s3cr3t-t0ken-do-not-print"

// proxyURL is the proxy of a refused kubeconfig; no message may quote it.
const proxyURL = "http://user:proxy-password@proxy.example.com:3128"

// withCluster returns a kubeconfig with its one cluster changed.
func withCluster(t *testing.T, kubeconfig []byte, mod func(c *clientcmdapi.Cluster)) []byte {
	t.Helper()
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		mod(c)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCredentials(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	other := namespace(ctx, t)

	secret := func(ns, name string, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
		if err := cp.kube.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	config := func(kind, name string, spec map[string]any) {
		t.Helper()
		pcNS := ns
		if kind == clients.KindClusterProviderConfig {
			pcNS = ""
		}
		if err := cp.kube.Create(ctx, pkConfig(kind, pcNS, name, spec)); err != nil {
			t.Fatal(err)
		}
	}
	fromSecret := func(secretNS, name, key string) map[string]any {
		return map[string]any{"credentials": map[string]any{
			"source":    "Secret",
			"secretRef": map[string]any{"namespace": secretNS, "name": name, "key": key},
		}}
	}
	withToken, err := testenv.Kubeconfig("https://127.0.0.1:1", nil, secretToken)
	if err != nil {
		t.Fatal(err)
	}
	cp.mu.Lock()
	cp.inCluster = rest.CopyConfig(m.AdminConfig)
	cp.mu.Unlock()
	// The inventories go before the member cluster stops, so that no watch
	// holds its API server open.
	t.Cleanup(func() { deleteInventories(t, ns) })

	type want struct {
		synced  corev1.ConditionStatus
		message string
	}
	cases := map[string]struct {
		reason string
		setup  func(name string) *xpv2.ProviderConfigReference
		want   want
	}{
		"NamespacedSecret": {
			reason: "A namespaced ProviderConfig with a kubeconfig Secret of its namespace reaches the cluster.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": string(m.Kubeconfig)})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionTrue},
		},
		"ClusterSecret": {
			reason: "A ClusterProviderConfig may name a Secret of any namespace.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(other, name, map[string]string{"config": string(m.Kubeconfig)})
				config(clients.KindClusterProviderConfig, ns+"-"+name, fromSecret(other, name, "config"))
				return ref(clients.KindClusterProviderConfig, ns+"-"+name)
			},
			want: want{synced: corev1.ConditionTrue},
		},
		"InjectedIdentity": {
			reason: "A ClusterProviderConfig with InjectedIdentity uses the provider's own identity.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				config(clients.KindClusterProviderConfig, ns+"-"+name, map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})
				return ref(clients.KindClusterProviderConfig, ns+"-"+name)
			},
			want: want{synced: corev1.ConditionTrue},
		},
		"NamespacedInjectedIdentity": {
			reason: "A namespaced ProviderConfig may not grant the provider's own identity: anyone who may create one in a namespace would act as the provider.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				config(clients.KindProviderConfig, name, map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: fmt.Sprintf(`ProviderConfig "%s/namespacedinjectedidentity": credentials source InjectedIdentity is refused`, ns)},
		},
		"InsecureSkipTLSVerify": {
			reason: "A kubeconfig that does not verify the member's certificate is refused, naming the config and the flag, never a URL.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": string(withCluster(t, m.Kubeconfig, func(c *clientcmdapi.Cluster) {
					c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
				}))})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: fmt.Sprintf(`named by ProviderConfig "%s/insecureskiptlsverify": cluster "member" sets insecure-skip-tls-verify, which provider-kilomesh refuses unless it is started with --allow-kubeconfig=insecure-skip-tls-verify`, ns)},
		},
		"ProxyURL": {
			reason: "A kubeconfig with a proxy is refused, and the proxy's URL is not quoted.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": string(withCluster(t, m.Kubeconfig, func(c *clientcmdapi.Cluster) { c.ProxyURL = proxyURL }))})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `cluster "member" sets a proxy-url, which provider-kilomesh refuses unless it is started with --allow-kubeconfig=proxy-url`},
		},
		"PlainHTTP": {
			reason: "A kubeconfig with a plain-HTTP server is refused.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": string(withCluster(t, m.Kubeconfig, func(c *clientcmdapi.Cluster) {
					c.Server = "http" + strings.TrimPrefix(c.Server, "https")
				}))})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `cluster "member" has a server that is not https://, which provider-kilomesh refuses unless it is started with --allow-kubeconfig=http`},
		},
		"MissingConfig": {
			reason: "A config that does not exist is named.",
			setup: func(_ string) *xpv2.ProviderConfigReference {
				return ref(clients.KindProviderConfig, "nope")
			},
			want: want{synced: corev1.ConditionFalse, message: fmt.Sprintf(`cannot get ProviderConfig "%s/nope"`, ns)},
		},
		"MissingClusterConfig": {
			reason: "A missing ClusterProviderConfig is named without a namespace.",
			setup: func(_ string) *xpv2.ProviderConfigReference {
				return ref(clients.KindClusterProviderConfig, "nope")
			},
			want: want{synced: corev1.ConditionFalse, message: `cannot get ClusterProviderConfig "nope"`},
		},
		"UnknownKind": {
			reason: "A reference to another kind is refused.",
			setup: func(_ string) *xpv2.ProviderConfigReference {
				return ref("Bogus", "x")
			},
			want: want{synced: corev1.ConditionFalse, message: `kind "Bogus" is neither ProviderConfig nor ClusterProviderConfig`},
		},
		"UnsupportedSource": {
			reason: "Sources other than Secret and InjectedIdentity are refused by name.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				config(clients.KindProviderConfig, name, map[string]any{"credentials": map[string]any{"source": "Environment", "env": map[string]any{"name": "X"}}})
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `credentials source "Environment" is not supported`},
		},
		"MissingSecret": {
			reason: "A missing Secret is named with the config that names it.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				config(clients.KindProviderConfig, name, fromSecret(ns, "nope", "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: fmt.Sprintf(`cannot get Secret %s/nope named by ProviderConfig "%s/%s"`, ns, ns, "missingsecret")},
		},
		"MissingKey": {
			reason: "A Secret without the key is named.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"other": secretToken})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `has no key "kubeconfig"`},
		},
		"MalformedKubeconfig": {
			reason: "A malformed kubeconfig is named, and its content is not quoted.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": "users:\n- name: x\n  user:\n    token: " + secretToken + "\n  [oops: {"})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `does not hold a valid kubeconfig`},
		},
		"KubeconfigWithoutContext": {
			reason: "A kubeconfig without a current context is refused with the reason.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    token: " + secretToken + "\n"})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `current-context is not set`},
		},
		"KubeconfigWithTokenFile": {
			reason: "A kubeconfig that reads a file of the provider is refused.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				kc := strings.Replace(string(withToken), "token: "+secretToken, "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", 1)
				secret(ns, name, map[string]string{"kubeconfig": kc})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: `refers to the file tokenFile`},
		},
		"SecretOfAnotherNamespace": {
			reason: "A namespaced config may not borrow a Secret of another namespace.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(other, name, map[string]string{"kubeconfig": string(m.Kubeconfig)})
				config(clients.KindProviderConfig, name, fromSecret(other, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: "must be the ProviderConfig's own namespace"},
		},
		"UnreachableServer": {
			reason: "A cluster that cannot be reached is reported, without the token.",
			setup: func(name string) *xpv2.ProviderConfigReference {
				secret(ns, name, map[string]string{"kubeconfig": string(withToken)})
				config(clients.KindProviderConfig, name, fromSecret(ns, name, "kubeconfig"))
				return ref(clients.KindProviderConfig, name)
			},
			want: want{synced: corev1.ConditionFalse, message: "cannot observe the Nodes of the cluster"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := strings.ToLower(name)
			ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
			ni.Spec.ProviderConfigReference = tc.setup(n)
			if err := cp.kube.Create(ctx, ni); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, tc.reason, synced(inventoryOf(ctx, ns, n), tc.want.synced, tc.want.message))
			// The owner of the inventory hands nothing to any provider for
			// a member whose credentials provider-kilomesh refuses; a member
			// that merely does not answer keeps its credentials.
			accepted, msg := corev1.ConditionTrue, ""
			if tc.want.synced == corev1.ConditionFalse && name != "UnreachableServer" {
				accepted, msg = corev1.ConditionFalse, tc.want.message
			}
			eventually(ctx, t, tc.reason+" (CredentialsAccepted)", func() error {
				ni, err := getInventory(ctx, ns, n)
				if err != nil {
					return err
				}
				c := ni.GetCondition(v1alpha1.TypeCredentialsAccepted)
				if c.Status != accepted || !strings.Contains(c.Message, msg) {
					return fmt.Errorf("CredentialsAccepted is %s %q, want %s containing %q", c.Status, c.Message, accepted, msg)
				}
				return nil
			})
		})
	}

	t.Run("NoCredentialsInConditionsOrEvents", func(t *testing.T) {
		l := &v1alpha1.NodeInventoryList{}
		if err := cp.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, ni := range l.Items {
			for _, c := range ni.Status.Conditions {
				if strings.Contains(c.Message, secretToken) || strings.Contains(c.Message, m.Token) || strings.Contains(c.Message, proxyURL) {
					t.Errorf("%s: condition %s carries a credential: %q", ni.Name, c.Type, c.Message)
				}
			}
		}
		ev := &corev1.EventList{}
		if err := cp.kube.List(ctx, ev, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(ev.Items) == 0 {
			t.Errorf("want warning events for the broken configs, got none")
		}
		for _, e := range ev.Items {
			if strings.Contains(e.Message, secretToken) || strings.Contains(e.Message, m.Token) || strings.Contains(e.Message, proxyURL) {
				t.Errorf("event %s carries a credential: %q", e.Name, e.Message)
			}
		}
	})
}

func TestConfigInUseIsProtected(t *testing.T) {
	needAPIServers(t)
	ctx := t.Context()
	m := testenv.StartMember(t, testenv.MemberOptions{})
	ns := namespace(ctx, t)
	providerConfig(ctx, t, ns, "member", m.Kubeconfig)
	cpc := pkConfig(clients.KindClusterProviderConfig, "", ns+"-member", map[string]any{"credentials": map[string]any{
		"source":    "Secret",
		"secretRef": map[string]any{"namespace": ns, "name": "member", "key": "kubeconfig"},
	}})
	if err := cp.kube.Create(ctx, cpc); err != nil {
		t.Fatal(err)
	}

	ni := &v1alpha1.NodeInventory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"}}
	ni.Spec.ProviderConfigReference = ref(clients.KindProviderConfig, "member")
	if err := cp.kube.Create(ctx, ni); err != nil {
		t.Fatal(err)
	}
	ps := &v1alpha1.PeerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peers"}}
	ps.Spec.ProviderConfigReference = ref(clients.KindClusterProviderConfig, ns+"-member")
	ps.Spec.ForProvider = v1alpha1.PeerSetParameters{Selector: meshLabels, Peers: []v1alpha1.DesiredPeer{desired("peer-a", keyA, "10.2.1.0/24")}}
	if err := cp.kube.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func() (conditioned, error){
		inventoryOf(ctx, ns, "inventory"),
		peerSetOf(ctx, ns, "peers"),
	} {
		eventually(ctx, t, "the resources use their configs", synced(get, corev1.ConditionTrue, ""))
	}

	pc := &testenv.PKProviderConfig{}
	pc.SetNamespace(ns)
	pc.SetName("member")
	cl := &testenv.PKClusterProviderConfig{}
	cl.SetName(ns + "-member")
	terminating := func(obj client.Object, cond func() xpv2.Condition) func() error {
		return func() error {
			if err := cp.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if c := cond(); c.Status != corev1.ConditionTrue {
				return fmt.Errorf("%s is not Terminating yet", obj.GetName())
			}
			return nil
		}
	}
	for _, obj := range []client.Object{pc, cl} {
		if err := cp.kube.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(ctx, t, "the ProviderConfig in use is kept", terminating(pc, func() xpv2.Condition { return pc.GetCondition("Terminating") }))
	eventually(ctx, t, "the ClusterProviderConfig in use is kept", terminating(cl, func() xpv2.Condition { return cl.GetCondition("Terminating") }))
	if pc.GetUsers() != 1 || cl.GetUsers() != 1 {
		t.Errorf("users: want 1 and 1, got %d and %d", pc.GetUsers(), cl.GetUsers())
	}

	// The PeerSet can still reach its cluster to delete its Peers.
	for _, obj := range []client.Object{ni, ps} {
		if err := cp.kube.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the resource is deleted", gone(ctx, obj))
	}
	eventually(ctx, t, "the PeerSet's Peers are deleted", hasPeers(ctx, t, m.Admin, nil))
	eventually(ctx, t, "the ProviderConfig is released", gone(ctx, pc))
	eventually(ctx, t, "the ClusterProviderConfig is released", gone(ctx, cl))
}

func deleteInventories(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.kube.DeleteAllOf(ctx, &v1alpha1.NodeInventory{}, client.InNamespace(ns)); err != nil {
		t.Error(err)
		return
	}
	eventually(ctx, t, "the inventories are deleted", func() error {
		l := &v1alpha1.NodeInventoryList{}
		if err := cp.kube.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d inventories left", len(l.Items))
		}
		return nil
	})
}
