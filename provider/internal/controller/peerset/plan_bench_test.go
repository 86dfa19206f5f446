package peerset

import (
	"fmt"
	"testing"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	"github.com/kilomesh/kilomesh/apis/kube/v1alpha1"
)

// BenchmarkNewPlan plans a member of 20 x 250 (4,750 Peers of 19 source
// clusters): "steady" with every Peer applied, "create" with none.
//
//	go test -run='^$' -bench=NewPlan -benchmem ./provider/internal/controller/peerset/
func BenchmarkNewPlan(b *testing.B) {
	params := v1alpha1.PeerSetParameters{Selector: sel}
	for c := range 19 {
		for i := range 250 {
			params.Peers = append(params.Peers, v1alpha1.DesiredPeer{
				Name:   fmt.Sprintf("mesh-cluster-%02d-node-%04d", c, i),
				Labels: map[string]string{"kilomesh.io/source-cluster": fmt.Sprintf("cluster-%02d", c)},
				Spec: v1alpha1.PeerSpec{
					AllowedIPs: []string{fmt.Sprintf("10.%d.%d.%d/28", 64+c, i/16, i%16*16)},
					PublicKey:  fmt.Sprintf("%043d=", c*250+i),
				},
			})
		}
	}
	var applied []*kilov1alpha1.Peer
	for i := range params.Peers {
		applied = append(applied, Desired(sel, &params.Peers[i]))
	}
	for name, actual := range map[string][]*kilov1alpha1.Peer{"steady": applied, "create": nil} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewPlan(params, actual, "")
			}
		})
	}
}
