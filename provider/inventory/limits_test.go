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

package inventory

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kilomesh/kilomesh/internal/safetext"
)

func TestCut(t *testing.T) {
	type args struct {
		s   string
		max int
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
	}{
		"Short": {
			reason: "A value within its cap is kept as it is.",
			args:   args{s: "dc1", max: 3},
			want:   "dc1",
		},
		"Long": {
			reason: "A value over its cap is cut to the cap.",
			args:   args{s: "abcdef", max: 4},
			want:   "abcd",
		},
		"NeverMidRune": {
			reason: "A cut that would split a character ends before it.",
			args:   args{s: "ab€", max: 4},
			want:   "ab",
		},
		"WholeRune": {
			reason: "A character that fits whole is kept.",
			args:   args{s: "ab€c", max: 5},
			want:   "ab€",
		},
		"InvalidUTF8": {
			reason: "Invalid bytes never reach status: they become U+FFFD, even in a short value.",
			args:   args{s: "a\xffb", max: 64},
			want:   "a\uFFFDb",
		},
		"InvalidUTF8Cut": {
			reason: "A replacement character that does not fit whole is cut off.",
			args:   args{s: "ab\xff", max: 4},
			want:   "ab",
		},
		"Zero": {
			reason: "A cap of zero keeps nothing.",
			args:   args{s: "x", max: 0},
			want:   "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := safetext.Cut(tc.args.s, tc.args.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nCut(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCutList(t *testing.T) {
	type args struct {
		s   string
		max int
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
	}{
		"Short": {
			reason: "A list within its cap is kept as it is.",
			args:   args{s: "10.0.0.0/24,10.1.0.0/24", max: 64},
			want:   "10.0.0.0/24,10.1.0.0/24",
		},
		"WholeElements": {
			reason: "A cut inside an element drops that element whole: 10.1.0.0/2 would be a wider prefix.",
			args:   args{s: "10.0.0.0/24,10.1.0.0/24", max: 22},
			want:   "10.0.0.0/24",
		},
		"CutAtComma": {
			reason: "A cut right before a comma keeps the element before it.",
			args:   args{s: "10.0.0.0/24,10.1.0.0/24", max: 11},
			want:   "10.0.0.0/24",
		},
		"FirstTooLong": {
			reason: "A first element longer than the cap leaves nothing.",
			args:   args{s: "10.0.0.0/24,10.1.0.0/24", max: 8},
			want:   "",
		},
		"InvalidUTF8": {
			reason: "Invalid bytes become U+FFFD in a list too; a list that fits is not cut.",
			args:   args{s: "a\xff,b", max: 64},
			want:   "a\uFFFD,b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := safetext.CutList(tc.args.s, tc.args.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nCutList(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzCut checks what every cut value must be: valid UTF-8, within the
// cap, the start of the (repaired) value, and a fixed point of a second cut.
func FuzzCut(f *testing.F) {
	f.Add("ab€c", 4, false)
	f.Add("a\xff,b,c", 5, true)
	f.Add("10.0.0.0/24,10.1.0.0/24", 22, true)
	f.Fuzz(func(t *testing.T, s string, maxBytes int, list bool) {
		if maxBytes < 0 || maxBytes > 1<<16 {
			t.Skip()
		}
		fld := Field{Max: maxBytes, List: list}
		got := fld.Cut(s)
		repaired := strings.ToValidUTF8(s, string(utf8.RuneError))
		switch {
		case !utf8.ValidString(got):
			t.Errorf("safetext.Cut(%q, %d) = %q: invalid UTF-8", s, maxBytes, got)
		case len(got) > maxBytes:
			t.Errorf("safetext.Cut(%q, %d) = %q: %d bytes", s, maxBytes, got, len(got))
		case !strings.HasPrefix(repaired, got):
			t.Errorf("safetext.Cut(%q, %d) = %q: not a start of %q", s, maxBytes, got, repaired)
		case fld.Cut(got) != got:
			t.Errorf("safetext.Cut(%q, %d) = %q: a second cut changes it", s, maxBytes, got)
		case list && len(got) > 0 && len(got) < len(repaired) && repaired[len(got)] != ',':
			t.Errorf("safetext.CutList(%q, %d) = %q: ends inside an element", s, maxBytes, got)
		}
	})
}
