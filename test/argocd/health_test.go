// Package argocd tests the Argo CD health check of the ClusterMesh
// (examples/argocd/health.lua) under gopher-lua, the Lua engine Argo CD
// embeds, in the sandbox Argo CD gives health checks from argocd-cm: the
// base, package and table libraries and a require("os") with only time and
// date. The objects it judges are ClusterMeshes the function really rendered
// (testdata/render-*.yaml), plus a few with edited conditions.
package argocd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"

	"github.com/kilomesh/kilomesh/internal/testing/yamldocs"
)

const (
	healthLua   = "../../examples/argocd/health.lua"
	argocdCM    = "../../examples/argocd/argocd-cm.yaml"
	healthKey   = "resource.customizations.health.kilomesh.io_ClusterMesh"
	renderDir   = "../../examples/render"
	testdataDir = "testdata"
)

// sandbox runs Lua the way Argo CD runs a health check configured in
// argocd-cm without useOpenLibs.
type sandbox struct {
	// now is the time os.time() and os.date() report.
	now time.Time
	// local is the time zone of the Argo CD controller: os.time reads a
	// table of fields, and os.date("*t", s) writes one, in this zone.
	local *time.Location
}

// health runs script with obj as the global obj and returns the status and
// message it reports.
func (s sandbox) health(script string, obj map[string]any) (status, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", err
		}
	}
	// Argo CD's os offers time and date only, and only through require.
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(l.SetFuncs(l.NewTable(), map[string]lua.LGFunction{"time": s.osTime, "date": s.osDate}))
		return 1
	})
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	status = lua.LVAsString(hs.RawGetString("status"))
	switch status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
	default:
		return "", "", fmt.Errorf("the script returned status %q, which Argo CD turns into Unknown", status)
	}
	return status, lua.LVAsString(hs.RawGetString("message")), nil
}

// osTime is os.time: now without an argument, else the fields of a table
// read in the local zone, with the defaults Lua gives missing fields.
func (s sandbox) osTime(l *lua.LState) int {
	if l.GetTop() == 0 {
		l.Push(lua.LNumber(s.now.Unix()))
		return 1
	}
	tb := l.CheckTable(1)
	field := func(name string, def int) int {
		if n, ok := tb.RawGetString(name).(lua.LNumber); ok {
			return int(n)
		}
		return def
	}
	t := time.Date(field("year", -1), time.Month(field("month", -1)), field("day", -1),
		field("hour", 12), field("min", 0), field("sec", 0), 0, s.local)
	l.Push(lua.LNumber(t.Unix()))
	return 1
}

// osDate is os.date for the "*t" formats: "!*t" is now in UTC, "*t" now in
// the local zone, and "*t" with a time that time in the local zone. Argo CD
// also reads "!*t" with a time in the local zone; the check must not rely
// on either, so that and every strftime format are errors here.
func (s sandbox) osDate(l *lua.LState) int {
	format := l.CheckString(1)
	t := s.now.In(s.local)
	if strings.HasPrefix(format, "!") {
		format = strings.TrimPrefix(format, "!")
		if l.GetTop() >= 2 {
			l.RaiseError("os.date(%q, t) is read in the local zone by Argo CD, in UTC by Lua", "!"+format)
		}
		t = s.now.UTC()
	}
	if l.GetTop() >= 2 {
		t = time.Unix(l.CheckInt64(2), 0).In(s.local)
	}
	if format != "*t" {
		l.RaiseError("os.date(%q) is not modelled by this test", format)
	}
	tb := l.NewTable()
	for k, v := range map[string]int{"year": t.Year(), "month": int(t.Month()), "day": t.Day(),
		"hour": t.Hour(), "min": t.Minute(), "sec": t.Second(), "wday": int(t.Weekday()) + 1, "yday": 0} {
		tb.RawSetString(k, lua.LNumber(v))
	}
	tb.RawSetString("isdst", lua.LFalse)
	l.Push(tb)
	return 1
}

