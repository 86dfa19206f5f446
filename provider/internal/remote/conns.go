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

package remote

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const errStopped = "the watch of this cluster has stopped"

// conns dials the connections of one cluster and closes them all when the
// cluster is no longer used. client-go would otherwise share one transport
// among every client with the same TLS settings and keep its idle
// connections open long after the last watch of a cluster stopped.
type conns struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	closed bool
	open   map[*conn]struct{}
}

func newConns() *conns {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &conns{dial: d.DialContext, open: map[*conn]struct{}{}}
}

// DialContext opens a connection, unless the cluster is no longer used.
func (d *conns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, errors.New(errStopped)
	}
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		_ = c.Close()
		return nil, errors.New(errStopped)
	}
	tc := &conn{Conn: c, owner: d}
	d.open[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every open connection and refuses new ones.
func (d *conns) closeAll() {
	d.mu.Lock()
	d.closed = true
	open := d.open
	d.open = map[*conn]struct{}{}
	d.mu.Unlock()
	for c := range open {
		_ = c.Close()
	}
}

// count returns how many connections are open.
func (d *conns) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}

func (d *conns) forget(c *conn) {
	d.mu.Lock()
	delete(d.open, c)
	d.mu.Unlock()
}

// A conn is a connection that its cluster forgets once it is closed.
type conn struct {
	net.Conn

	owner *conns
	once  sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.owner.forget(c) })
	return c.Conn.Close()
}
