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

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/miekg/dns"

	"github.com/kilomesh/kilomesh/internal/testing/wait"
)

// CoreDNSBinary is the CoreDNS build with the clusterset plugin, in the
// folder of the API servers.
const CoreDNSBinary = "coredns-mcs"

// CoreDNSSkipMessage explains how to run the tests that need it.
const CoreDNSSkipMessage = CoreDNSBinary + " is not in " + AssetsVar + ": build it with `test/tools/build.sh " + CoreDNSBinary + "` (make unit does)"

// CoreDNSPath returns the path of the CoreDNS build, or "" when it is not
// built.
func CoreDNSPath() string {
	p := filepath.Join(os.Getenv(AssetsVar), CoreDNSBinary)
	if _, err := os.Stat(p); err != nil { //nolint:gosec // G703: the folder the test runner names.
		return ""
	}
	return p
}

// A CoreDNS is a CoreDNS process serving clusterset.local on loopback.
type CoreDNS struct {
	// Addr is its host:port, over UDP and TCP.
	Addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
}

// Output returns what the process has logged so far.
func (c *CoreDNS) Output() string { return c.out.String() }

// StartCoreDNS runs the CoreDNS build until the test ends, answering
// clusterset.local from the API server that kubeconfig reaches. next are
// more directives of the server block, such as plugins that answer what
// clusterset passes on. It returns once CoreDNS's ready plugin says the
// watches have synced.
func StartCoreDNS(t testing.TB, kubeconfig []byte, next ...string) *CoreDNS {
	t.Helper()
	bin := CoreDNSPath()
	if bin == "" {
		t.Skip(CoreDNSSkipMessage)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeUDPPort()
	if err != nil {
		t.Fatal(err)
	}
	ready, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	corefile := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    ready 127.0.0.1:%d
    clusterset {
        kubeconfig %s
    }
%s}
`, port, ready, kc, directives(next))
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &CoreDNS{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &lockedBuffer{}}
	c.cmd = exec.CommandContext(context.Background(), bin, "-conf", cf) //nolint:gosec // G204: the project's own build.
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("CoreDNS logged:\n%s", c.Output())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/ready", ready)
	wait.Eventually(t.Context(), t, "CoreDNS ready", time.Minute, 50*time.Millisecond, func() (bool, error) {
		// The ready plugin can answer before the DNS listener is open:
		// CoreDNS serves once both are.
		err := get(url)
		if err == nil {
			err = query(c.Addr)
		}
		if err == nil {
			return true, nil
		}
		select {
		case <-exited:
			t.Fatalf("CoreDNS exited before it was ready: %s", c.cmd.ProcessState)
		default:
		}
		return false, err
	})
	return c
}

// directives writes directives of a server block, one a line.
func directives(ds []string) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("    " + d + "\n")
	}
	return b.String()
}

// query asks addr, over UDP, for the zone's schema version.
func query(addr string) error {
	m := new(dns.Msg)
	m.SetQuestion("dns-version.clusterset.local.", dns.TypeTXT)
	_, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, addr)
	return err
}

func get(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// freeUDPPort returns a loopback port free for UDP and TCP alike.
func freeUDPPort() (int, error) {
	for range 20 {
		pc, err := (&net.ListenConfig{}).ListenPacket(context.Background(), "udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port //nolint:forcetypeassert // A UDP listener's address.
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		_ = pc.Close()
		if err == nil {
			_ = ln.Close()
			return port, nil
		}
	}
	return 0, errors.New("cannot find a free loopback port for UDP and TCP")
}

func freeTCPPort() (int, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil //nolint:forcetypeassert // A TCP listener's address.
}

// lockedBuffer is a bytes.Buffer that a process and a test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
