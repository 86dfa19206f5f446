package main

import (
	"testing"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
	meshv1alpha1 "github.com/kilomesh/kilomesh/apis/mesh/v1alpha1"
)

// TestSameForm pins that sameForm is formOf's equality, for Peers that
// differ in each field formOf writes, or in none, or only in how their
// values are held, and for Peers whose different fields write the same
// form.
func TestSameForm(t *testing.T) {
	base := func() kilov1alpha1.Peer {
		p := kilov1alpha1.Peer{}
		p.Name = "p"
		p.Labels = map[string]string{meshv1alpha1.LabelSourceCluster: "cluster-a", "other": "x"}
		p.Spec = kilov1alpha1.PeerSpec{
			AllowedIPs:          []string{"10.1.0.0/24", "10.201.0.1/32"},
			PublicKey:           "tpvf7xLm7qctOgAc3v4taYj0i41t2f9GiY43enBeaDc=",
			PersistentKeepalive: 25,
			Endpoint:            &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "203.0.113.1"}, Port: 51820},
		}
		return p
	}
	shared := map[string]string{meshv1alpha1.LabelSourceCluster: "cluster-a"}
	edits := map[string]func(*kilov1alpha1.Peer){
		"shared labels": func(p *kilov1alpha1.Peer) { p.Labels = shared },
		"none":          func(*kilov1alpha1.Peer) {},
		"name":          func(p *kilov1alpha1.Peer) { p.Name = "q" },
		"other label":   func(p *kilov1alpha1.Peer) { p.Labels = map[string]string{meshv1alpha1.LabelSourceCluster: "cluster-a"} },
		"source":        func(p *kilov1alpha1.Peer) { p.Labels = map[string]string{meshv1alpha1.LabelSourceCluster: "cluster-b"} },
		"no labels":     func(p *kilov1alpha1.Peer) { p.Labels = nil },
		"key":           func(p *kilov1alpha1.Peer) { p.Spec.PublicKey = "x" },
		"preshared":     func(p *kilov1alpha1.Peer) { p.Spec.PresharedKey = "y" },
		"keepalive":     func(p *kilov1alpha1.Peer) { p.Spec.PersistentKeepalive = 0 },
		"no endpoint":   func(p *kilov1alpha1.Peer) { p.Spec.Endpoint = nil },
		"endpoint copy": func(p *kilov1alpha1.Peer) { e := *p.Spec.Endpoint; p.Spec.Endpoint = &e },
		"endpoint ip": func(p *kilov1alpha1.Peer) {
			p.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "203.0.113.2"}, Port: 51820}
		},
		"endpoint dns": func(p *kilov1alpha1.Peer) {
			p.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{DNS: "a.example"}, Port: 51820}
		},
		"endpoint port": func(p *kilov1alpha1.Peer) {
			p.Spec.Endpoint = &kilov1alpha1.PeerEndpoint{DNSOrIP: kilov1alpha1.DNSOrIP{IP: "203.0.113.1"}, Port: 1}
		},
		"routes copy":     func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = append([]string(nil), p.Spec.AllowedIPs...) },
		"routes cut":      func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = p.Spec.AllowedIPs[:1] },
		"routes none":     func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = nil },
		"routes empty":    func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = []string{} },
		"routes extra":    func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = append(p.Spec.AllowedIPs[:2:2], "10.9.0.0/16") },
		"routes reversed": func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = []string{"10.201.0.1/32", "10.1.0.0/24"} },
		// Fields that write the same form as base's: formOf joins them
		// with NUL bytes.
		"joined routes":      func(p *kilov1alpha1.Peer) { p.Spec.AllowedIPs = []string{"10.1.0.0/24\x0010.201.0.1/32"} },
		"key with NUL":       func(p *kilov1alpha1.Peer) { p.Spec.PublicKey += "\x00X" },
		"preshared with NUL": func(p *kilov1alpha1.Peer) { p.Spec.PresharedKey = "X\x00" },
	}
	for an, ea := range edits {
		for bn, eb := range edits {
			a, b := base(), base()
			ea(&a)
			eb(&b)
			if got, want := sameForm(&a, &b), formOf(&a) == formOf(&b); got != want {
				t.Errorf("%s, %s: sameForm is %v, formOf's equality %v", an, bn, got, want)
			}
		}
	}
	// Edits whose fields differ but write the same form.
	for _, pair := range [][2]string{{"joined routes", "none"}, {"key with NUL", "preshared with NUL"}} {
		a, b := base(), base()
		edits[pair[0]](&a)
		edits[pair[1]](&b)
		if !sameForm(&a, &b) {
			t.Errorf("%s, %s: sameForm is false, but both write the same form", pair[0], pair[1])
		}
	}
}
