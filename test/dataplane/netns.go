package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/run/netns"

const (
	errIP       = "ip %s: %w: %s"
	errNetns    = "cannot enter network namespace %s: %w"
	errNetnsOut = "cannot return from network namespace %s: %w"
)

// ipCmd runs iproute2's ip.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput() //nolint:gosec // G204: ip with the harness's own arguments
	if err != nil {
		return fmt.Errorf(errIP, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipBatch runs several ip commands in one process, in network namespace ns
// (the host's when empty), and stops at the first that fails (unless told
// -force).
func ipBatch(ctx context.Context, ns string, cmds []string, flags ...string) error {
	if len(cmds) == 0 {
		return nil
	}
	args := append(slices.Clone(flags), "-batch", "-")
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	c := exec.CommandContext(ctx, "ip", args...) //nolint:gosec // G204: ip with the harness's own arguments
	c.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf(errIP, strings.Join(args, " ")+" <<< "+strings.Join(cmds, "; "), err, bytes.TrimSpace(out))
	}
	return nil
}

// netnsExists tells whether a named network namespace exists.
func netnsExists(ns string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, ns))
	return err == nil
}

// inNetns runs f on an OS thread that is in network namespace ns: sockets
// f opens stay in that namespace, and /proc/sys/net is that namespace's.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf(errNetns, ns, err)
	}
	defer self.Close()
	target, err := os.Open(filepath.Join(netnsDir, ns)) //nolint:gosec // a namespace of the harness
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf(errNetns, ns, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf(errNetns, ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so Go ends it with this goroutine
		// instead of running other goroutines in the wrong namespace.
		return fmt.Errorf(errNetnsOut, ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// sysctls writes /proc/sys/net settings in network namespace ns, e.g.
// "ipv4/ip_forward": "1".
func sysctls(ns string, kv [][2]string) error {
	return inNetns(ns, func() error {
		for _, x := range kv {
			p := "/proc/sys/net/" + x[0]
			if err := os.WriteFile(p, []byte(x[1]), 0o644); err != nil { //nolint:gosec // sysctl files
				return fmt.Errorf("cannot set %s in %s: %w", p, ns, err)
			}
		}
		return nil
	})
}

// readSysctl reads a /proc/sys/net setting in network namespace ns.
func readSysctl(ns, key string) (string, error) {
	var v string
	err := inNetns(ns, func() error {
		b, err := os.ReadFile("/proc/sys/net/" + key) //nolint:gosec // a sysctl file
		if err != nil {
			return fmt.Errorf("cannot read net.%s in %s: %w", strings.ReplaceAll(key, "/", "."), ns, err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

// Requirements says why the harness cannot run here, or nothing: it needs
// root (network namespaces, links, routes), /dev/net/tun (wireguard-go's
// interfaces) and iproute2's ip.
func Requirements() error {
	var miss []string
	if os.Geteuid() != 0 {
		miss = append(miss, "root (it creates network namespaces, links and routes)")
	}
	if fi, err := os.Stat("/dev/net/tun"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		miss = append(miss, "/dev/net/tun (wireguard-go's interfaces are TUN devices)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		miss = append(miss, "iproute2's ip on PATH")
	}
	if len(miss) > 0 {
		return fmt.Errorf("the data-plane harness cannot run here: it needs %s", strings.Join(miss, ", "))
	}
	return nil
}
