package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/crossplane/function-sdk-go/logging"

	"github.com/kilomesh/kilomesh/fn/mesh"
)

func TestComposeServices(t *testing.T) {
	idA := mesh.ClusterID("network", "mesh", "cluster-a")
	idB := mesh.ClusterID("network", "mesh", "cluster-b")
	sync := func(member, id, nets, source, sourceID, sourceNets, extra string) *structpb.Struct {
		return fromYAML(t, `
apiVersion: kube.kilomesh.io/v1alpha1
kind: ServiceSync
metadata:
  annotations: {kilomesh.io/mesh-name: mesh}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: `+member+`}
  forProvider:
    selector: {app.kubernetes.io/managed-by: kilomesh, kilomesh.io/mesh-namespace: network, kilomesh.io/mesh: mesh}
    clusterID: `+id+`
    namespaces: [shop, web]
    networks: `+nets+`
    family: IPv4
    sources:
    - name: `+source+`
      clusterID: `+sourceID+`
      providerConfigRef: {kind: ClusterProviderConfig, name: `+source+`}
      networks: `+sourceNets+`
`+extra)
	}
	cases := map[string]struct {
		reason   string
		services string
		want     map[string]*structpb.Struct
	}{
		"Off": {
			reason: "A mesh without spec.services composes no ServiceSync: turning it off deletes them, and their imports with them.",
		},
		"On": {
			reason:   "Every member gets a ServiceSync that imports from every other member, in the declared namespaces only.",
			services: "  services: {namespaces: [shop, web]}\n",
			want: map[string]*structpb.Struct{
				"services-cluster-a": sync("cluster-a", idA, "[10.1.0.0/16]", "cluster-b", idB, "[10.2.0.0/16]", ""),
				"services-cluster-b": sync("cluster-b", idB, "[10.2.0.0/16]", "cluster-a", idA, "[10.1.0.0/16]", ""),
			},
		},
		"WithdrawAfter": {
			reason:   "A mesh's withdrawAfter reaches every ServiceSync.",
			services: "  services: {namespaces: [shop, web], withdrawAfter: 5m}\n",
			want: map[string]*structpb.Struct{
				"services-cluster-a": sync("cluster-a", idA, "[10.1.0.0/16]", "cluster-b", idB, "[10.2.0.0/16]", "    withdrawAfter: 5m0s\n"),
				"services-cluster-b": sync("cluster-b", idB, "[10.2.0.0/16]", "cluster-a", idA, "[10.1.0.0/16]", "    withdrawAfter: 5m0s\n"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			y := strings.Replace(xrTwoClusters, "spec:\n", "spec:\n"+tc.services, 1)
			x := fromYAML(t, strings.NewReplacer("%s", "PeerSet", "[%s]", "[10.2.0.0/16]").Replace(y))
			f := &Function{log: logging.NewNopLogger()}
			rsp, err := f.RunFunction(context.Background(), request(x, observedTwo(t, "True"), noOtherMeshes))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rsp.GetResults() {
				t.Logf("result: %s", r.GetMessage())
			}
			got := map[string]*structpb.Struct{}
			for name, r := range rsp.GetDesired().GetResources() {
				if strings.HasPrefix(name, prefixServices) {
					got[name] = r.GetResource()
				}
			}
			if tc.want == nil {
				tc.want = map[string]*structpb.Struct{}
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nRunFunction(...): ServiceSyncs -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
