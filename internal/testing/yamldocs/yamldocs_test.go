package yamldocs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	cases := map[string]struct {
		reason  string
		stream  string
		want    []string
		wantErr bool
	}{
		"One": {
			reason: "A stream without a separator is one document.",
			stream: "kind: A\n",
			want:   []string{"kind: A\n"},
		},
		"LeadingSeparator": {
			reason: "A leading separator starts the first document and is not part of it.",
			stream: "---\nkind: A\n---\nkind: B\n",
			want:   []string{"kind: A\n", "kind: B\n"},
		},
		"SeparatorWithComment": {
			reason: "A separator may carry a comment.",
			stream: "kind: A\n--- # the second\nkind: B\n",
			want:   []string{"kind: A\n", "kind: B\n"},
		},
		"SeparatorInBlockScalar": {
			reason: "An indented --- inside a block scalar is content, not a separator.",
			stream: "kind: A\nscript: |\n  echo one\n  ---\n  echo two\n---\nkind: B\n",
			want:   []string{"kind: A\nscript: |\n  echo one\n  ---\n  echo two\n", "kind: B\n"},
		},
		"SeparatorInString": {
			reason: "A --- inside a string, even after a newline escape, is content.",
			stream: "kind: A\nnote: \"a\\n---\\nb\"\nother: x---y\n",
			want:   []string{"kind: A\nnote: \"a\\n---\\nb\"\nother: x---y\n"},
		},
		"EmptyDocuments": {
			reason: "Documents of blank lines and comments only are left out.",
			stream: "# a header\n---\n---\n\n---\nkind: A\n---\n# nothing\n",
			want:   []string{"kind: A\n"},
		},
		"NoFinalNewline": {
			reason: "The last document needs no newline at its end: the reader ends its last line.",
			stream: "kind: A\n---\nkind: B",
			want:   []string{"kind: A\n", "kind: B\n"},
		},
		"Empty": {
			reason: "An empty stream has no document.",
			stream: "",
		},
		"BadSeparator": {
			reason:  "A separator followed by anything but a comment is an error, not a document.",
			stream:  "kind: A\n--- kind: B\n",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			docs, err := Split([]byte(tc.stream))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nSplit(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			var got []string
			for _, d := range docs {
				got = append(got, string(d))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSplit(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
