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

package safetext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"sigs.k8s.io/yaml"
)

func TestSanitize(t *testing.T) {
	cases := map[string]struct {
		reason     string
		in         string
		want       string
		wantLines  string
		sameString bool
	}{
		"Plain": {
			reason: "Printable ASCII is kept as it is.",
			in:     "cannot list nodes: 403 Forbidden", want: "cannot list nodes: 403 Forbidden", wantLines: "cannot list nodes: 403 Forbidden",
		},
		"ESC": {
			reason: "ESC starts a terminal's escape sequence: it is escaped, the rest of the sequence is harmless text.",
			in:     "a\x1b[2Jb\x1b]0;owned\x07", want: `a\u001b[2Jb\u001b]0;owned\u0007`, wantLines: `a\u001b[2Jb\u001b]0;owned\u0007`,
		},
		"C0": {
			reason: "Every C0 character is escaped; line feed and tab only by Sanitize, which makes one line.",
			in:     "\x00\x01\r\n\t\x1f", want: `\u0000\u0001\u000d\u000a\u0009\u001f`, wantLines: "\\u0000\\u0001\\u000d\n\t\\u001f",
		},
		"DEL": {
			reason: "DEL is a control character.",
			in:     "a\x7fb", want: `a\u007fb`, wantLines: `a\u007fb`,
		},
		"C1": {
			reason: "C1 characters (CSI U+009B acts as ESC [ in some terminals) are escaped.",
			in:     "a\u009b31mb\u0085c", want: `a\u009b31mb\u0085c`, wantLines: `a\u009b31mb\u0085c`,
		},
		"Bidi": {
			reason: "Bidirectional overrides and isolates reorder what is shown: escaped.",
			in:     "user\u202egnp.exe\u2066x\u2069", want: `user\u202egnp.exe\u2066x\u2069`, wantLines: `user\u202egnp.exe\u2066x\u2069`,
		},
		"LineSeparators": {
			reason: "U+2028 and U+2029 break lines as a line feed does.",
			in:     "a\u2028b\u2029c", want: `a\u2028b\u2029c`, wantLines: `a\u2028b\u2029c`,
		},
		"InvalidUTF8": {
			reason: "An invalid byte becomes U+FFFD; a raw 0x9B is never passed on as an 8-bit CSI.",
			in:     "a\x9b[31mb\xff", want: "a\uFFFD[31mb\uFFFD", wantLines: "a\uFFFD[31mb\uFFFD",
		},
		"Unicode": {
			reason: "Printable characters beyond ASCII are kept.",
			in:     "größe 🙂 名前", want: "größe 🙂 名前", wantLines: "größe 🙂 名前",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Sanitize(tc.in); got != tc.want {
				t.Errorf("\n%s\nSanitize(%q): want %q, got %q", tc.reason, tc.in, tc.want, got)
			}
			if got := SanitizeLines(tc.in); got != tc.wantLines {
				t.Errorf("\n%s\nSanitizeLines(%q): want %q, got %q", tc.reason, tc.in, tc.wantLines, got)
			}
			got := Sanitize(tc.in)
			for _, r := range got {
				if Control(r) {
					t.Errorf("\n%s\nSanitize(%q) = %q holds control character %U", tc.reason, tc.in, got, r)
				}
			}
			if !utf8.ValidString(got) {
				t.Errorf("\n%s\nSanitize(%q) = %q is not valid UTF-8", tc.reason, tc.in, got)
			}
			if again := Sanitize(got); again != got {
				t.Errorf("\n%s\nSanitize is not idempotent: %q, then %q", tc.reason, got, again)
			}
		})
	}
}

func TestCut(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		n      int
		want   string
	}{
		"Short":        {reason: "A string within the bound is kept.", in: "10.4.0.1", n: 20, want: "10.4.0.1"},
		"Cut":          {reason: "A long string is cut, without a marker.", in: "abcdefghij", n: 4, want: "abcd"},
		"RuneBoundary": {reason: "A cut never splits a character: é is two bytes.", in: "abcé", n: 4, want: "abc"},
		"Invalid":      {reason: "Invalid UTF-8 becomes U+FFFD before the cut.", in: "a\xffb", n: 10, want: "a\uFFFDb"},
		"Zero":         {reason: "A bound of 0 keeps nothing.", in: "abc", n: 0, want: ""},
		"KeepsControl": {reason: "Cut bounds data; it does not sanitise.", in: "a\x1bb", n: 10, want: "a\x1bb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Cut(tc.in, tc.n); got != tc.want {
				t.Errorf("\n%s\nCut(%q, %d): want %q, got %q", tc.reason, tc.in, tc.n, tc.want, got)
			}
		})
	}
}

// TestCutCopies pins that a string Cut shortens does not keep the string
// it was cut from in memory: a member's 1 MiB value cut to 64 bytes must
// hold 64 bytes, not 1 MiB.
func TestCutCopies(t *testing.T) {
	long := strings.Repeat("a,", 1<<19)
	inside := func(s string) bool {
		start := uintptr(unsafe.Pointer(unsafe.StringData(long)))
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= start && p < start+uintptr(len(long))
	}
	if got := Cut(long, 64); len(got) != 64 || inside(got) {
		t.Errorf("Cut(1 MiB, 64): %d bytes, inside the original: %t; want 64 bytes of a copy", len(got), inside(got))
	}
	if got := CutList(long, 64); len(got) != 63 || inside(got) {
		t.Errorf("CutList(1 MiB, 64): %d bytes, inside the original: %t; want 63 bytes of a copy", len(got), inside(got))
	}
	if short := "abc"; Cut(short, 64) != short {
		t.Error("Cut: a string within the bound is kept")
	}
}

