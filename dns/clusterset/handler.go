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

package clusterset

import (
	"context"
	"errors"
	"net"

	"github.com/miekg/dns"
)

// Name is the plugin's name, and its directive in a Corefile.
const Name = "clusterset"

var errNoNext = errors.New("no next plugin")

// A Next is the rest of a CoreDNS plugin chain: plugin.Handler's methods.
type Next interface {
	ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error)
	Name() string
}

// A Handler answers the zone, and the PTR questions of the addresses of
// headless endpoints; it passes every other question to Next.
type Handler struct {
	Zone Zone
	Next Next
}

// Name is the plugin's name.
func (h *Handler) Name() string { return Name }

// Ready tells CoreDNS's ready plugin whether the Index has synced.
func (h *Handler) Ready() bool { return h.Zone.Index.Synced() }

// ServeDNS answers one query. As in every CoreDNS plugin, a reply it
// writes itself comes with its rcode and no error.
func (h *Handler) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 || r.Question[0].Qclass != dns.ClassINET {
		return h.next(ctx, w, r)
	}
	q := r.Question[0]
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case dns.IsSubDomain(h.Zone.Origin, q.Name):
		res := h.Zone.LookupMax(q.Name, q.Qtype, maxRecords(w, r))
		m.Rcode, m.Answer, m.Ns, m.Extra = res.Rcode, res.Answer, res.Ns, res.Extra
	case q.Qtype == dns.TypePTR:
		rrs, ok := h.Zone.Reverse(q.Name)
		if !ok {
			return h.next(ctx, w, r)
		}
		m.Answer = rrs
	default:
		return h.next(ctx, w, r)
	}
	if err := w.WriteMsg(m); err != nil {
		return dns.RcodeServerFailure, err
	}
	return m.Rcode, nil
}

// minRecordBytes is the least an address or SRV record takes in a reply:
// a compressed name, type, class, TTL, length and 4 bytes of data.
const minRecordBytes = 16

// maxRecords is how many records of a kind the reply to r could carry:
// over UDP, the size the client says it reads (512 bytes without EDNS),
// over TCP, a whole DNS message. CoreDNS cuts the reply to that size; more
// records would be made only to be cut.
func maxRecords(w dns.ResponseWriter, r *dns.Msg) int {
	size := dns.MaxMsgSize
	if _, tcp := w.RemoteAddr().(*net.TCPAddr); !tcp {
		size = dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = max(int(o.UDPSize()), dns.MinMsgSize)
		}
	}
	return min(MaxRecords, size/minRecordBytes)
}

func (h *Handler) next(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if h.Next == nil {
		return dns.RcodeServerFailure, errNoNext
	}
	return h.Next.ServeDNS(ctx, w, r)
}
