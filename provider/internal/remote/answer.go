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
	"io"
	"net/http"
	"syscall"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// NoAnswerError is the error of a request whose connection the member's
// address accepted and then closed, or reset, before the API server said a
// word: what a load balancer or a forwarder in front of an API server that
// is down does.
//
// client-go takes such an error for a broken connection worth retrying: a
// GET up to ten times, a watch too, and a watch that fails every time
// becomes an empty watch without an error. A member behind a load balancer
// whose API server is down would then look like one that answers, for as
// long as it is down. Made into this error, the request fails at once and
// the member is reported unreachable.
type NoAnswerError struct {
	// reset is whether the connection was reset rather than closed.
	reset bool
}

// Error says what happened without the words client-go looks for.
func (e *NoAnswerError) Error() string {
	if e.reset {
		return "the member's address reset the connection without an answer"
	}
	return "the member's address closed the connection without an answer"
}

// answerOrFail returns a transport whose requests fail with a NoAnswerError
// where next's fail because the connection ended before any answer. The
// errors of a response's body (a watch that ends) are left as they are.
func answerOrFail(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, syscall.ECONNRESET):
			return resp, &NoAnswerError{reset: true}
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return resp, &NoAnswerError{}
		}
		return resp, err
	})
}