// toLua turns a decoded JSON value into Lua values as Argo CD does: objects
// and arrays become tables, numbers LNumbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		tb := l.CreateTable(0, len(v))
		for k, e := range v {
			tb.RawSetH(lua.LString(k), toLua(l, e))
		}
		return tb
	case []any:
		tb := l.CreateTable(len(v), 0)
		for _, e := range v {
			tb.Append(toLua(l, e))
		}
		return tb
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	default:
		return lua.LNil
	}
}

func readObject(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestHealth(t *testing.T) {
	script := readFile(t, healthLua)
	east := time.FixedZone("UTC+05:30", 5*3600+1800)
	west := time.FixedZone("UTC-08:00", -8*3600)

	type want struct {
		status string
		// message is a part of the message.
		message string
	}
	cases := map[string]struct {
		reason  string
		fixture string
		now     string
		local   *time.Location
		want    want
	}{
		"NoStatus": {
			reason:  "A ClusterMesh Crossplane has not reconciled yet is on its way.",
			fixture: "new.yaml",
			want:    want{"Progressing", "Waiting for Crossplane"},
		},
		"RenderTwoClusters": {
			reason:  "A mesh whose Peers are still being created is Progressing, with Crossplane's list of unready resources.",
			fixture: "render-two-clusters.yaml",
			want:    want{"Progressing", "Unready resources: peerset-cluster-a, peerset-cluster-b"},
		},
		"RenderThreeClusters": {
			reason:  "Same for three clusters.",
			fixture: "render-three-clusters.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderDeliveryPeerSet": {
			reason:  "Same for PeerSets still being created.",
			fixture: "render-delivery-peerset.yaml",
			want:    want{"Progressing", "peerset-cluster-a"},
		},
		"RenderDualStack": {
			reason:  "A permanent skip does not make the mesh Degraded; unready Peers make it Progressing.",
			fixture: "render-dual-stack.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderForeignPeers": {
			reason:  "A conflict with a foreign Peer is reported in status, not as a health problem.",
			fixture: "render-foreign-peers.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderRoamingAndDiscovered": {
			reason:  "Roaming segments are normal.",
			fixture: "render-roaming-and-discovered.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderSharedHub": {
			reason:  "Two meshes sharing a hub do not overlap.",
			fixture: "render-shared-hub.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderLocationGranularity": {
			reason:  "Converged=False names the nodes the mesh waits for, which says more than the unready resources.",
			fixture: "render-location-granularity.yaml",
			want:    want{"Progressing", "1 node skipped (NodeNoWireguardIP): node-a6"},
		},
		"RenderSkipReasons": {
			reason:  "Nodes waiting for Kilo keep the mesh Progressing, whatever else is skipped.",
			fixture: "render-skip-reasons.yaml",
			want:    want{"Progressing", "NodeNoPublicKey"},
		},
		"RenderLeaderElection": {
			reason:  "A location waiting for Kilo's new leader keeps the mesh Progressing, naming the node.",
			fixture: "render-leader-election.yaml",
			want:    want{"Progressing", "1 node skipped (NodeNoWireguardIP): node-a6"},
		},
		"RenderStaleLeader": {
			reason:  "Nodes whose Kilo heartbeat is stale keep the mesh Progressing: they come back or are removed.",
			fixture: "render-stale-leader.yaml",
			want:    want{"Progressing", "NodeNotReady"},
		},
		"RenderNoInternalIP": {
			reason:  "A node of its own segment waiting for its WireGuard IP keeps the mesh Progressing.",
			fixture: "render-no-internal-ip.yaml",
			want:    want{"Progressing", "NodeNoWireguardIP"},
		},
		"RenderAllowedLocationIPs": {
			reason:  "A location range out of range is a warning, not a health problem.",
			fixture: "render-allowed-location-ips.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderForgedNode": {
			reason:  "Forged node data is withheld and reported, not a health problem of the mesh.",
			fixture: "render-forged-node.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderCopiedKey": {
			reason:  "A node waiting for its WireGuard IP, next to the copy of its key that is withheld, keeps the mesh Progressing.",
			fixture: "render-copied-key.yaml",
			want:    want{"Progressing", "NodeNoWireguardIP"},
		},
		"RenderSharedSegments": {
			reason:  "A mesh whose Peers are written once in SegmentSets is judged by its PeerSets, as any other: still being created, Progressing.",
			fixture: "render-shared-segments.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"RenderSharedServices": {
			reason:  "A mesh that shares Services, still being created, is Progressing like any other.",
			fixture: "render-shared-services.yaml",
			want:    want{"Progressing", "Unready resources"},
		},
		"UndeliveredShortly": {
			reason:  "Peers that cannot be written into a member for a short while keep the mesh Progressing, naming the member.",
			fixture: "undelivered.yaml",
			now:     "2026-11-22T01:05:00Z",
			want:    want{"Progressing", "cluster-b: 1 of 1 Peers cannot be written"},
		},
		"UndeliveredLong": {
			reason:  "Peers that cannot be written into a member for more than ten minutes degrade the mesh.",
			fixture: "undelivered.yaml",
			now:     "2026-11-22T01:10:01Z",
			want:    want{"Degraded", "no matches for kilo.squat.ai/v1alpha1"},
		},
		"RenderOverlapFreeze": {
			reason:  "Overlapping networks freeze the mesh: Degraded, although Crossplane says Ready.",
			fixture: "render-overlap-freeze.yaml",
			want:    want{"Degraded", "frozen, its networks overlap: spec.clusters[1].podCIDRs[0] 10.2.0.0/16 overlaps"},
		},
		"RenderCrossMeshOverlap": {
			reason:  "An overlap with another mesh of the namespace is Degraded too.",
			fixture: "render-cross-mesh-overlap.yaml",
			want:    want{"Degraded", "overlaps ClusterMesh tenant-b"},
		},
		"Healthy": {
			reason:  "Ready and Synced, converged and every member reachable: Healthy, with what the mesh holds.",
			fixture: "healthy.yaml",
			want:    want{"Healthy", "3 clusters, 12 Peers"},
		},
		"HealthyWithPermanentSkip": {
			reason:  "A node skipped for good (here a pod CIDR out of range) leaves the mesh Healthy, and the message counts it.",
			fixture: "healthy-skipped.yaml",
			want:    want{"Healthy", "2 clusters, 2 Peers, 1 node skipped"},
		},
		"ReadyButConverging": {
			reason:  "Converged=False keeps a Ready mesh Progressing.",
			fixture: "converging.yaml",
			want:    want{"Progressing", "SegmentNoLeader"},
		},
		"ReadyButObserving": {
			reason:  "ClustersReachable=Unknown keeps a Ready mesh Progressing until every member was observed.",
			fixture: "observing.yaml",
			want:    want{"Progressing", "waiting for the first observation of cluster-b"},
		},
		"FunctionFailed": {
			reason:  "Synced=False with an error is Degraded, with Crossplane's message.",
			fixture: "function-failed.yaml",
			want:    want{"Degraded", "cannot compose resources: the mesh needs a 4210 KiB response"},
		},
		"Paused": {
			reason:  "A paused ClusterMesh is Suspended, not Degraded.",
			fixture: "paused.yaml",
			want:    want{"Suspended", "paused via the pause annotation"},
		},
		"UnreachableBriefly": {
			reason:  "A member unreachable for 5 minutes keeps the mesh Progressing.",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:00:00Z",
			want:    want{"Progressing", "cannot observe cluster-c (since 2026-11-22T00:55:00Z)"},
		},
		"UnreachableExactlyTenMinutes": {
			reason:  "Ten minutes are still within the grace period.",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:00Z",
			want:    want{"Progressing", "cannot observe cluster-c"},
		},
		"UnreachableLonger": {
			reason:  "A second past ten minutes the mesh is Degraded.",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:01Z",
			want:    want{"Degraded", "cannot observe cluster-c (since 2026-11-22T00:55:00Z)"},
		},
		"UnreachableBrieflyEastOfUTC": {
			reason:  "The controller's time zone does not change the rule (UTC+05:30, within the grace period).",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:00Z",
			local:   east,
			want:    want{"Progressing", "cannot observe cluster-c"},
		},
		"UnreachableLongerEastOfUTC": {
			reason:  "The controller's time zone does not change the rule (UTC+05:30, past the grace period).",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:01Z",
			local:   east,
			want:    want{"Degraded", "cannot observe cluster-c"},
		},
		"UnreachableBrieflyWestOfUTC": {
			reason:  "The controller's time zone does not change the rule (UTC-08:00, within the grace period).",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:00Z",
			local:   west,
			want:    want{"Progressing", "cannot observe cluster-c"},
		},
		"UnreachableLongerWestOfUTC": {
			reason:  "The controller's time zone does not change the rule (UTC-08:00, past the grace period).",
			fixture: "render-unreachable-cluster.yaml",
			now:     "2026-11-22T01:05:01Z",
			local:   west,
			want:    want{"Degraded", "cannot observe cluster-c"},
		},
		"UnreachableAcrossNewYearBriefly": {
			reason:  "The grace period reaches back into the previous year correctly.",
			fixture: "unreachable-new-year.yaml",
			now:     "2027-01-01T00:05:00Z",
			local:   west,
			want:    want{"Progressing", "since 2026-12-31T23:55:00Z"},
		},
		"UnreachableAcrossNewYearLonger": {
			reason:  "An outage from the old year into the new one becomes Degraded after ten minutes.",
			fixture: "unreachable-new-year.yaml",
			now:     "2027-01-01T00:05:01Z",
			local:   east,
			want:    want{"Degraded", "since 2026-12-31T23:55:00Z"},
		},
		"UnreachableTimedByConditionBriefly": {
			reason:  "Without unreachableSince the condition's lastTransitionTime (00:57) times the outage.",
			fixture: "unreachable-no-since.yaml",
			now:     "2026-11-22T01:06:00Z",
			want:    want{"Progressing", "cannot observe cluster-c"},
		},
		"UnreachableTimedByConditionLonger": {
			reason:  "Without unreachableSince the condition's lastTransitionTime (00:57) times the outage.",
			fixture: "unreachable-no-since.yaml",
			now:     "2026-11-22T01:07:01Z",
			want:    want{"Degraded", "cannot observe cluster-c"},
		},
	}
	used := map[string]bool{}
	for _, tc := range cases {
		used[tc.fixture] = true
	}
	checkJudged(t, "", used)

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := "2026-11-22T01:00:00Z"
			if tc.now != "" {
				now = tc.now
			}
			local := time.UTC
			if tc.local != nil {
				local = tc.local
			}
			sb := sandbox{now: mustTime(t, now), local: local}
			status, message, err := sb.health(script, readObject(t, tc.fixture))
			if err != nil {
				t.Fatalf("%s\nhealth.lua on %s: %v", tc.reason, tc.fixture, err)
			}
			if status != tc.want.status || !strings.Contains(message, tc.want.message) {
				t.Errorf("%s\nhealth.lua on %s at %s: got %s %q, want %s with a message containing %q",
					tc.reason, tc.fixture, now, status, message, tc.want.status, tc.want.message)
			}
		})
	}
}

// checkJudged fails for every fixture of a folder of testdata that no case
// judges: used holds the fixtures' paths relative to testdata.
func checkJudged(t *testing.T, dir string, used map[string]bool) {
	t.Helper()
	fixtures, err := filepath.Glob(filepath.Join(testdataDir, dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		if rel, _ := filepath.Rel(testdataDir, f); !used[rel] {
			t.Errorf("no case of %s judges %s", t.Name(), f)
		}
	}
}

// TestSandbox pins the harness itself: were it more generous than Argo CD,
// a check that fails in Argo CD could pass here.
func TestSandbox(t *testing.T) {
	cases := map[string]struct {
		reason string
		script string
		want   string
	}{
		"NoStringLibrary": {
			reason: "Argo CD opens no string library for health checks from argocd-cm.",
			script: `return {status = "Healthy", message = type(string)}`,
			want:   "nil",
		},
		"NoGlobalOS": {
			reason: "Argo CD's os is reached only through require.",
			script: `return {status = "Healthy", message = type(os)}`,
			want:   "nil",
		},
		"RequireOS": {
			reason: "require(\"os\") gives time and date, nothing else.",
			script: `local o = require("os"); return {status = "Healthy", message = type(o.time) .. type(o.date) .. type(o.execute)}`,
			want:   "functionfunctionnil",
		},
		"NoIO": {
			reason: "Argo CD opens no io library.",
			script: `return {status = "Healthy", message = type(io)}`,
			want:   "nil",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, got, err := sandbox{now: time.Unix(0, 0), local: time.UTC}.health(tc.script, map[string]any{})
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if got != tc.want {
				t.Errorf("%s\ngot %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestConfigMap checks that the argocd-cm snippet carries every health
// check exactly.
func TestConfigMap(t *testing.T) {
	cm := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Data       map[string]string `json:"data"`
	}{}
	if err := yaml.UnmarshalStrict([]byte(readFile(t, argocdCM)), &cm); err != nil {
		t.Fatalf("%s: %v", argocdCM, err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata["name"] != "argocd-cm" {
		t.Errorf("%s is a %s named %v, want the ConfigMap argocd-cm", argocdCM, cm.Kind, cm.Metadata["name"])
	}
	checks := map[string]string{healthKey: healthLua}
	for _, m := range managedChecks {
		checks[m.key] = m.script
	}
	for key, script := range checks {
		got, ok := cm.Data[key]
		if !ok {
			t.Errorf("%s has no data key %s", argocdCM, key)
			continue
		}
		if want := readFile(t, script); got != want {
			t.Errorf("%s: data[%s] differs from %s; paste the file again, indented by four spaces", argocdCM, key, script)
		}
	}
	if len(cm.Data) != len(checks) {
		t.Errorf("%s holds %d keys, want %d", argocdCM, len(cm.Data), len(checks))
	}
}

// TestFixturesAreRenders checks that every render-<scenario>.yaml is the XR
// its scenario's expected.yaml holds, and that every scenario has one, so
// the health check is tried on what the function really reports.
func TestFixturesAreRenders(t *testing.T) {
	scenarios, err := os.ReadDir(renderDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range scenarios {
		if !s.IsDir() {
			continue
		}
		name := "render-" + s.Name() + ".yaml"
		want[name] = true
		t.Run(s.Name(), func(t *testing.T) {
			rendered := firstDocument(t, readFile(t, filepath.Join(renderDir, s.Name(), "expected.yaml")))
			fixture, err := os.ReadFile(filepath.Join(testdataDir, name))
			if err != nil {
				t.Fatalf("scenario %s has no fixture: copy the first document of its expected.yaml to %s/%s", s.Name(), testdataDir, name)
			}
			if !bytes.Equal(fixture, []byte(rendered)) {
				t.Errorf("%s/%s differs from the first document of %s/%s/expected.yaml: copy it again and check the cases of TestHealth",
					testdataDir, name, renderDir, s.Name())
			}
		})
	}
	fixtures, err := filepath.Glob(filepath.Join(testdataDir, "render-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		if !want[filepath.Base(f)] {
			t.Errorf("%s has no scenario in %s", f, renderDir)
		}
	}
}

// firstDocument returns the first YAML document of a stream, without its
// leading separator.
func firstDocument(t *testing.T, stream string) string {
	t.Helper()
	docs, err := yamldocs.Split([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no YAML document")
	}
	return string(docs[0])
}
