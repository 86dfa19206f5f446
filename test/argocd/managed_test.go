package argocd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// healthManaged is the health check of provider-kilomesh's managed
// resources.
const healthManaged = "../../examples/argocd/health-managed.lua"

// A managedCheck is the argocd-cm key of one kind of provider-kilomesh's
// managed resources, and the folder of testdata the check is tried on:
// objects as provider-kilomesh reported them on the local stack, and a few
// edited.
type managedCheck struct {
	key, script, fixtures string
}

var managedChecks = map[string]managedCheck{
	"NodeInventory": {"resource.customizations.health.kube.kilomesh.io_NodeInventory", healthManaged, "nodeinventory"},
	"PeerSet":       {"resource.customizations.health.kube.kilomesh.io_PeerSet", healthManaged, "peerset"},
}

func TestHealthManaged(t *testing.T) {
	type want struct {
		status string
		// message is a part of the message.
		message string
	}
	cases := map[string]struct {
		reason  string
		kind    string
		fixture string
		want    want
	}{
		"NodeInventoryNew": {
			reason:  "An inventory provider-kilomesh has not reported on yet is on its way.",
			kind:    "NodeInventory",
			fixture: "new.yaml",
			want:    want{"Progressing", "first observation"},
		},
		"NodeInventoryHealthy": {
			reason:  "An observed member is Healthy, with the number of nodes it publishes.",
			kind:    "NodeInventory",
			fixture: "healthy.yaml",
			want:    want{"Healthy", "4 nodes observed"},
		},
		"NodeInventoryUnobservable": {
			reason:  "A member that cannot be observed is Degraded with provider-kilomesh's message, although its last observation is kept (Ready stays True).",
			kind:    "NodeInventory",
			fixture: "unobservable.yaml",
			want:    want{"Degraded", `cannot get Secret network/cluster-b-kubeconfig-rotated named by ProviderConfig "network/cluster-b"`},
		},
		"PeerSetHealthy": {
			reason:  "A set whose Peers are all applied is Healthy, with how many.",
			kind:    "PeerSet",
			fixture: "healthy.yaml",
			want:    want{"Healthy", "4 Peers applied"},
		},
		"PeerSetApplying": {
			reason:  "Peers still on their way keep the set Progressing, with the count provider-kilomesh reports.",
			kind:    "PeerSet",
			fixture: "applying.yaml",
			want:    want{"Progressing", "2 of 4 Peers are applied"},
		},
		"PeerSetConflict": {
			reason:  "A Peer in the way does not clear by itself: Degraded, naming it.",
			kind:    "PeerSet",
			fixture: "conflict.yaml",
			want:    want{"Degraded", `vpn-alice: PeerNameConflict: a Peer named "vpn-alice"`},
		},
		"PeerSetPaused": {
			reason:  "A paused set is Suspended, whatever its last status said.",
			kind:    "PeerSet",
			fixture: "paused.yaml",
			want:    want{"Suspended", "paused"},
		},
	}
	used := map[string]bool{}
	for _, tc := range cases {
		used[filepath.Join(managedChecks[tc.kind].fixtures, tc.fixture)] = true
	}
	for _, m := range managedChecks {
		checkJudged(t, m.fixtures, used)
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := managedChecks[tc.kind]
			obj := readObject(t, filepath.Join(m.fixtures, tc.fixture))
			if obj["kind"] != tc.kind {
				t.Fatalf("%s/%s is a %v, not a %s", m.fixtures, tc.fixture, obj["kind"], tc.kind)
			}
			sb := sandbox{now: mustTime(t, "2026-11-24T15:10:00Z"), local: time.UTC}
			status, message, err := sb.health(readFile(t, m.script), obj)
			if err != nil {
				t.Fatalf("%s\n%s on %s: %v", tc.reason, m.script, tc.fixture, err)
			}
			if status != tc.want.status || !strings.Contains(message, tc.want.message) {
				t.Errorf("%s\n%s on %s: got %s %q, want %s with a message containing %q",
					tc.reason, filepath.Base(m.script), tc.fixture, status, message, tc.want.status, tc.want.message)
			}
		})
	}
}
