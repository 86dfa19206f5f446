package stack

import (
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProcAddr(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   netip.AddrPort
		err    bool
	}{
		"Loopback": {
			reason: "An IPv4 address is one little-endian word.",
			in:     "0100007F:1F90",
			want:   netip.MustParseAddrPort("127.0.0.1:8080"),
		},
		"Any": {
			reason: "0.0.0.0 is what a socket bound to every address shows.",
			in:     "00000000:0035",
			want:   netip.MustParseAddrPort("0.0.0.0:53"),
		},
		"IPv6Loopback": {
			reason: "An IPv6 address is four little-endian words.",
			in:     "00000000000000000000000001000000:0050",
			want:   netip.MustParseAddrPort("[::1]:80"),
		},
		"IPv4MappedIPv6": {
			reason: "An IPv4 client of an IPv6 socket shows as ::ffff:a.b.c.d.",
			in:     "0000000000000000FFFF00000201000A:C350",
			want:   netip.MustParseAddrPort("[::ffff:10.0.1.2]:50000"),
		},
		"NoPort": {
			reason: "An entry without a port is refused.",
			in:     "0100007F",
			err:    true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := procAddr(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s\nprocAddr(%q): error %v, want one: %v", tc.reason, tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("%s\nprocAddr(%q): -want +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

// TestStackOwned runs lib.sh's stack_owned, as down.sh does (set -euo
// pipefail), against a process whose environment is large and carries the
// marker first: the check must hold every time, or down.sh leaves the
// process running.
func TestStackOwned(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	start := func(marker string) int {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "sleep", "600")
		// 100 KB after the marker: far more than one write of a pipe's writer.
		cmd.Env = []string{"KILOMESH_STACK_DIR=" + marker, "BIG=" + strings.Repeat("a", 100_000)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd.Process.Pid
	}
	ours, prefix, foreign := start(dir), start(dir[:len(dir)-1]), start(other)
	script := `set -euo pipefail
. test/stack/lib.sh
n=0
for i in $(seq 200); do stack_owned "$1" && n=$((n+1)); done
stack_owned "$2" && echo "prefix owned"
stack_owned "$3" && echo "foreign owned"
echo "$n"`
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script, "bash", strconv.Itoa(ours), strconv.Itoa(prefix), strconv.Itoa(foreign))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "STACK_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "200" {
		t.Errorf("stack_owned on the stack's own process (large environment, marker first), 200 times, then a process of a prefix of its folder and one of another folder: want \"200\" (and neither of the others owned), got %q", got)
	}
}
