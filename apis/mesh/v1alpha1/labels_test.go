package v1alpha1

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

var hashSuffix = regexp.MustCompile(`-[0-9a-f]{8}$`)

func TestLabelValue(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string // the kept part; the whole value when not hashed
		hashed bool
	}{
		"Short":   {reason: "A short value is kept.", in: "prod", want: "prod"},
		"Max":     {reason: "63 characters are kept.", in: strings.Repeat("v", 63), want: strings.Repeat("v", 63)},
		"TooLong": {reason: "64 characters are cut and hashed.", in: strings.Repeat("v", 64), want: strings.Repeat("v", 54), hashed: true},
		"CutAtDash": {
			reason: "A cut that ends in a dash or dot drops it: a label value ends in an alphanumeric.",
			in:     strings.Repeat("v", 52) + "-.-" + strings.Repeat("w", 20),
			want:   strings.Repeat("v", 52), hashed: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := LabelValue(tc.in)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("\n%s\nLabelValue(%q) = %q is not a label value: %v", tc.reason, tc.in, got, errs)
			}
			if tc.hashed {
				if !hashSuffix.MatchString(got) {
					t.Fatalf("\n%s\nLabelValue(...) = %q: want a hash suffix", tc.reason, got)
				}
				got = hashSuffix.ReplaceAllString(got, "")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nLabelValue(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	if a, b := LabelValue(strings.Repeat("v", 70)+"1"), LabelValue(strings.Repeat("v", 70)+"2"); a == b {
		t.Errorf("Two long values equal up to the cut differ by their hash: both %q", a)
	}
}