func TestCutList(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		n      int
		want   string
	}{
		"Whole":       {reason: "A list within the bound is kept.", in: "10.0.0.0/8,10.1.0.0/16", n: 40, want: "10.0.0.0/8,10.1.0.0/16"},
		"AtComma":     {reason: "A cut at a comma keeps the elements before it.", in: "10.0.0.0/8,10.1.0.0/16", n: 10, want: "10.0.0.0/8"},
		"MidElement":  {reason: "A cut inside an element drops it: 10.1.0.0/1 would be a wider prefix.", in: "10.0.0.0/8,10.1.0.0/16", n: 20, want: "10.0.0.0/8"},
		"NoWholeElem": {reason: "Nothing whole fits: nothing is kept.", in: "10.0.0.0/8", n: 5, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CutList(tc.in, tc.n); got != tc.want {
				t.Errorf("\n%s\nCutList(%q, %d): want %q, got %q", tc.reason, tc.in, tc.n, tc.want, got)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		n      int
		want   string
	}{
		"Short":         {reason: "A string within the limit is kept.", in: "10.4.0.1/16", n: 20, want: "10.4.0.1/16"},
		"Cut":           {reason: "A long string is cut and marked.", in: "abcdefghij", n: 8, want: "abcde..."},
		"RuneBoundary":  {reason: "A cut never splits a character: é is two bytes.", in: "abcdéfgh", n: 8, want: "abcd..."},
		"InvalidUTF8":   {reason: "Invalid UTF-8 is replaced, so status and results can be marshalled.", in: "ab\xffcd", n: 20, want: "ab\uFFFDcd"},
		"TinyLimit":     {reason: "A limit below the marker still yields valid text.", in: "ééé", n: 2, want: "..."},
		"FourByteRunes": {reason: "Emoji are four bytes: the cut lands before one.", in: "🙂🙂🙂", n: 9, want: "🙂..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tc.in, tc.n)
			if got != tc.want {
				t.Errorf("\n%s\nTruncate(%q, %d): want %q, got %q", tc.reason, tc.in, tc.n, tc.want, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("\n%s\nTruncate(%q, %d) = %q is not valid UTF-8", tc.reason, tc.in, tc.n, got)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	// The escape is counted in the bound: a message of control characters
	// cannot grow past it.
	in := strings.Repeat("\x1b", 100)
	got := Message(in, 40)
	if len(got) > 40 {
		t.Errorf("Message(100 x ESC, 40): %d bytes, want at most 40: %q", len(got), got)
	}
	if strings.ContainsRune(got, 0x1b) {
		t.Errorf("Message(100 x ESC, 40) = %q holds ESC", got)
	}
}

func TestWriter(t *testing.T) {
	cases := map[string]struct {
		reason string
		writes []string
		want   string
	}{
		"Lines": {
			reason: "Line feeds and tabs pass; ESC and CR are escaped.",
			writes: []string{"a\tb\n", "\x1b[31mred\r\n"},
			want:   "a\tb\n\\u001b[31mred\\u000d\n",
		},
		"SplitC1": {
			reason: "A C1 character split between two writes (0xC2 0x9B) is still escaped.",
			writes: []string{"x\xc2", "\x9b31m"},
			want:   `x\u009b31m`,
		},
		"SplitPrintable": {
			reason: "A printable character split between writes is passed whole.",
			writes: []string{"gr\xc3", "\xb6\xc3", "\x9fe"},
			want:   "größe",
		},
		"DanglingAtEnd": {
			reason: "A character that never ends becomes U+FFFD on Flush.",
			writes: []string{"a\xe2\x80"},
			want:   "a\uFFFD",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b)
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("\n%s\nWrite(%q) = %d, %v; want %d, nil", tc.reason, s, n, err, len(s))
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("\n%s\nwrote %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestWriterKeepsEncodings pins that JSON and YAML pass through a Writer as
// documents that decode to what they held: the escapes it writes are those
// of both.
func TestWriterKeepsEncodings(t *testing.T) {
	v := map[string]string{"message": "a\x1b[2J\x7f\u009b\u202eb\nc"}
	cases := map[string]struct {
		reason string
		encode func(any) ([]byte, error)
		decode func([]byte, any) error
	}{
		"JSON": {reason: "encoding/json leaves DEL, C1 and bidi raw; \\uXXXX is its own escape.", encode: json.Marshal, decode: json.Unmarshal},
		"YAML": {
			reason: "A YAML parser refuses raw DEL and C1: YAML made from sanitised JSON holds them as escapes.",
			encode: func(v any) ([]byte, error) {
				b, err := json.Marshal(v)
				if err != nil {
					return nil, err
				}
				return yaml.JSONToYAML([]byte(SanitizeLines(string(b))))
			},
			decode: func(b []byte, v any) error { return yaml.Unmarshal(b, v) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := tc.encode(v)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			w := NewWriter(&b)
			if _, err := w.Write(raw); err != nil {
				t.Fatal(err)
			}
			for _, r := range b.String() {
				if Control(r) && r != '\n' {
					t.Errorf("\n%s\noutput holds control character %U: %q", tc.reason, r, b.String())
				}
			}
			got := map[string]string{}
			if err := tc.decode(b.Bytes(), &got); err != nil {
				t.Fatalf("\n%s\ncannot decode what the Writer wrote: %v\n%s", tc.reason, err, b.String())
			}
			if got["message"] != v["message"] {
				t.Errorf("\n%s\ndecoded %q, want %q", tc.reason, got["message"], v["message"])
			}
		})
	}
}
