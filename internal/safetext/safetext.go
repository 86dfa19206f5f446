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

// Package safetext cuts and sanitises text that kilomesh did not write: what
// a member's API server says, what a node's owner writes into its
// annotations, what a member's user names an object. Such text reaches
// status, conditions, events, logs, metric labels and a terminal, so every
// such text passes through here: it is cut to a bound, it is valid UTF-8,
// and, where a person reads it, it holds no control character.
//
// A control character is one a terminal or a reader acts on instead of
// showing it: C0 (U+0000 to U+001F; ESC among them starts a terminal's
// escape sequences), DEL (U+007F), C1 (U+0080 to U+009F; CSI among them),
// and the Unicode formatting characters that reorder or break what is
// shown (the bidirectional embeddings, overrides and isolates, U+202A to
// U+202E and U+2066 to U+2069, and the line and paragraph separators
// U+2028 and U+2029). Each is written as the six characters \uXXXX, an
// escape that JSON and YAML read as the character itself, so that output
// in either stays what it was, only shown safely.
//
// The package depends on nothing but the standard library: the function,
// the provider and the plugin all use it.
package safetext

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Ellipsis marks text that Truncate cut.
const Ellipsis = "..."

// Cut returns s as valid UTF-8 of at most maxBytes bytes. Invalid bytes
// become U+FFFD, and a cut never splits a character: what is published
// must survive JSON and protobuf encoding unchanged. Cut keeps control
// characters: it bounds data, such as an annotation's value, that is
// checked where it is read.
//
// A string that Cut shortens is a copy: a part of s would keep all of s in
// memory, and a bound on what is kept must bound what is held.
func Cut(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if end := cutAt(s, maxBytes); end < len(s) {
		return strings.Clone(s[:end])
	}
	return s
}

// cutAt returns the length of the longest start of the valid UTF-8 s that
// holds whole characters only and at most maxBytes bytes.
func cutAt(s string, maxBytes int) int {
	if len(s) <= maxBytes {
		return len(s)
	}
	if maxBytes <= 0 {
		return 0
	}
	end := maxBytes
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return end
}

// CutList returns a comma-separated list as valid UTF-8 of at most
// maxBytes bytes, made of whole elements only: an element that lost its
// last characters could still parse, as another value (a prefix that lost
// a digit of its length is a wider one). Like Cut, it copies what it
// shortens.
func CutList(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	end := cutAt(s, maxBytes)
	if end == len(s) {
		return s
	}
	if s[end] != ',' {
		end = max(strings.LastIndexByte(s[:end], ','), 0)
	}
	return strings.Clone(s[:end])
}

// Truncate cuts s to at most n bytes on a character boundary, marking the
// cut with Ellipsis, and replaces invalid UTF-8: the result can always be
// marshalled into status, events and results. Below len(Ellipsis) bytes
// the result is Ellipsis alone.
func Truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, string(utf8.RuneError))
	}
	if len(s) <= n {
		return s
	}
	return s[:cutAt(s, n-len(Ellipsis))] + Ellipsis
}

// Message is how text that kilomesh did not write becomes part of a
// message a person reads (a condition, an event, a status message, a
// warning): sanitised, then truncated to at most n bytes.
func Message(s string, n int) string {
	return Truncate(Sanitize(s), n)
}

// Sanitize returns s as valid UTF-8 with every control character written
// as \uXXXX, line breaks and tabs too: the result is one line.
func Sanitize(s string) string { return sanitize(s, false) }

// SanitizeLines is Sanitize but for line feeds and tabs, which it keeps:
// for text laid out in lines, such as a terminal's.
func SanitizeLines(s string) string { return sanitize(s, true) }

// Control tells whether a character is a control character that Sanitize
// escapes (see the package's documentation).
func Control(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// clean tells whether s needs no change: printable ASCII, with line feeds
// and tabs if lines.
func clean(s string, lines bool) bool {
	for i := range len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			continue
		}
		if lines && (c == '\n' || c == '\t') {
			continue
		}
		return false
	}
	return true
}

func sanitize(s string, lines bool) string {
	if clean(s, lines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case Control(r):
			writeEscape(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

const hex = "0123456789abcdef"

// writeEscape writes r, at most U+FFFF, as \uXXXX.
func writeEscape(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xf])
	}
}

// A Writer passes what is written to it on with SanitizeLines applied, for
// output a terminal shows. A character split between two writes is
// sanitised whole; Flush writes what is left of one that never ended.
type Writer struct {
	w       io.Writer
	pending []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sanitises p and writes it on. It reports len(p) when the write on
// succeeded, whatever the length of what was written.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	if len(w.pending) > 0 {
		p = append(w.pending, p...)
		w.pending = nil
	}
	// Keep an incomplete character at the end for the next write.
	if k := incompleteTail(p); k > 0 {
		w.pending = append([]byte(nil), p[len(p)-k:]...)
		p = p[:len(p)-k]
	}
	if len(p) == 0 {
		return n, nil
	}
	s := string(p)
	if clean(s, true) {
		_, err := w.w.Write(p)
		return n, err
	}
	_, err := io.WriteString(w.w, SanitizeLines(s))
	return n, err
}

// Flush writes what is left of a character that never ended, as U+FFFD.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	w.pending = nil
	_, err := io.WriteString(w.w, string(utf8.RuneError))
	return err
}

// incompleteTail returns how many bytes at the end of p start a UTF-8
// character that p does not hold whole, 0 if none.
func incompleteTail(p []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c < utf8.RuneSelf {
			return 0 // ASCII: whatever came before it is whole
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}
