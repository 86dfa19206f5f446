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
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kilomesh/kilomesh/internal/safetext"
)

// Bounds on the responses of a member's API server, which may send
// anything. client-go reads a whole response into memory before it decodes
// it, and a JSON watch event whole too; a protobuf watch event it already
// bounds, to 16 MiB.
const (
	// MaxResponseBytes bounds the body of every response but a watch: a
	// page of a list (see Limits.PageSize), a Peer written. A page of 100
	// Nodes of a real cluster takes about 1 MB.
	MaxResponseBytes = 64 << 20
	// MaxEventBytes bounds one event of a JSON watch (Peers), as client-go
	// bounds a protobuf one.
	MaxEventBytes = 16 << 20
)

const (
	errFmtResponseTooLarge = "the response of the cluster is larger than %d MiB, more than provider-kilomesh reads"
	errFmtEventTooLarge    = "an event of the cluster's watch is larger than %d MiB, more than provider-kilomesh reads"
)

// limitBodies returns a transport whose responses fail once they are
// larger than MaxResponseBytes, or, for a JSON watch, once one of its
// events is larger than MaxEventBytes. The reader then returns an error
// instead of the rest: the request fails, naming the bound.
func limitBodies(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || resp.Body == nil {
			return resp, err
		}
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			if !strings.Contains(resp.Header.Get("Content-Type"), "protobuf") {
				resp.Body = &eventLimited{ReadCloser: resp.Body, limit: MaxEventBytes}
			}
			return resp, nil
		}
		resp.Body = &bodyLimited{ReadCloser: resp.Body, left: MaxResponseBytes}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// bodyLimited fails a body of more than left bytes.
type bodyLimited struct {
	io.ReadCloser

	left int64
	over bool
}

func (b *bodyLimited) Read(p []byte) (int, error) {
	if b.over {
		return 0, errors.Errorf(errFmtResponseTooLarge, MaxResponseBytes>>20)
	}
	// Read one byte past the bound, to tell a body of exactly the bound
	// from a larger one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		b.over = true
		return int(b.left), errors.Errorf(errFmtResponseTooLarge, MaxResponseBytes>>20)
	}
	b.left -= int64(n)
	return n, err
}

// eventLimited fails a stream of newline-delimited JSON events once one of
// them is longer than limit: the API server ends every JSON event with a
// newline.
type eventLimited struct {
	io.ReadCloser

	limit, run int
	over       bool
}

func (e *eventLimited) Read(p []byte) (int, error) {
	if e.over {
		return 0, errors.Errorf(errFmtEventTooLarge, e.limit>>20)
	}
	n, err := e.ReadCloser.Read(p)
	for chunk := p[:n]; ; {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			e.run += len(chunk)
			break
		}
		if e.run+i > e.limit {
			e.run += i
			break
		}
		e.run = 0
		chunk = chunk[i+1:]
	}
	if e.run > e.limit {
		e.over = true
		return 0, errors.Errorf(errFmtEventTooLarge, e.limit>>20)
	}
	return n, err
}

// MaxErrorBytes bounds the text of an error that carries what a member
// said: it becomes a condition's message, an event and a log line.
const MaxErrorBytes = 1024

// CutError returns err with its text sanitised (a member's API server may
// send control characters, which would reach a terminal through an event
// or a condition) and cut to MaxErrorBytes on a character boundary, or err
// itself when its text needs neither. The cut error still unwraps to err,
// so that what it is can be told.
func CutError(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	msg := cutText(text)
	if msg == text {
		return err
	}
	return &cutError{err: err, msg: msg}
}

// cutText is the text of a member as an error carries it: sanitised, and
// cut to MaxErrorBytes.
func cutText(s string) string {
	s = safetext.Sanitize(s)
	if len(s) > MaxErrorBytes {
		s = safetext.Cut(s, MaxErrorBytes-len(cutMark)) + cutMark
	}
	return s
}

// cutMark ends a cut error's text.
const cutMark = " [cut]"

type cutError struct {
	err error
	msg string
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }
