package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	kubev1alpha1 "github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
	"github.com/kilomesh/kilomesh/fn/mesh"
	"github.com/kilomesh/kilomesh/test/stack/fixture"
)

// MeshGVK is the kind of a ClusterMesh.
var MeshGVK = schema.GroupVersionKind{Group: meshv1alpha1.Group, Version: meshv1alpha1.Version, Kind: meshv1alpha1.Kind}

// Clients reach every cluster of the stack as its admin, by name.
func (e *Env) Clients() (map[string]client.WithWatch, error) {
	out := map[string]client.WithWatch{}
	for _, c := range e.Clusters() {
		cl, err := e.Client(c)
		if err != nil {
			return nil, err
		}
		out[c] = cl
	}
	return out, nil
}

// GetMesh reads a ClusterMesh and decodes its spec.
func GetMesh(ctx context.Context, c client.Client, namespace, name string) (*unstructured.Unstructured, *meshv1alpha1.ClusterMeshSpec, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MeshGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, nil, err
	}
	spec := &meshv1alpha1.ClusterMeshSpec{}
	b, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(b, spec); err != nil {
		return nil, nil, fmt.Errorf("cannot decode the spec of ClusterMesh %s/%s: %w", namespace, name, err)
	}
	return u, spec, nil
}

// Owned tells whether a Peer carries the labels of the mesh namespace/name.
func Owned(p *kilov1alpha1.Peer, namespace, name string) bool {
	for k, v := range mesh.OwnedLabels(namespace, name) {
		if p.Labels[k] != v {
			return false
		}
	}
	return true
}

// Peers lists every Peer of a member, sorted by name.
func Peers(ctx context.Context, c client.Client) ([]kilov1alpha1.Peer, error) {
	l := &kilov1alpha1.PeerList{}
	if err := c.List(ctx, l); err != nil {
		return nil, err
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items, nil
}

// MeshPeers are the Peers of a member that belong to the mesh namespace/name.
// A member that does not serve Kilo's Peer holds none.
func MeshPeers(ctx context.Context, c client.Client, namespace, name string) ([]kilov1alpha1.Peer, error) {
	all, err := Peers(ctx, c)
	if isNoPeerKind(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []kilov1alpha1.Peer
	for i := range all {
		if Owned(&all[i], namespace, name) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// Want plans the mesh namespace/name from what its members hold now: their
// Nodes, and the Peers of others in them. The members are the clusters of
// the stack named like the spec's members; a member of the spec that is not
// in clients is treated as never observed.
func Want(ctx context.Context, clients map[string]client.WithWatch, namespace, name string, spec *meshv1alpha1.ClusterMeshSpec) (*mesh.Plan, error) {
	in := &mesh.Input{Namespace: namespace, Name: name, Spec: *spec, Observations: map[string]*mesh.Observation{}}
	for _, m := range spec.Clusters {
		c, ok := clients[m.Name]
		if !ok {
			continue
		}
		nodes, err := fixture.List(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		o := fixture.Observation(nodes)
		peers, err := Peers(ctx, c)
		if err != nil && !isNoPeerKind(err) {
			return nil, fmt.Errorf("%s: cannot list peers: %w", m.Name, err)
		}
		for i := range peers {
			if !Owned(&peers[i], namespace, name) {
				o.ForeignPeers = append(o.ForeignPeers, kubev1alpha1.ForeignPeer{Name: peers[i].Name, PublicKey: peers[i].Spec.PublicKey})
			}
		}
		in.Observations[m.Name] = o
	}
	return mesh.Do(in)
}

// isNoPeerKind tells whether a cluster does not serve Kilo's Peer.
func isNoPeerKind(err error) bool {
	return meta.IsNoMatchError(err) || kerrors.IsNotFound(err)
}

// peerView is the part of a Peer kilomesh decides.
type peerView struct {
	Name   string
	Labels map[string]string
	Spec   kilov1alpha1.PeerSpec
}

func comparableOf(ps []kilov1alpha1.Peer) []peerView {
	out := make([]peerView, len(ps))
	for i, p := range ps {
		labels := map[string]string{}
		for _, k := range []string{meshv1alpha1.LabelManagedBy, meshv1alpha1.LabelMeshNamespace, meshv1alpha1.LabelMesh, meshv1alpha1.LabelSourceCluster} {
			if v, ok := p.Labels[k]; ok {
				labels[k] = v
			}
		}
		out[i] = peerView{Name: p.Name, Labels: labels, Spec: p.Spec}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Diff compares the Peers a member holds with the ones it should hold: names,
// kilomesh's labels and specs. It is empty when they agree.
func Diff(want, got []kilov1alpha1.Peer) string {
	return cmp.Diff(comparableOf(want), comparableOf(got))
}

// Mismatch says how the members differ from the plan, or nothing: the first
// of members whose Peers of the mesh (as held reads them) are not the
// planned ones, with the difference. A member the plan does not name must
// hold none of the mesh's Peers.
func Mismatch(plan *mesh.Plan, members []string, held func(member string) ([]kilov1alpha1.Peer, error)) string {
	for _, m := range members {
		got, err := held(m)
		if err != nil {
			return m + ": " + err.Error()
		}
		if d := Diff(plan.Peers[m], got); d != "" {
			return fmt.Sprintf("%s holds %d of the mesh's Peers, %d planned, or they differ\n(-want +got):\n%s", m, len(got), len(plan.Peers[m]), d)
		}
	}
	return ""
}
