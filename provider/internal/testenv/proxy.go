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
	"context"
	"io"
	"net"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	kilov1alpha1 "github.com/kilomesh/kilomesh/apis/kilo/v1alpha1"
)

var metav1CreateOptions = metav1.CreateOptions{}

func schemeWithKilo() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, kilov1alpha1.AddToScheme(s)
}

// A Proxy forwards TCP connections from a loopback port to a target. Cut
// makes the target unreachable (connections refused, open ones closed);
// Drop makes it answer nothing the way a load balancer or a forwarder does
// in front of a server that is down (connections accepted and closed at
// once, open ones closed); Restore makes it reachable again on the same
// port.
type Proxy struct {
	ctx    context.Context
	target string
	addr   string

	mu       sync.Mutex
	ln       net.Listener
	dropping bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// NewProxy listens on a random loopback port and forwards to target until
// ctx is done or the proxy is closed.
func NewProxy(ctx context.Context, target string) (*Proxy, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ctx: ctx, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	dropping := p.dropping
	p.mu.Unlock()
	if dropping {
		_ = c.Close()
		return
	}
	t, err := (&net.Dialer{}).DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, t) {
		_ = c.Close()
		_ = t.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
	_ = c.Close()
	_ = t.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	p.mu.Unlock()
}

func (p *Proxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, x := range c {
		p.conns[x] = struct{}{}
	}
	return true
}

// Cut stops listening and closes every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	p.wg.Wait()
}

// Drop keeps listening but closes every connection, open and new, without
// a byte of the target's.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropping = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Restore forwards again: after Drop at once, after Cut on the same port.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	dropped, listening := p.dropping, p.ln != nil
	p.dropping = false
	p.mu.Unlock()
	if dropped && listening {
		return nil
	}
	ln, err := (&net.ListenConfig{}).Listen(p.ctx, "tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Open returns how many connections the proxy forwards now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Each forwarded connection is tracked on both of its sides.
	return len(p.conns) / 2
}

// Close stops the proxy for good.
func (p *Proxy) Close() { p.Cut() }
